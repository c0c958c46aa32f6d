package gate

import (
	"context"
	"time"

	"toolgate/internal/approval"
)

// wait blocks until the request leaves pending, deadline or the request's
// stored expiry passes (errDeadline), or ctx ends (its cause). It never
// waits on a fresh timeout: restarts do not extend a request. With lease
// set the request's lease is this process's (renewed in batches, see
// leases) and losing it ends the wait (errLeaseLost).
//
// A held call costs no goroutine and no ticker of its own: it re-reads the
// request only when woken (the change feed or a NOTIFY from another
// process or instance, a lease renewal that found it gone, a local change
// other than a decision), at the deadline, and, while the store cannot be
// read, on a backoff. A decision made in this process hands the waiter
// the decided request with the wake-up (hub.wakeDecided): no read. Its
// keep-alives come from the gate's one beat.
func (g *Gate) wait(ctx context.Context, id approval.ID, deadline time.Time, keepAlive func(context.Context), lease bool) (approval.Request, error) {
	r, err := g.waitFor(ctx, newHeldRead(id, deadline, keepAlive, lease))
	return *r, err
}

// waitFor is wait with its state in st (newHeldRead) and the request it
// ended on behind a pointer (never nil; zero when ctx ended or the store
// was never read), so that the frame a held call is parked in stays small
// (see heldCall, holdOn): the store is read in readHeld, and what the
// wait keeps between wake-ups is in st, on the heap.
//
// When st.ahead is set (takePre) the wait starts from the subscription
// and read readAhead made instead of a read of its own.
func (g *Gate) waitFor(ctx context.Context, st *heldRead) (*approval.Request, error) {
	if st.keepAlive != nil {
		// The first one at once: it tells the caller which approval it
		// waits for (and where to review it) without waiting a beat.
		st.keepAlive(ctx)
	}
	g.startHeld(st)
	defer g.stopHeld(st)
	for {
		if st.ahead {
			// Subscribed and read already, on the admitting goroutine.
			st.ahead = false
		} else {
			st.woke, st.unsub = g.hub.subscribe(string(st.id))
			if done, err := g.readHeld(ctx, st); done {
				st.unsub()
				return st.result(), err
			}
		}
	waiting:
		for {
			select {
			case <-st.woke.C:
				if st.takeDecided(st.woke) {
					st.unsub()
					return st.result(), nil
				}
				break waiting
			case <-st.retryC:
				break waiting
			case <-st.kaC:
				// A keep-alive needs no read of the store.
				st.keepAlive(ctx)
				st.kaC = g.beat.next(st.kaSlot)
			case <-st.timer.C:
				// Re-read once more: a decision may have landed at the
				// deadline (or the clock was stepped back: see due).
				st.due = true
				break waiting
			case <-ctx.Done():
				st.unsub()
				return new(approval.Request), context.Cause(ctx)
			}
		}
		st.unsub()
	}
}

// newHeldRead is the state of a wait for request id until deadline, with
// its keep-alive (nil: none) and whether this process holds the
// request's lease (see wait).
func newHeldRead(id approval.ID, deadline time.Time, keepAlive func(context.Context), lease bool) *heldRead {
	return &heldRead{id: id, deadline: deadline, lease: lease, backoff: minRetry, keepAlive: keepAlive}
}

// startHeld starts st's wait, after its first keep-alive: its place in
// the gate's beat (a slot of it) and its deadline's timer.
//
//go:noinline // its temporaries stay out of waitFor's parked frame
func (g *Gate) startHeld(st *heldRead) {
	if st.keepAlive != nil {
		st.kaSlot, st.kaC = g.beat.join()
	}
	st.timer = time.NewTimer(st.deadline.Sub(g.now()))
}

// stopHeld ends what startHeld and the reads started.
//
//go:noinline // its temporaries stay out of waitFor's parked frame
func (g *Gate) stopHeld(st *heldRead) {
	if st.keepAlive != nil {
		g.beat.leave(st.kaSlot)
	}
	st.timer.Stop()
	st.stop()
}

