package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// errDeadline marks a wait that reached its deadline (the request's expiry,
// or the retry wait of a re-send).
var errDeadline = errors.New("approval deadline reached")

// errLeaseLost marks a hold whose lease another identical call took over.
var errLeaseLost = errors.New("another identical call took over the approval")

// openIdentical returns the open requests an identical call (same
// principal, server, tool and argument hash) may attach to; on a store
// error ok is false with the refusal.
func (g *Gate) openIdentical(ctx context.Context, c Call, hash string) (open []approval.Request, refusal Admission, ok bool) {
	open, err := g.store.OpenIdentical(ctx, c.Principal.ID, c.Server, c.Tool, hash)
	if err != nil {
		return nil, g.storeRefusal(ctx, msgStoreUnavailable, "cannot look up identical requests; denying", err, "server", c.Server, "tool", c.Tool), false
	}
	return open, Admission{}, true
}

// attach lets an identical call use one of the open requests open (see
// openIdentical) instead of creating a duplicate: an unanswered denial is
// answered once; a retry-mode request is waited on for up to RetryWait; a
// hold-mode request whose holder is gone (its lease lapsed or was
// released) is taken over. ok is false when there is nothing to attach to
// and a new request must be made.
func (g *Gate) attach(ctx context.Context, c Call, open []approval.Request) (adm Admission, ok bool) {
	for _, r := range open {
		switch {
		case !c.sameKind(r.Kind):
			// A prompt and a tool of the same name are different things.
		case r.State == approval.StateDenied:
			_, err := g.store.UpdateRequest(ctx, r.ID, "toolgate", func(r *approval.Request) error { return r.Answer(g.now()) })
			if err == nil {
				g.log.InfoContext(ctx, "identical call answered with an earlier denial", "approval", r.ID)
				return Admission{ApprovalID: r.ID, Meta: g.approvalMeta(r),
					Message: fmt.Sprintf("denied by %s: %s; nothing was run", r.DecidedBy, orNone(r.Reason))}, true
			}
		case c.Defer && r.State == approval.StatePending:
			// A multi round-trip caller does not hold: it may wait on a
			// request nobody holds, never on one a live call holds.
			if !g.leases.has(r.ID, leaseHold) && r.LeaseLapsed(g.now()) {
				return g.pendingAnswer(r), true
			}
		case r.Mode == policy.ModeRetry && !c.Task:
			return g.resend(ctx, c, r), true
		case g.leases.has(r.ID, leaseHold):
			// A live call in this process holds it: two live identical calls
			// never share one approval.
		default:
			if taken, ok := g.takeOver(ctx, r); ok {
				g.log.InfoContext(ctx, "identical call took over an abandoned request", "approval", r.ID, "state", taken.State)
				return g.holdTaken(ctx, c, taken), true
			}
		}
	}
	return Admission{}, false
}

// takeOver makes this process the holder of r if r's lease lapsed. A lease
// held by another process may belong to a live call or to one that just
// died (kill -9, a dropped client on another instance): it waits once until
// that lease would end, then tries again; a holder that is alive has renewed
// it by then.
func (g *Gate) takeOver(ctx context.Context, r approval.Request) (approval.Request, bool) {
	for attempt := 0; attempt < 2; attempt++ {
		taken, err := g.store.UpdateRequest(ctx, r.ID, "toolgate", func(cur *approval.Request) error {
			now := g.now()
			if (cur.State != approval.StatePending && cur.State != approval.StateApproved) || !cur.LeaseLapsed(now) {
				return errNoChange
			}
			cur.Renew(g.instance, now.Add(g.opts.Lease))
			return nil
		})
		if err == nil {
			return taken, true
		}
		if attempt > 0 || !errors.Is(err, errNoChange) {
			return approval.Request{}, false
		}
		cur, err := g.store.GetRequest(ctx, r.ID)
		if err != nil || (cur.State != approval.StatePending && cur.State != approval.StateApproved) {
			return approval.Request{}, false
		}
		wait := min(cur.LeaseUntil.Sub(g.now()), g.opts.Lease) + 10*time.Millisecond
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return approval.Request{}, false
		case <-t.C:
		}
	}
	return approval.Request{}, false
}

