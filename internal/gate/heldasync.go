package gate

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"toolgate/internal/approval"

	"go.opentelemetry.io/otel/trace"
)

// Held calls waited for without a goroutine (issue 13, docs/performance.md
// "heldwait"). WaitHold parks one goroutine per held call in waitFor for
// the whole hold (≈ 4 KiB of stack each at 10,000 held calls). A call
// waited for with WaitHoldFunc keeps none: it is an asyncHold, reached
// only through its events,
//
//   - a wake-up of its request (a hub subscription made by subscribeFunc,
//     whose callback runs under the hub's lock),
//   - its deadline (one runtime timer, time.AfterFunc: the runtime's own
//     timer heap, driven by no goroutine of the gate),
//   - a read retry while the store cannot be read (another AfterFunc, set
//     only then),
//   - the end of its context (context.AfterFunc: the caller cancelled,
//     its connection went away, or the gateway is closing),
//
// each of which records itself and, unless one runs already, starts a
// short-lived goroutine (run) that does what waitFor's loop does for
// that event: take a decided request from the wake-up, or end the
// subscription, subscribe again and read the store (subscribing before
// reading, so that a wake-up between the two is not lost: it either
// precedes the read, which sees its change, or fires the new
// subscription, which runs another step). Events that arrive while a step
// runs are taken by the same goroutine before it ends, so steps of one
// call never run at once and none is dropped. When the wait is over the
// same goroutine settles it as WaitHold does after waitFor (endHold,
// afterHold, endAdmit) and hands the answer to the caller's done.
//
// A call with keep-alives (Call.KeepAlive: the caller sent a progress
// token) gets them without a goroutine too: the first at once, from
// WaitHoldFunc's caller (as waitFor sends it before it waits), then one
// at each beat of its slot of the gate's beat, called back from the
// beat's own goroutine (beat.joinFunc; onBeat), until the wait is over
// (finish leaves the beat first, and leaveFunc returns only once no
// keep-alive of the call runs: none goes out after it). The keep-alive
// must not block: the gateway's parked 2025-era calls write it on their
// connection without waiting (leanstream.go), and take a write that
// would block for the client gone.

// Events of an asyncHold, a set.
const (
	evStart    uint8 = 1 << iota // the wait's first read (no read made ahead)
	evWake                       // a subscription's wake-up (asyncHold.woken)
	evDeadline                   // the deadline's timer
	evRetry                      // the retry's timer (the store could not be read)
	evCancel                     // the call's context ended
	evPanic                      // a keep-alive panicked (onBeat)
)

// An asyncHold is a held call waited for without a goroutine (see above).
type asyncHold struct {
	g    *Gate
	ctx  context.Context //nolint:containedctx // the hold's context (WaitHold's hctx), for endHold and afterHold
	wctx context.Context //nolint:containedctx // ctx with the wait's span: what the reads run under
	h    *heldCall
	w    *holdWait
	done func(*Admission)
	// admitEnd: finish ends the admission's span (endAdmit), as WaitHold.
	admitEnd bool

	stopCtx func() bool // ends the watch on wctx
	ka      *beatFunc   // the call's keep-alives on the gate's beat; nil without

	// got and err are what the wait ended on (waitFor's results); owned
	// by the step that ends it.
	got *approval.Request
	err error

	mu sync.Mutex
	// ev are the events not yet taken by a step; woken the subscription
	// whose wake-up was the last evWake. running is set while a step's
	// goroutine runs, and stays set once the wait ended. Guarded by mu.
	ev      uint8
	woken   *wakeup
	running bool
}

// WaitHoldFunc is WaitHold without a goroutine waiting: it returns at
// once, and done is called exactly once, with the answer WaitHold would
// have returned, on a goroutine of the gate's that ends when done
// returns (done may block; it writes the answer). Until then the call
// costs its asyncHold, a hub subscription and two runtime timers (see
// above). hctx is the context AdmitOrHold returned; its end (cancel,
// caller gone, shutdown) ends the wait as it ends WaitHold's.
// A call with keep-alives costs a place on the gate's beat besides; its
// first keep-alive is sent before WaitHoldFunc returns.
func (g *Gate) WaitHoldFunc(hctx context.Context, hc HeldCall, done func(*Admission)) {
	g.holdEvents(hctx, hc.h, true, done)
}

