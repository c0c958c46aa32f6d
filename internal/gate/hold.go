package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// errDeadline marks a wait that reached its deadline (the request's expiry,
// or the retry wait of a re-send).
var errDeadline = errors.New("approval deadline reached")

// errLeaseLost marks a hold whose lease another identical call took over.
var errLeaseLost = errors.New("another identical call took over the approval")

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
	g.leases.unhold(h.r.id, h.c.hold) // this hold's mark only: released already when abandoned
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
	w.st = newHeldRead(h.r.id, deadline, g.keepAlive(*h.c, h.r.id, h.r.rule, h.r.expiresAt, h.r.state), true)
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
		g.releaseHold(ctx, h.r.id, h.c.hold)
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
	got, err := g.wait(wctx, r.ID, deadline, g.keepAlive(c, r.ID, r.Rule, r.ExpiresAt, r.State), false)
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
