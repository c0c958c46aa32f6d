package gateway

import (
	"context"
	"fmt"

	"toolgate/internal/gate"
)

// Bounding every admission, not only the parked calls' (issue 13: the
// peak while thousands of held calls arrive; docs/performance.md,
// "admit31"). The gate's admission of a call (gate.Gate.AdmitOrHold: the
// identical-call and grant reads, the store's creation of a held call's
// request: deep frames in pgx or database/sql) runs under one of the
// gateway's admission slots, at most admitSlotsMax at once, on every
// path: the parked calls' admitting goroutines (parkadmit.go), a held
// call on its connection's goroutine (HTTP/2, TLS, a 2025-era call that
// asked to close), the SDK path (HTTP and stdio), prompts/get,
// resources/read and task runners. A call waiting for a slot waits in a
// small frame, holding nothing a slot's holder needs (no lock, no store
// connection, nothing in the gate); the slot is given back as soon as
// AdmitOrHold returns, before the call waits for its decision (WaitHold),
// so a held call never keeps one. A call whose context ends while it
// waits for a slot (its client went away, a notifications/cancelled, a
// session DELETE, Close) is not admitted: nothing is stored or run for it,
// it is answered a refusal, and the audit trail records that refusal
// (gate.Gate.Unadmitted). A call the policy allows or denies outright
// (gate.Gate.AdmitUnlessHeld: the policy only, no store; not a resumed
// call, a task or a deferred one; keep-alives and progress tokens make no
// difference) takes no slot, on the lean front as on the SDK path and the
// task runner's: while the store hangs, the slots' holders (held calls
// whose creation is retried while their callers wait) do not keep the
// calls that never needed the store waiting. An agent session's call
// needs one read of the store first, its session's policy
// (gate.Gate.AdmitSessionUnlessHeld): that read runs under one of the
// gateway's session-read slots, at most sessionReadsMax at once and none
// of the admission slots, so it is bounded as an admission is, and a
// session's call the policies allow or deny is answered after it without
// waiting behind held admissions. A call whose context ends while it
// waits for a session-read slot is not admitted, as above.

// admitSlotsMax bounds the admissions that run at once, parked or not:
// more than the store takes at once (Postgres: a pool of 16 by default,
// three acquires per admission; SQLite: group commits of up to 64
// writes), so the store stays busy, and few enough that their deep stacks
// stay small against the held calls' (128 × 32 KiB is 4 MiB).
const admitSlotsMax = 128

// sessionReadsMax bounds the reads of agent sessions' policies that run
// at once before an admission (admitUnlessHeld): a read is one short
// statement, so fewer than admitSlotsMax keep the store busy, and a
// stalled store keeps at most this many deep stacks waiting.
const sessionReadsMax = 32

// admitSlots is a counting semaphore of admissions: a send takes a slot,
// a receive gives it back.
type admitSlots chan struct{}

func newAdmitSlots(n int) admitSlots { return make(admitSlots, n) }

// acquire takes a slot, waiting while none is free, unless ctx ends first:
// then it takes none and returns ctx's cause. A slot that came free as ctx
// ended is given back: a call whose caller left while it waited is not
// admitted.
func (s admitSlots) acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	default:
	}
	select {
	case s <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if ctx.Err() != nil {
		<-s
		return context.Cause(ctx)
	}
	return nil
}

// release gives back a slot acquire took.
func (s admitSlots) release() { <-s }

// admitOrHold is sp.AdmitOrHold(ctx, call, adm) under one of the
// gateway's admission slots (see above): when ctx ends while the call
// waits for a slot, *adm is a refusal (unadmitted) and held is false. A
// call without a hand-off (call.Prior: the SDK path's, a task's) that the
// Gatekeeper decides without holding it (leanAdmitter) is answered
// without a slot; otherwise its hand-off goes with it to AdmitOrHold.
//
//go:noinline // its frame, and the admission's below it, are gone before a held call waits
func (g *Gateway) admitOrHold(ctx context.Context, sp admitterSplit, call *gate.Call, adm *gate.Admission) (hctx context.Context, held bool) {
	if la, ok := g.gk.(leanAdmitter); ok && call.Prior == nil {
		h := g.admitUnlessHeld(ctx, la, call, adm, nil)
		if h == nil {
			return nil, false // decided: *adm is the answer
		}
		call.Prior = h
	}
	if err := g.admits.acquire(ctx); err != nil {
		g.unadmitted(ctx, call, adm, err)
		return nil, false
	}
	defer g.admits.release()
	return sp.AdmitOrHold(ctx, call, adm)
}

// admitUnlessHeld is la.AdmitUnlessHeld(ctx, call, adm), and for an agent
// session's call that it handed back for its session alone
// (gate.HandOff.SessionRead) the session's policy read and the call
// decided under one of the gateway's session-read slots, outside the
// admission slots (see above), when la can (sessionAdmitter). It returns
// nil when *adm is the answer, else the hand-off for the call's admission
// (Call.Prior). When ctx ends while the call waits for a session-read
// slot, *adm is a refusal (unadmitted) and it returns nil. beforeRead,
// if not nil, is called before the wait for a session-read slot: the
// 2025-era lean front arms its POST's drop watch there, so that a client
// that leaves while the read waits ends ctx.
func (g *Gateway) admitUnlessHeld(ctx context.Context, la leanAdmitter, call *gate.Call, adm *gate.Admission, beforeRead func()) *gate.HandOff {
	h := la.AdmitUnlessHeld(ctx, call, adm)
	sa, ok := la.(sessionAdmitter)
	if !h.SessionRead() || !ok {
		return h
	}
	if beforeRead != nil {
		beforeRead()
	}
	if err := g.sessionReads.acquire(ctx); err != nil {
		g.unadmitted(ctx, call, adm, err)
		return nil
	}
	defer g.sessionReads.release()
	return sa.AdmitSessionUnlessHeld(ctx, call, adm)
}

// sessionAdmitter is a Gatekeeper that decides an agent session's call
// after reading its session's policy, unless it would hold it
// ([gate.Gate.AdmitSessionUnlessHeld]).
type sessionAdmitter interface {
	AdmitSessionUnlessHeld(ctx context.Context, c *gate.Call, adm *gate.Admission) *gate.HandOff
}

// unadmitted sets *adm to the refusal of call, whose context ended
// (cause) before it was admitted, and records it on the audit trail when
// the Gatekeeper keeps one (gate.Gate.Unadmitted). Nothing was stored or
// run for the call.
func (g *Gateway) unadmitted(ctx context.Context, call *gate.Call, adm *gate.Admission, cause error) {
	*adm = gate.Admission{Message: fmt.Sprintf("refused: %v before the call was admitted; nothing was run", cause)}
	g.log.Debug("a call ended before its admission; not admitted", "server", call.Server, "tool", call.Tool, "cause", cause)
	if r, ok := g.gk.(unadmittedRecorder); ok {
		r.Unadmitted(ctx, call, adm.Message)
	}
}

// unadmittedRecorder is a Gatekeeper that records the calls never
// admitted ([gate.Gate.Unadmitted]).
type unadmittedRecorder interface {
	Unadmitted(ctx context.Context, c *gate.Call, reason string)
}