// holdTaken holds c on r, which this process just took over: a task
// records its task first (an identical call may have made r) and is told
// it is held. Admit waits for the decision (heldCall).
func (g *Gate) holdTaken(ctx context.Context, c Call, r approval.Request) Admission {
	g.leases.add(r.ID, leaseHold) // Admit drops it after the wait (waitHeld)
	if c.Task {
		if err := g.recordTask(ctx, c, r); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
			g.releaseHold(ctx, r.ID)
			g.leases.drop(r.ID, leaseHold, false)
			return g.storeRefusal(ctx, msgStoreUnavailable, "cannot record the task of an approval request; denying", err, "approval", r.ID)
		}
	}
	if c.OnHold != nil && r.State == approval.StatePending {
		c.OnHold(r)
	}
	return heldOn(c, r)
}

// heldCall is a call to hold on a request whose lease this process holds
// (leaseHold): hold and holdTaken return it in Admission.held instead of
// waiting, and Admit waits for the decision (waitHeld) once their frames,
// and admit's, are gone. A held call is parked for minutes on its
// goroutine's stack, and the runtime shrinks a parked stack only when less
// than a quarter of it is in use: waiting below admit, admitDecided and
// hold kept every held call's goroutine at 32 KiB (docs/performance.md,
// "Held calls at scale", step 1).
type heldCall struct {
	// c is the call: the gate's own copy, or, for a call AdmitOrHold held,
	// the caller's, lent until WaitHold returns (a parked call then keeps
	// one Call, not two: docs/performance.md "heldmem4").
	c *Call
	// r is what the hold keeps of the request it is held on (heldReq):
	// not the whole approval.Request.
	r heldReq
	// dec is the policy decision admit made, recorded (Options.Recorder)
	// with the answer after the wait; nil on a resumed call, which admit
	// does not record.
	dec *policy.Decision
	// pre, when set, is the wait's first subscription to r's wake-ups
	// and what it knows of r after it (preRead): made before r was
	// created by the admission that created it (subscribeCreated), else
	// by AdmitOrHold on the admitting goroutine with a read
	// (readAhead). waitFor starts from it.
	pre *preRead
}

// heldReq is what a held call keeps of the request r it is held on
// (heldCall.r), as read or created when it was held: what the wait reads
// (id, expiry) and what the answer made from it when the store cannot be
// read at all during the wait needs (endHold: pendingAnswer's id, state,
// mode, rule, reviews, required approvals and expiry; a requestState's
// caller, server, tool, kind, argument hash and validity, RequestState).
// The rest of a Request (the display copy of the arguments and its
// warnings, approvers, tenant, tool digest, policy revision, lease,
// timestamps) is read by nothing while the call is held: keeping it cost
// a 568 B Request and the display copy per held call
// (docs/performance.md, "heldmem5"). Its strings are r's, not copies.
type heldReq struct {
	id                approval.ID
	state             approval.State
	server, tool      string
	kind              string
	argumentsHash     string
	rule, mode        string
	requestedBy       string
	expiresAt         time.Time
	validFor          time.Duration
	requiredApprovals int
	reviews           []approval.Review
}

// heldReqOf is what a held call keeps of r (see heldReq).
func heldReqOf(r *approval.Request) heldReq {
	return heldReq{
		id: r.ID, state: r.State, server: r.Server, tool: r.Tool, kind: r.Kind,
		argumentsHash: r.ArgumentsHash, rule: r.Rule, mode: r.Mode, requestedBy: r.RequestedBy,
		expiresAt: r.ExpiresAt, validFor: r.ValidFor, requiredApprovals: r.RequiredApprovals, reviews: r.Reviews,
	}
}

// request is the request q was made from, with the fields q keeps (see
// heldReq) and the others zero.
func (q *heldReq) request() approval.Request {
	return approval.Request{
		ID: q.id, State: q.state, Server: q.server, Tool: q.tool, Kind: q.kind,
		ArgumentsHash: q.argumentsHash, Rule: q.rule, Mode: q.mode, RequestedBy: q.requestedBy,
		ExpiresAt: q.expiresAt, ValidFor: q.validFor, RequiredApprovals: q.requiredApprovals, Reviews: q.reviews,
	}
}

// A preRead is a held call's first subscription to its request's
// wake-ups and the read of the request after it, made on the goroutine
// that admitted the call (AdmitOrHold) rather than on the one that then
// waits for minutes: a read of the store is deep (SQLite's frames grow a
// goroutine's stack to 16–32 KiB, which the runtime gives back only
// halving once per collection). Kept only when the read found the
// request pending, unexpired and held here; anything else is left to the
// wait's own first read.
type preRead struct {
	woke  *wakeup
	unsub func()
}