// heldRead is the state of one waitFor between reads of its request.
type heldRead struct {
	id       approval.ID
	deadline time.Time
	lease    bool
	kaSlot   uint8 // the beat's slot kaC is of (beat.join)
	// last is the request the wait ended on (the read or the wake-up that
	// ended it), nil while it goes on: the read made ahead (takePre) is not
	// kept, it is the request the call is held on (heldCall.r: what a
	// hold keeps of it, heldReq), which endHold falls back to.
	last *approval.Request
	// kept is what the wait keeps of its last read that found the request
	// still pending (a wake-up that changed nothing here, a lease renewal
	// that found it gone): the compact heldReq, not the whole Request
	// with the display copy of its arguments, for the rest of the hold
	// (docs/performance.md, "heldpeak3"); a wait that the store cannot be
	// read during ends on it at its deadline (result).
	kept    *heldReq
	retry   *time.Timer      // set while the store cannot be read
	retryC  <-chan time.Time // retry's channel after a failed read, else nil
	backoff time.Duration

	// What waitFor keeps between wake-ups (see there).
	keepAlive func(context.Context) // nil: no keep-alives
	kaC       <-chan struct{}       // the gate's next beat; nil without keep-alives
	timer     *time.Timer           // fires at deadline
	// due is set when timer fired; a read that finds the deadline not due
	// by the gate's clock (the wall clock was stepped back meanwhile) sets
	// timer again for the rest, instead of waiting for the request's expiry.
	due   bool
	woke  *wakeup // the current subscription's wake-up
	unsub func()  // ends the current subscription
	ahead bool    // woke and unsub are readAhead's (takePre)
	// onRetry, set for a wait without a goroutine (asyncHold), is called
	// when to read again while the store cannot be read, instead of
	// retryC firing.
	onRetry func()
}

// takePre starts st from pre, the subscription and read readAhead made.
//
//go:noinline // the request's copy stays out of waitFor's parked frame
func (st *heldRead) takePre(pre *preRead) {
	st.woke, st.unsub = pre.woke, pre.unsub
	st.ahead = true
}

// result is the request the wait ended on: st.last, else what st.kept
// keeps of its last read, or a zero request when the wait never read one
// of its own.
//
//go:noinline // inlined twice, its Request temporaries made waitFor's parked frame 1,480 B: the collector never halved a parked waiter's 8 KiB stack (fixes25)
func (st *heldRead) result() *approval.Request {
	switch {
	case st.last != nil:
		return st.last
	case st.kept != nil:
		r := st.kept.request()
		return &r
	}
	return new(approval.Request)
}

// takeDecided reports whether the wake-up w carried the request decided
// (no longer pending), as its waker wrote it; st.last is then that
// request, the wait is over without reading the store again (see hub),
// and whatever follows re-checks the stored row in its own conditional
// write. st.last is then the waker's request itself, which every reader
// copies (wait, endHold) and none modifies.
//
//go:noinline // kept out of waitFor's parked frame
func (st *heldRead) takeDecided(w *wakeup) bool {
	if w.decided == nil || w.decided.State == approval.StatePending || w.decided.ID != st.id {
		return false
	}
	st.last = w.decided // shared with its waker and other waiters, read only (hub.wakeDecided): not copied (≈ 600 B per approval)
	return true
}

func (st *heldRead) stop() {
	if st.retry != nil {
		st.retry.Stop()
	}
}

// readHeld reads st's request once. done is true when the wait is over:
// st.last is then the request to answer with and err why (nil: decided;
// errDeadline, errLeaseLost). Otherwise the wait goes on; while the store
// cannot be read st.retryC fires when to read again.
//
//go:noinline // the request and the log call stay out of waitFor's parked frame
func (g *Gate) readHeld(ctx context.Context, st *heldRead) (done bool, err error) {
	r, err := g.store.GetRequest(ctx, st.id)
	now := g.now()
	st.retryC = nil
	switch {
	case err == nil && r.State != approval.StatePending:
		st.last = &r
		return true, nil
	case err == nil && (!now.Before(r.ExpiresAt) || !now.Before(st.deadline)):
		st.last = &r
		return true, errDeadline
	case err == nil && st.lease && r.HeldBy != g.instance:
		st.last = &r
		return true, errLeaseLost
	case err == nil:
		// Still pending: the wait goes on, keeping only what it may end on.
		q := heldReqOf(&r)
		st.kept = &q
		st.backoff = minRetry
	case ctx.Err() == nil:
		// The store cannot be read: keep holding and read again soon.
		g.log.WarnContext(ctx, "cannot read held approval; retrying", "approval", st.id, "err", err)
		if !now.Before(st.deadline) {
			return true, errDeadline
		}
		switch {
		case st.retry == nil && st.onRetry != nil:
			st.retry = time.AfterFunc(st.backoff, st.onRetry) // a wait without a goroutine: retryC stays nil
		case st.retry == nil:
			st.retry = time.NewTimer(st.backoff)
		default:
			st.retry.Reset(st.backoff)
		}
		st.retryC = st.retry.C
		st.backoff = min(2*st.backoff, maxRetry)
	}
	if st.due {
		st.due = false
		st.timer.Reset(st.deadline.Sub(now))
	}
	return false, nil
}