// holdEvents holds h's call on its request as holdOn does, without a
// goroutine (see above), and calls done with the answer after afterHold
// (and endAdmit when admitEnd is set, as WaitHold).
func (g *Gate) holdEvents(hctx context.Context, h *heldCall, admitEnd bool, done func(*Admission)) {
	wctx, w := g.startWait(hctx, h)
	a := &asyncHold{g: g, ctx: hctx, wctx: wctx, h: h, w: w, done: done, admitEnd: admitEnd}
	st := w.st
	st.onRetry = a.onRetry
	// No step runs before the wait is set up: events that come meanwhile
	// are only recorded (kick). a.mu is not held here, so that the hub's
	// lock is never taken under it (a wake-up takes a.mu under the hub's).
	a.running = true
	if st.keepAlive != nil {
		// The first one at once, as waitFor sends it, then the beat's.
		a.onBeat()
		a.ka = g.beat.joinFunc(a.onBeat)
	}
	var ev uint8
	var woken *wakeup
	if st.ahead {
		// Subscribed and read already, on the admitting goroutine: the
		// subscription now calls back, or was woken meanwhile.
		st.ahead = false
		if !g.hub.notifyFunc(st.woke, a.onWake) {
			ev, woken = evWake, st.woke
		}
	} else {
		ev = evStart
	}
	st.timer = time.AfterFunc(st.deadline.Sub(g.now()), a.onDeadline) // set again by readHeld if due early (heldRead.due)
	a.stopCtx = context.AfterFunc(wctx, a.onCancel)
	a.mu.Lock()
	a.ev |= ev
	if woken != nil && a.woken == nil {
		a.woken = woken
	}
	start := a.ev != 0
	a.running = start
	a.mu.Unlock()
	if start {
		go a.run()
	}
}

func (a *asyncHold) onWake(w *wakeup) { a.kick(evWake, w) }
func (a *asyncHold) onDeadline()      { a.kick(evDeadline, nil) }
func (a *asyncHold) onRetry()         { a.kick(evRetry, nil) }
func (a *asyncHold) onCancel()        { a.kick(evCancel, nil) }

// onBeat sends the call's keep-alive: the first from holdEvents, then one
// at its slot's every beat, on the beat's goroutine (see above). A panic
// in it would end the process (nothing above it recovers) and the beat's
// other calls' keep-alives: it ends the wait as a panic in a step does
// (evPanic, errWaitPanicked), as a keep-alive's panic in waitFor does
// (waitPanicked).
func (a *asyncHold) onBeat() {
	defer func() {
		if v := recover(); v != nil {
			a.g.log.Error("panic in a held call's keep-alive; refusing the call, the approval stays pending", "approval", a.w.st.id,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			a.kick(evPanic, nil)
		}
	}()
	a.w.st.keepAlive(a.wctx)
}

// kick records the event ev (w: the subscription woken, for evWake) and
// starts a step unless one runs (or the wait ended).
func (a *asyncHold) kick(ev uint8, w *wakeup) {
	a.mu.Lock()
	a.ev |= ev
	if w != nil {
		a.woken = w
	}
	start := !a.running
	a.running = true
	a.mu.Unlock()
	if start {
		go a.run()
	}
}

// run takes the events recorded and steps the wait until none is left,
// or settles it once it is over.
func (a *asyncHold) run() {
	for {
		a.mu.Lock()
		ev, woken := a.ev, a.woken
		a.ev, a.woken = 0, nil
		if ev == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		if a.stepSafe(ev, woken) {
			a.finish()
			return
		}
	}
}

// A panic on a step's or the settling's goroutine (a goroutine of the
// gate's, or of the caller's hub, timer or context: nothing above it
// recovers) would end the process, every held call with it (attack12).
// Both recover it and fail closed: a step's panic ends the wait as the
// caller's going away would (errWaitPanicked: the request stays pending,
// its lease released for an identical re-send; nothing runs), and a panic
// while settling answers the call refused unless done was called.

// errWaitPanicked ends a wait whose step panicked (stepSafe).
var errWaitPanicked = errors.New("internal error while the call was held")

// stepSafe is step with a panic made into the end of the wait
// (errWaitPanicked); the step's subscription is ended.
func (a *asyncHold) stepSafe(ev uint8, woken *wakeup) (over bool) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		a.g.log.Error("panic in a held call's wait; refusing the call, the approval stays pending", "approval", a.w.st.id,
			"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		if a.w.st.unsub != nil {
			a.w.st.unsub()
		}
		a.got, a.err = new(approval.Request), errWaitPanicked
		over = true
	}()
	return a.step(ev, woken)
}