// subscribeCreated is the preRead of a request this process is about to
// create (id), for the call held on it: the subscription is made before
// the request exists, so no read is needed after it. Once the creation
// commits the request is pending, unexpired and held here (its lease was
// taken before), and every later change wakes the subscription (a
// decision of this process through the hub, another instance's through
// the store's watch); nothing can change it before it exists. A read
// after the creation would only find what this process just wrote, and
// on Postgres, at the end of a burst of admissions, thousands of
// admitting goroutines (each an HTTP connection's, with its deep stack)
// were still queued for a pool connection to make it: 0.2–0.7 goroutines
// and 70–147 MB of stacks per 10,000 held calls at the moment all were
// pending (docs/performance.md, "heldpeak").
//
// held false (the call will not be held on it): nil.
func (g *Gate) subscribeCreated(id approval.ID, held bool) *preRead {
	if !held {
		return nil
	}
	woke, unsub := g.hub.subscribe(string(id))
	return &preRead{woke: woke, unsub: unsub}
}

// drop ends the subscription of a preRead that no wait will take (the
// request was not created, or the call is not held on it). nil: nothing.
func (p *preRead) drop() {
	if p != nil {
		p.unsub()
	}
}

// readAhead makes h's preRead (see there), unless it has one: the
// subscription its admission made before creating the request
// (subscribeCreated), which needs no read.
//
//go:noinline // the store read's frames are gone before the call is handed to its waiter
func (g *Gate) readAhead(ctx context.Context, h *heldCall) {
	if h.pre != nil {
		return
	}
	deadline := h.r.expiresAt
	if h.c.MaxHold > 0 && g.now().Add(h.c.MaxHold).Before(deadline) {
		deadline = g.now().Add(h.c.MaxHold)
	}
	st := newHeldRead(h.r.id, deadline, nil, true)
	woke, unsub := g.hub.subscribe(string(h.r.id))
	// A panic in the read (a store bug) escaped AdmitOrHold on a goroutine
	// nothing recovers on, the request held by this process with no call
	// waiting (attack14). The read only saves the wait one: without it
	// the wait reads the request itself (its panics fail closed there).
	defer g.readAheadPanicked(h, st, unsub)
	done, err := g.readHeld(ctx, st)
	st.stop()
	if done || err != nil || st.retryC != nil {
		unsub()
		return
	}
	h.pre = &preRead{woke: woke, unsub: unsub}
}

// readAheadPanicked, deferred by readAhead, recovers a panic of its read
// st: the call waits without the read made ahead (h.pre stays nil), and
// st's retry timer and readAhead's subscription (unsub) end.
func (g *Gate) readAheadPanicked(h *heldCall, st *heldRead, unsub func()) {
	if v := recover(); v != nil {
		g.log.Error("panic while reading a held call's request ahead; its wait reads it", "approval", h.r.id, "panic", fmt.Sprint(v))
		h.pre = nil
		st.stop()
		unsub()
	}
}

// heldOnCreated is heldOn for a request r the admission just created,
// with the subscription it made before (subscribeCreated).
func heldOnCreated(c Call, r approval.Request, pre *preRead) Admission {
	adm := heldOn(c, r)
	adm.held.pre = pre
	return adm
}

// heldOn is the Admission that asks Admit to hold c on r (see heldCall).
//
//go:noinline // c is copied to the heap only for a call that is held
func heldOn(c Call, r approval.Request) Admission {
	cp := new(Call)
	*cp = c
	return Admission{held: &heldCall{c: cp, r: heldReqOf(&r)}}
}

// waitHeld holds the call of adm.held until its request is decided,
// expires, the caller goes away or its MaxHold passes (holdOn), and
// replaces *adm with the answer (see afterHold).
func (g *Gate) waitHeld(ctx context.Context, adm *Admission) {
	h := adm.held
	if heldEventsInTests && h.c.KeepAlive == nil {
		// The same wait on the gate's events (heldasync.go), so that every
		// held-call test of the gate runs it too (TestMain).
		ch := make(chan *Admission, 1)
		g.holdEvents(ctx, h, false, func(a *Admission) { ch <- a })
		*adm = *<-ch
		return
	}
	ans := g.holdOn(ctx, h)
	g.afterHold(ctx, h, ans)
	*adm = *ans
}

