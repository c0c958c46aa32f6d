package gateway

import (
	"context"

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

// holdLean admits the plain call *call that AdmitUnlessHeld handed off
// (call.Prior set), holding it on the calling goroutine, and returns the
// gate's answer. The held call waits below admitCall, as on the SDK path,
// and below this frame and serveLean's only (TestLeanHeldCallWaitsInSmallFrames).
//
//go:noinline // the caller's frames are all that stay parked above admitCall
func (f *httpFront) holdLean(ctx context.Context, w *heartbeatWriter, call *gate.Call) *gate.Admission {
	w.arm() // keep-alives (SSE comments) while held, as bindRequest arms them
	return f.g.admitCall(ctx, call)
}