// step does what waitFor does for the events ev (woken: the subscription
// of the last wake-up, if any) and reports whether the wait is over
// (a.got, a.err set).
func (a *asyncHold) step(ev uint8, woken *wakeup) bool {
	st := a.w.st
	if ev&evPanic != 0 {
		if st.unsub != nil {
			st.unsub()
		}
		a.got, a.err = new(approval.Request), errWaitPanicked
		return true
	}
	if ev&evCancel != 0 || a.wctx.Err() != nil {
		if st.unsub != nil { // nil before the first read's subscription
			st.unsub()
		}
		a.got, a.err = new(approval.Request), context.Cause(a.wctx)
		return true
	}
	current := woken != nil && woken == st.woke
	if current && st.takeDecided(woken) {
		st.unsub()
		a.got, a.err = st.result(), nil
		return true
	}
	if !current && ev&(evStart|evDeadline|evRetry) == 0 {
		// Only the wake-up of a subscription ended since: the read made
		// after it began sees its change.
		return false
	}
	// Read again (a wake-up without a row, the deadline: a decision may
	// have landed at it, the retry), subscribed first.
	if ev&evDeadline != 0 {
		st.due = true
	}
	if st.unsub != nil {
		st.unsub()
	}
	st.woke, st.unsub = a.g.hub.subscribeFunc(string(st.id), a.onWake)
	if done, err := a.g.readHeld(a.wctx, st); done {
		st.unsub()
		a.got, a.err = st.result(), err
		return true
	}
	return false
}

// finish settles the wait as WaitHold does after waitFor and hands the
// answer to done.
//
// A panic before done is called answers the call refused (nothing was
// run here); one in done is logged (see stepSafe).
func (a *asyncHold) finish() {
	g, h := a.g, a.h
	answered := false
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		id := a.w.st.id
		g.log.Error("panic while answering a held call", "approval", id, "answered", answered,
			"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		if !answered {
			answered = true
			g.letGoRefused(a.ctx, id, h.c.consumeToken, h.c.hold)
			a.done(&Admission{ApprovalID: id, Message: "refused: internal error while answering the held call; nothing was run here"})
		}
	}()
	if a.ka != nil {
		a.g.beat.leaveFunc(a.ka) // no keep-alive after the wait (see above)
	}
	a.w.st.timer.Stop()
	a.stopCtx()
	a.w.st.stop()
	adm := g.endHold(a.ctx, h, a.w, a.got, a.err)
	g.afterHold(a.ctx, h, adm)
	if a.admitEnd {
		g.endAdmit(trace.SpanFromContext(a.ctx), adm)
	}
	answered = true
	a.done(adm)
}

// releaseRefused lets go of this process's hold on request id for a
// held call refused after a panic while it was settled (finish): afterHold,
// which lets it go, was not reached, and the approved (or pending)
// request stayed held by a call that no longer waited, renewed for as
// long as the process ran, so that an identical re-send asked for a new
// approval instead of taking this one over (attack13). As abandon does
// for a caller gone, the request is left as it is, its lease released. A
// request no longer pending or approved (consumed: notDispatched's) keeps
// its lease, which is no longer the hold's.
func (g *Gate) releaseRefused(ctx context.Context, id approval.ID, m holdMark) {
	end := g.leases.release(id, m) // as releaseHold
	if end == nil {
		return // afterHold ended the hold (the request was settled or released), or m is none
	}
	defer end()
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	defer cancel()
	_, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error {
		if (r.State != approval.StatePending && r.State != approval.StateApproved) || r.HeldBy != g.instance || !r.LeaseUntil.After(g.now()) {
			return errNoChange
		}
		r.Release(g.instance, g.now())
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		g.log.WarnContext(ctx, "cannot release the lease of a held call refused after an internal error", "approval", id, "err", err)
	}
}

// notDispatched records outcome transport_error on request id when a
// consume of this call (its consume token tok) committed and nothing was
// dispatched on it (finish panicked before the answer), and ends its
// dispatch lease: the request does not stay consumed without an outcome
// (for the sweeper to call "unknown") for a call that never ran. A
// request consumed by another call, or not consumed, is left alone.
func (g *Gate) notDispatched(ctx context.Context, id approval.ID, tok string) {
	defer g.leases.drop(id, leaseDispatch)
	if tok == "" {
		return
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	defer cancel()
	_, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error {
		if r.State != approval.StateConsumed || r.ConsumeToken != tok || r.DispatchOutcome != approval.OutcomeNone {
			return errNoChange
		}
		return r.RecordOutcome(approval.OutcomeTransportError)
	})
	switch {
	case err == nil:
		g.log.WarnContext(ctx, "approval consumed for a call refused after an internal error; recorded as not dispatched", "approval", id)
	case !errors.Is(err, errNoChange):
		g.log.ErrorContext(ctx, "cannot record that a consumed approval was not dispatched", "approval", id, "err", err)
	}
}

// heldEventsInTests makes Admit wait for held calls on the gate's events
// (holdEvents) instead of on its goroutine; set only by the gate's tests
// (TestMain, TOOLGATE_HELD_EVENTS=1).
var heldEventsInTests bool