// afterHold ends this process's hold on the lease of h's request and
// records the answer adm, as admit records the answers it gives at once.
//
//go:noinline // its locals stay out of waitHeld's parked frame
func (g *Gate) afterHold(ctx context.Context, h *heldCall, adm *Admission) {
	g.leases.drop(h.r.id, leaseHold, false)
	if h.dec != nil {
		adm.Monitor = h.dec.Monitor
		g.recordHeld(ctx, h, adm) // waitpanic.go
	}
}

// holdOn holds h's call on its request, which this process holds the
// lease of, until it is decided, expires, the caller goes away, or
// c.MaxHold passes (then the request stays pending, its lease released,
// and the answer is Pending), and returns the answer, made after the
// wait (a held call keeps no Admission while it waits). It and waitFor
// are the frames a held call is parked in: everything the wait keeps is
// on the heap (holdWait, heldRead), made by a function that returns
// before the wait (startWait), and settled by one that runs after it
// (endHold), so that a parked waiter uses under a quarter of a 4 KiB
// stack (see heldCall; docs/performance.md "Smaller held calls").
func (g *Gate) holdOn(ctx context.Context, h *heldCall) (adm *Admission) {
	wctx, w := g.startWait(ctx, h)
	defer func() {
		if v := recover(); v != nil {
			adm = g.waitPanicked(ctx, h, w, v) // fails closed (waitpanic.go)
		}
	}()
	got, err := g.waitFor(wctx, w.st)
	w.settling = true
	return g.endHold(ctx, h, w, got, err)
}

// holdWait is what one hold keeps besides its heldCall, on the heap (see
// holdOn).
type holdWait struct {
	start time.Time  // when the wait started
	span  trace.Span // the wait's, on the context startWait returns
	// withdraw ends the call's offer to this process's decisions
	// (hub.offer).
	withdraw func() *consumeClaim
	st       *heldRead // the wait's state, deadline and first read made ahead included
	settling bool      // the wait is over: endHold runs (see waitPanicked)
}

// startWait starts the span of h's approval wait, offers the call to this
// process's decisions, and returns ctx with the wait's span and the
// hold's state: its deadline (the
// request's expiry, or MaxHold from now when that is sooner) and its
// keep-alive (nil when the call has none) are in the wait's heldRead.
//
//go:noinline // its temporaries stay out of holdOn's parked frame
func (g *Gate) startWait(ctx context.Context, h *heldCall) (context.Context, *holdWait) {
	w := &holdWait{start: g.now()}
	deadline := h.r.expiresAt
	if h.c.MaxHold > 0 && w.start.Add(h.c.MaxHold).Before(deadline) {
		deadline = w.start.Add(h.c.MaxHold)
	}
	wctx, span := g.opts.Tracer.Start(ctx, "approval wait", trace.WithAttributes(attribute.String("approval.id", string(h.r.id))))
	w.span = span
	w.st = newHeldRead(h.r.id, deadline, g.keepAlive(*h.c, h.r.id, h.r.rule, h.r.expiresAt), true)
	if h.pre != nil {
		// The wait starts from the read made ahead; nothing keeps the
		// preRead itself for the hold.
		w.st.takePre(h.pre)
		h.pre = nil
	}
	// The call's consume token, before the call is offered: a decision's
	// consume for it and its own carry the same (see consumeCheck).
	h.c.consumeToken = newConsumeToken()
	w.withdraw = g.hub.offer(ctx, string(h.r.id), h.c)
	return wctx, w
}

