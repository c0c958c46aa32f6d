package gateway

import (
	"context"
	"net/http"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// The lean front holds a plain tools/call the gate would hold (issue 13:
// a held call without the SDK's per-request machinery). It asks the gate
// once more, through Gate.AdmitOrHold (under one of the gateway's
// admission slots, admitbound.go) and Gate.WaitHold with the hand-off of
// AdmitUnlessHeld as Call.Prior (so the policy is evaluated once and the
// admission recorded once), on the POST's own goroutine, with the event
// stream's headers set
// and its heartbeat armed; the gate parks the call until it is decided,
// expires, reaches HTTPOptions' MaxHold, or its context ends: the agent's
// notifications/cancelled (cancelLean), a dropped connection
// (ErrClientGone after DropGrace), a session DELETE or Close (the
// gateway's call registry). The session's idle timer does not run
// meanwhile (the POST is in flight: leanSession.start). The answer is
// written by answerLean as for a call decided at once. See
// docs/architecture.md, "The lean front".

// holdsLean reports whether the front holds, rather than hands to the SDK
// path, the plain calls the gate would hold: whenever the Gatekeeper
// admits in place (Gate.AdmitTo), which keeps the held call's frames small.
func (f *httpFront) holdsLean() bool {
	_, ok := f.g.gk.(admitterTo)
	return ok
}

// A leanHold is a plain call the lean front holds: what serveLean built
// for it, and the cleanups the handling of its POST deferred, which run
// once it is answered (end). ServeHTTP holds it (wait) and answers it
// (answer) after the frames of serve and serveLean have returned, so that
// the parked connection goroutine keeps only net/http's frames, ServeHTTP,
// wait and the gate's small wait frames on its stack: few enough for the
// runtime to shrink it (TestLeanHeldCallWaitsInSmallFrames,
// docs/performance.md "Held calls at scale"). A 2026-07-28 call on
// HTTP/1.1 is parked off the connection instead (park, leanpark.go).
type leanHold struct {
	f    *httpFront
	ctx  context.Context //nolint:containedctx // the held call's own context, made by serveLean and ended by end; handed to ServeHTTP's wait like a request's
	w    *heartbeatWriter
	p    approval.Principal
	s    *leanSession
	m    leanRequest
	t    Tool
	call *gate.Call // Prior set: the hand-off of AdmitUnlessHeld
	// prog is the agent's progress channel when it sent a token
	// (leanprog.go): call.KeepAlive writes the keep-alives on it while
	// the call is held, answerLean relays the upstream's progress.
	prog *callProgress
	adm  *gate.Admission // the gate's answer, once wait returned
	// hctx is set while a call admitted ahead of its wait (admitFirst)
	// is held: the context to wait with (gate.Gate.WaitHold), and hold,
	// the hold taken out of its Admission (which is not kept).
	hctx context.Context //nolint:containedctx // the admission's span on ctx, handed from admitFirst to wait
	hold gate.HeldCall
	// mw, for a 2026-07-28 request's call (lean2026.go; w and s nil),
	// is its POST's response, answered by writeModernResult; relay is
	// its relay round. modern marks such a call; one with a progress
	// token has w (never armed) and prog in place of mw.
	mw     http.ResponseWriter
	relay  *relayRound
	modern bool
	// pc is the connection of a call parked off net/http's (leanpark.go).
	pc *parkedConn
	// later are the cleanups the handling of its POST deferred.
	later leanCleanups
}

// leanCleanups are what the handling of a lean POST defers: serve's and
// serveLean's (or serveLeanModern's) cleanups, as fields rather than
// closures, so that an allowed or denied call allocates none for them.
// Each function that fills some defers one settle, which runs them at
// once or, when the front holds the call, hands them to the leanHold to
// run once it is answered (leanHold.end). run keeps the order the
// separate defers had: the callee's (serveLean's, last registered first)
// before the caller's (serve's).
type leanCleanups struct {
	untrack   func()                  // the gateway's call registry (Close, DELETE, shutdown)
	stop      func() bool             // the watch on the POST's end (context.AfterFunc)
	untrackID func()                  // the session's in-flight request id
	cancel    context.CancelCauseFunc // the call's own context
	hb        *heartbeatWriter        // the POST's heartbeats
	end       func()                  // the session's busy mark (leanSession.start)
}

// run runs the cleanups that are set, in order.
func (c *leanCleanups) run() {
	if c.untrack != nil {
		c.untrack()
	}
	if c.stop != nil {
		c.stop()
	}
	if c.untrackID != nil {
		c.untrackID()
	}
	if c.cancel != nil {
		c.cancel(nil)
	}
	if c.hb != nil {
		c.hb.stop()
	}
	if c.end != nil {
		c.end()
	}
}

// settle runs c now, or, when held is not nil, adds c's cleanups to
// held's, to run once it is answered.
func (c *leanCleanups) settle(held *leanHold) {
	if held == nil {
		c.run()
		return
	}
	l := &held.later
	if c.untrack != nil {
		l.untrack = c.untrack
	}
	if c.stop != nil {
		l.stop = c.stop
	}
	if c.untrackID != nil {
		l.untrackID = c.untrackID
	}
	if c.cancel != nil {
		l.cancel = c.cancel
	}
	if c.hb != nil {
		l.hb = c.hb
	}
	if c.end != nil {
		l.end = c.end
	}
}

// end runs the held call's deferred cleanups.
func (l *leanHold) end() {
	l.later.run()
}

// wait admits the held call (call.Prior set), holding it on the calling
// goroutine with the event stream's heartbeat armed (keep-alives, as
// bindRequest arms them on the SDK path; the keep-alives of a call with a
// progress token stand for them), and keeps the gate's answer.
// The call waits below admitCall, as on the SDK path.
//
//go:noinline // ServeHTTP's and this frame are all that stay parked above admitCall
func (l *leanHold) wait() {
	l.armHold()
	switch {
	case l.hctx != nil:
		// Admitted and held by admitFirst: only the wait is left.
		hctx, hold := l.hctx, l.hold
		l.hctx, l.hold = nil, gate.HeldCall{}
		l.adm = l.f.g.gk.(admitterSplit).WaitHold(hctx, hold)
	case l.adm != nil:
		// admitFirst had the answer at once.
	default:
		if sp, ok := l.f.g.gk.(admitterSplit); ok {
			// Admitted under one of the gateway's admission slots
			// (admitbound.go), then held without it.
			if l.admitFirst(sp) {
				hctx, hold := l.hctx, l.hold
				l.hctx, l.hold = nil, gate.HeldCall{}
				l.adm = sp.WaitHold(hctx, hold)
			}
			return
		}
		l.adm = l.f.g.admitCall(l.ctx, l.call)
	}
}

// armHold arms the held call's heartbeat (a 2025-era session's call). A
// call with a progress token gets the gate's keep-alives while held, the
// first at once (it sends the headers), then one every keep-alive
// interval: no ": hb" comment besides (heartbeat.go); answerLean arms the
// heartbeat for the dispatch.
func (l *leanHold) armHold() {
	if l.w != nil && l.prog == nil {
		l.w.arm()
	}
}

// admitFirst admits the held call (call.Prior set) on the calling
// goroutine without waiting (gate.Gate.AdmitOrHold), and reports whether
// the gate holds it (wait then waits for the decision; else l.adm is the
// answer). A parked call is admitted on a goroutine that ends once the
// call is held (admitParked), so that the goroutine that then holds it for
// minutes does none of that work.
//
//go:noinline // its frame is gone before the call waits
func (l *leanHold) admitFirst(sp admitterSplit) bool {
	adm := new(gate.Admission)
	hctx, held := l.f.g.admitOrHold(l.ctx, sp, l.call, adm)
	if held {
		// Only the hold is kept while the call waits, not the Admission.
		l.hold, l.hctx = adm.TakeHold(), hctx
		return true
	}
	l.adm = adm
	return false
}

// admitterSplit is a Gatekeeper that admits a call and waits for its
// decision in two steps ([gate.Gate.AdmitOrHold], [gate.Gate.WaitHold]).
type admitterSplit interface {
	AdmitOrHold(ctx context.Context, c *gate.Call, adm *gate.Admission) (context.Context, bool)
	WaitHold(hctx context.Context, hc gate.HeldCall) *gate.Admission
}

// answer writes the gate's answer to the held call (answerLean).
//
//go:noinline // answerLean's arguments stay off ServeHTTP's frame
func (l *leanHold) answer() {
	if l.modern {
		var w http.ResponseWriter = l.w // with a progress token: its stream
		if l.mw != nil {
			w = l.mw
		}
		writeModernAnswer(w, l.f.g.impl, l.m.ID, l.f.g.answerModernSafe(l.ctx, l.p, l.t, l.call, l.adm, l.relay, l.prog))
		return
	}
	l.f.answerLean(l.ctx, l.w, l.p, l.s, l.m, l.t, l.call, l.adm, l.prog, nil)
}
