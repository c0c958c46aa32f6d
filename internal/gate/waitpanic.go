package gate

import (
	"context"
	"fmt"
	"runtime/debug"

	"toolgate/internal/approval"
)

// A panic in the wait of a held call waited for on a goroutine (holdOn:
// WaitHold, AdmitTo; calls with keep-alives, the SDK path's held calls,
// task runners) ended the process, every held call with it: nothing
// above those goroutines recovers (the go-sdk's handlers have no
// recover), and attack12 contained only the wait on events (stepSafe,
// asyncHold.finish). holdOn now fails closed the same way (attack13):
//
//   - a panic during the wait (a read of the store, a wake-up) ends it as
//     the event wait's step does (errWaitPanicked through endHold: a
//     decision of this process that consumed for the call in its own
//     transaction is still acted on; otherwise the call is refused and
//     the request stays pending with its lease released, for an
//     identical re-send to take over);
//   - a panic while settling (endHold: the consume, the answer) refuses
//     the call, records transport_error on a consume of this call that
//     committed (notDispatched: nothing was dispatched, the gateway
//     dispatches only after Admit returns) and lets go of the hold
//     (releaseRefused).

// waitPanicked is the answer of holdOn (h's call, w its wait) after the
// panic v (see above).
//
//go:noinline // its work stays out of holdOn's parked frame
func (g *Gate) waitPanicked(ctx context.Context, h *heldCall, w *holdWait, v any) *Admission {
	id := h.r.id
	g.log.Error("panic in a held call's wait; refusing the call", "approval", id, "settling", w.settling,
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	if w.st.unsub != nil {
		w.st.unsub()
	}
	if !w.settling {
		return g.endHold(ctx, h, w, new(approval.Request), errWaitPanicked)
	}
	if cl := w.withdraw(); cl != nil {
		<-cl.done // a decision's consume for the call, if any, has committed or not
	}
	g.letGoRefused(ctx, id, h.c.consumeToken, h.c.hold)
	return &Admission{ApprovalID: id, Message: "refused: internal error while answering the held call; nothing was run here"}
}

// letGoRefused ends this process's claims on request id of a held call
// refused after a panic while it was settled: the consume of the call
// (its token tok), if one committed, is recorded as not dispatched
// (notDispatched), and the hold is let go of (releaseRefused). The hold
// is let go of even when the first of these store writes panics too (a
// store bug, in the recovery's own write; attack14): that panic goes on
// to the caller's recovery, and the hold's lease mark used to stay, the
// request renewed by this process for as long as it ran with no call
// waiting on it.
func (g *Gate) letGoRefused(ctx context.Context, id approval.ID, tok string, m holdMark) {
	defer g.releaseRefused(ctx, id, m)
	g.notDispatched(ctx, id, tok)
}

// recordHeld records the answer adm of the held call h for the audit
// trail (Options.Recorder), after its wait. A panic in it goes on to the
// caller, which then never gets adm: a request this call consumed is
// first recorded as not dispatched (notDispatched; nothing ran), where it
// stayed consumed without an outcome, its dispatch lease renewed for as
// long as the process lived once a recovery above kept the process
// (attack13). The wait on events' own recovery (asyncHold.finish) does the
// same; a second notDispatched finds the outcome recorded.
//
//go:noinline // its work stays out of waitHeld's parked frame
func (g *Gate) recordHeld(ctx context.Context, h *heldCall, adm *Admission) {
	returned := false
	defer func() {
		if !returned && adm.Allowed && adm.ApprovalID != "" {
			g.notDispatched(ctx, adm.ApprovalID, h.c.consumeToken)
		}
	}()
	g.record(ctx, *h.c, h.dec, *adm)
	returned = true
}