// endHold settles a hold w that waitFor ended with got and err at or
// before its deadline into an answer: MaxHold's end answers Pending, a
// decision is acted on (settle), anything else abandons the hold
// (abandon). When a decision consumed the request for the call in its own
// transaction (w.withdraw returns its claim), the call is dispatched on
// that consume, whatever ended the wait.
//
//go:noinline // its locals stay out of holdOn's parked frame
func (g *Gate) endHold(ctx context.Context, h *heldCall, w *holdWait, gotp *approval.Request, err error) *Admission {
	adm := new(Admission)
	got := *gotp
	span, deadline := w.span, w.st.deadline
	if cl := w.withdraw(); cl != nil {
		// A decision took the call: wait for its transaction (it may be
		// consuming the request for this call).
		<-cl.done
		if cl.used {
			g.metrics.ApprovalWaited(g.now().Sub(w.start).Seconds())
			endWait(span, approval.Request{State: approval.StateApproved}, nil) // the decision, as in settle's path
			*adm = g.afterConsume(ctx, *h.c, h.r.id, cl.r, cl.k, nil)
			return adm
		}
	}
	g.metrics.ApprovalWaited(g.now().Sub(w.start).Seconds())
	endWait(span, got, err)
	if got.ID == "" {
		got = h.r.request() // the store could not be read at all meanwhile: what was known
	}
	switch {
	case errors.Is(err, errDeadline) && deadline.Before(h.r.expiresAt) && got.State == approval.StatePending:
		// MaxHold passed first: the caller cannot wait longer. The request
		// stays open for the identical re-send (or the next round).
		g.releaseHold(ctx, h.r.id)
		g.log.InfoContext(ctx, "call answered before its approval was decided (max hold); the approval stays pending", "approval", h.r.id)
		*adm = g.pendingAnswer(got)
	case err != nil:
		*adm = g.abandon(ctx, *h.c, h.r.id, err)
	default:
		*adm = g.settle(ctx, *h.c, got)
	}
	return adm
}

// endWait ends an approval wait span; approval.decision is the state the
// wait ended on (approved, denied, cancelled…), "timeout" at the deadline,
// or "abandoned" when the caller went away.
func endWait(span trace.Span, r approval.Request, err error) {
	decision := string(r.State)
	switch {
	case errors.Is(err, errDeadline):
		decision = "timeout"
	case err != nil:
		decision = "abandoned"
	}
	span.SetAttributes(attribute.String("approval.decision", decision))
	span.End()
}

// resend answers an identical re-send of a retry-mode call: it waits up to
// RetryWait for a decision, then answers "still pending" with the same id.
func (g *Gate) resend(ctx context.Context, c Call, r approval.Request) Admission {
	deadline := g.now().Add(g.opts.RetryWait)
	if r.ExpiresAt.Before(deadline) {
		deadline = r.ExpiresAt
	}
	wctx, span := g.opts.Tracer.Start(ctx, "approval wait", trace.WithAttributes(attribute.String("approval.id", string(r.ID))))
	got, err := g.wait(wctx, r.ID, deadline, g.keepAlive(c, r.ID, r.Rule, r.ExpiresAt), false)
	endWait(span, got, err)
	switch {
	case errors.Is(err, errDeadline) && g.now().Before(r.ExpiresAt):
		return g.approvalRequired(got, "approval still pending")
	case errors.Is(err, errDeadline):
		return g.abandon(ctx, c, r.ID, err)
	case err != nil:
		// The caller went away; a retry-mode request has no holder to release.
		return Admission{ApprovalID: r.ID, Message: "the caller went away while waiting"}
	}
	return g.settle(ctx, c, got)
}

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
				st.kaC = g.beat.next()
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
// the gate's beat and its deadline's timer.
//
//go:noinline // its temporaries stay out of waitFor's parked frame
func (g *Gate) startHeld(st *heldRead) {
	if st.keepAlive != nil {
		st.kaC = g.beat.join()
	}
	st.timer = time.NewTimer(st.deadline.Sub(g.now()))
}

// stopHeld ends what startHeld and the reads started.
//
//go:noinline // its temporaries stay out of waitFor's parked frame
func (g *Gate) stopHeld(st *heldRead) {
	if st.keepAlive != nil {
		g.beat.leave()
	}
	st.timer.Stop()
	st.stop()
}

