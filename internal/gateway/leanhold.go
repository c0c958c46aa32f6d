package gateway

import (
	"context"
	"net/http"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// The lean front holds a plain tools/call the gate would hold (issue 13:
// a held call without the SDK's per-request machinery). It asks the gate
// once more, through Gate.AdmitTo with the hand-off of AdmitUnlessHeld as
// Call.Prior (so the policy is evaluated once and the admission recorded
// once), on the POST's own goroutine, with the event stream's headers set
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
// docs/performance.md "Held calls at scale").
type leanHold struct {
	f    *httpFront
	ctx  context.Context //nolint:containedctx // the held call's own context, made by serveLean and ended by end; handed to ServeHTTP's wait like a request's
	w    *heartbeatWriter
	p    approval.Principal
	s    *leanSession
	m    leanRequest
	t    Tool
	call *gate.Call      // Prior set: the hand-off of AdmitUnlessHeld
	adm  *gate.Admission // the gate's answer, once wait returned
	// mw, for a 2026-07-28 request's call (lean2026.go; w and s nil),
	// is its POST's response, answered by writeModernResult; relay is
	// its relay round.
	mw    http.ResponseWriter
	relay *relayRound
	// later are the deferred cleanups, in the order they would have run.
	later []func()
}

// after has fn run once l is answered (end), after the cleanups handed
// over before it.
func (l *leanHold) after(fn func()) {
	l.later = append(l.later, fn)
}

// end runs the held call's deferred cleanups.
func (l *leanHold) end() {
	for _, fn := range l.later {
		fn()
	}
}

// wait admits the held call (call.Prior set), holding it on the calling
// goroutine with the event stream's heartbeat armed (keep-alives, as
// bindRequest arms them on the SDK path), and keeps the gate's answer.
// The call waits below admitCall, as on the SDK path.
//
//go:noinline // ServeHTTP's and this frame are all that stay parked above admitCall
func (l *leanHold) wait() {
	if l.w != nil {
		l.w.arm()
	}
	l.adm = l.f.g.admitCall(l.ctx, l.call)
}

// answer writes the gate's answer to the held call (answerLean).
//
//go:noinline // answerLean's arguments stay off ServeHTTP's frame
func (l *leanHold) answer() {
	if l.mw != nil {
		res, err := l.f.g.answerModern(l.ctx, l.p, l.t, l.call, l.adm, l.relay)
		writeModernResult(l.mw, l.f.g.impl, l.m.ID, res, err)
		return
	}
	l.f.answerLean(l.ctx, l.w, l.p, l.s, l.m, l.t, l.call, l.adm)
}