// heldRead is the state of one waitFor between reads of its request.
type heldRead struct {
	id       approval.ID
	deadline time.Time
	lease    bool
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
// write.
//
//go:noinline // the request's copy stays out of waitFor's parked frame
func (st *heldRead) takeDecided(w *wakeup) bool {
	if w.decided == nil || w.decided.State == approval.StatePending || w.decided.ID != st.id {
		return false
	}
	r := *w.decided
	st.last = &r
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

// abandon handles a hold that ended without a usable decision. At the
// deadline it expires the request; if a decision landed first (the holder
// read "pending" just before an approval committed), it settles that
// decision for c, so an approval that was answered 200 is consumed by the
// call that is still waiting for it. Writes the store cannot take right
// now (unreachable, busy) are retried while the caller waits: answering
// "timed out" for a request that is in fact approved would lose a human's
// yes (issue 9, defect 13).
func (g *Gate) abandon(ctx context.Context, c Call, id approval.ID, cause error) Admission {
	switch {
	case errors.Is(cause, errDeadline):
		var (
			r       approval.Request
			expired bool
		)
		err := g.retryStore(ctx, func(actx context.Context) error {
			var err error
			r, err = g.store.UpdateRequest(actx, id, "toolgate", func(r *approval.Request) error { return r.Expire(g.now()) })
			if errors.Is(err, approval.ErrResolved) || errors.Is(err, approval.ErrNotDue) {
				// Someone else settled it first: act on what is stored.
				r, err = g.store.GetRequest(actx, id)
				return err
			}
			expired = err == nil
			return err
		})
		if err != nil {
			g.log.ErrorContext(ctx, "cannot expire approval; the caller is gone or the store failed", "approval", id, "err", err)
			g.releaseHold(ctx, id)
			return Admission{ApprovalID: id, Timeout: true, Message: "timed out waiting for approval; nothing was run"}
		}
		if expired {
			g.metrics.ApprovalDecided(string(approval.StateExpired))
			g.log.InfoContext(ctx, "approval expired", "approval", id) // as the sweeper logs it
		}
		g.hub.wake(string(id))
		if ctx.Err() != nil {
			c = Call{} // the caller is gone: nothing can be dispatched
		}
		return g.settle(ctx, c, r)
	case errors.Is(cause, errLeaseLost):
		return Admission{ApprovalID: id, Message: "refused: " + errLeaseLost.Error() + "; nothing was run here"}
	case errors.Is(cause, errWaitPanicked):
		// Left as when the caller goes away (below), but the caller is
		// still there: it is told.
		g.releaseHold(ctx, id)
		return Admission{ApprovalID: id, Message: fmt.Sprintf("refused: %v; nothing was run. Approval %s stays pending: re-send the identical call to pick it up", errWaitPanicked, id)}
	case errors.Is(cause, context.Canceled) && !g.stopping.Load():
		// An explicit notifications/cancelled from the caller: record it,
		// retrying for a while (the caller's context is already done).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.Lease)
		defer cancel()
		err := g.retryStore(rctx, func(actx context.Context) error {
			_, err := g.store.UpdateRequest(actx, id, "toolgate", func(r *approval.Request) error { return r.Cancel(g.now()) })
			return err
		})
		switch {
		case err == nil:
			g.metrics.ApprovalDecided(string(approval.StateCancelled))
		case !errors.Is(err, approval.ErrResolved):
			g.log.ErrorContext(ctx, "cannot cancel approval", "approval", id, "err", err)
			g.releaseHold(ctx, id)
		}
		g.hub.wake(string(id))
		g.log.InfoContext(ctx, "held call cancelled by the caller", "approval", id)
		return Admission{Message: "cancelled by the caller", ApprovalID: id}
	default:
		// The caller went away or the gateway is stopping: leave the request
		// as it is and release the lease, so an identical re-send can take it
		// over at once.
		g.releaseHold(ctx, id)
		if g.stopping.Load() {
			g.log.InfoContext(ctx, "gateway stopping; approval stays open for an identical re-send", "approval", id)
			return Admission{ApprovalID: id, Message: fmt.Sprintf("the gateway is shutting down; nothing was run. Approval %s stays pending: re-send the identical call to pick it up", id)}
		}
		g.log.InfoContext(ctx, "caller gone while held; approval stays open for an identical re-send", "approval", id, "cause", cause)
		return Admission{Message: "the caller went away while the call was held", ApprovalID: id}
	}
}

// releaseHold stops renewing this process's hold on id and ends its lease
// now, so an identical re-send can take the request over at once. It is
// best effort: a lease that could not be released lapses by itself.
func (g *Gate) releaseHold(ctx context.Context, id approval.ID) {
	g.leases.drop(id, leaseHold, true)
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	defer cancel()
	_, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error {
		if r.HeldBy != g.instance || !r.LeaseUntil.After(g.now()) {
			return errNoChange
		}
		r.Release(g.instance, g.now())
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		g.log.WarnContext(ctx, "cannot release the lease of an abandoned hold", "approval", id, "err", err)
	}
}
