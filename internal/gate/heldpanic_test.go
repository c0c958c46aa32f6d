package gate

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// Panics on the goroutines of the wait without a goroutine (heldasync.go,
// attack12): nothing above them recovers, so a panic there ended the
// process and every held call with it.

// panicAfterConsume is the real store, except that, once armed, the
// update that consumes an approval commits and then panics, as a bug
// after the store's write would.
type panicAfterConsume struct {
	store.Store
	armed atomic.Bool
}

func (s *panicAfterConsume) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	r, err := s.Store.UpdateRequest(ctx, id, actor, fn)
	if err == nil && r.State == approval.StateConsumed && r.DispatchOutcome == approval.OutcomeNone && s.armed.CompareAndSwap(true, false) {
		panic("attack12: after the consume")
	}
	return r, err
}

func (s *panicAfterConsume) UpdateRequestWithChain(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request, session.Chain) error) (approval.Request, error) {
	r, err := s.Store.UpdateRequestWithChain(ctx, id, actor, fn)
	if err == nil && r.State == approval.StateConsumed && r.DispatchOutcome == approval.OutcomeNone && s.armed.CompareAndSwap(true, false) {
		panic("attack12: after the consume")
	}
	return r, err
}

// A panic in a step's store read (a wake-up without a row) refuses the
// held call once, runs nothing, and leaves its request pending with its
// lease released, so that an identical re-send takes it over and runs
// once it is approved.
func TestEventWaitStepPanicRefuses(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		hs := &readHook{Store: db}
		g := New(hs, pol, &Options{})
		id, ch := holdOnEvents(t, t.Context(), g, writeCall("/panic-in-read"), nil)
		hs.arm(nil, func(approval.ID) { panic("attack12: in the read") })
		g.Wake(id) // a wake-up without a row: the step reads the store
		a := recvHeld(t, ch)
		if a.Allowed || a.ApprovalID != id || !strings.Contains(a.Message, "internal error") {
			t.Fatalf("answer %+v, want a refusal naming an internal error", a)
		}
		waitNoSteps(t)
		if n := len(ch); n != 0 {
			t.Fatalf("%d more answers", n)
		}
		r, err := db.GetRequest(t.Context(), id)
		if err != nil || r.State != approval.StatePending || !r.LeaseLapsed(time.Now()) {
			t.Fatalf("request %s, lease until %v (%v), want pending with its lease released", r.State, r.LeaseUntil, err)
		}
		// The identical re-send picks the request up and runs on its approval.
		id2, ch2 := holdOnEvents(t, t.Context(), g, writeCall("/panic-in-read"), nil)
		if id2 != id {
			t.Fatalf("re-send held on %s, want %s", id2, id)
		}
		if _, err := g.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a = recvHeld(t, ch2)
		if !a.Allowed {
			t.Fatalf("re-send after approval: %+v", a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
	})
}

// A panic after the consume committed (another instance's approval;
// this gate consumes while settling) answers the call refused, and the
// request's record says it was not dispatched (transport_error), not
// "consumed without an outcome" for the sweeper to call unknown. A
// panicking done is not the process's end either.
func TestEventWaitSettlePanicAfterConsume(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		ps := &panicAfterConsume{Store: db}
		g := New(ps, pol, &Options{})
		other := New(db, pol, &Options{})
		id, ch := holdOnEvents(t, t.Context(), g, writeCall("/panic-after-consume"), nil)
		ps.armed.Store(true)
		if _, err := other.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		g.Wake(id) // as the store's watch would
		a := recvHeld(t, ch)
		wantPanicRefusal(t, a, &ps.armed)
		waitNoSteps(t)
		wantNotDispatched(t, db, id)

		// done itself panics: answered once, the process goes on.
		cp := writeCall("/panic-in-done")
		adm := new(Admission)
		hctx, held := g.AdmitOrHold(t.Context(), &cp, adm)
		if !held {
			t.Fatalf("not held: %+v", adm)
		}
		hold := adm.TakeHold()
		got := make(chan *Admission, 2)
		g.WaitHoldFunc(hctx, hold, func(a *Admission) {
			got <- a
			panic("attack12: in done")
		})
		if _, err := g.Review(t.Context(), hold.h.r.id, alice, approval.VerdictDeny, "no", ""); err != nil {
			t.Fatal(err)
		}
		if a := recvHeld(t, got); a.Allowed {
			t.Fatalf("denied call allowed: %+v", a)
		}
		waitNoSteps(t)
		if n := len(got); n != 0 {
			t.Fatalf("%d more answers", n)
		}
	})
}

// wantPanicRefusal fails t unless a held call's answer a refuses it
// naming an internal error and the panic armed went off (armed is
// cleared by the store wrapper that panicked).
func wantPanicRefusal(t *testing.T, a *Admission, armed *atomic.Bool) {
	t.Helper()
	if a.Allowed || !strings.Contains(a.Message, "internal error") {
		t.Fatalf("answer %+v, want a refusal naming an internal error", a)
	}
	if armed.Load() {
		t.Fatal("the consume never panicked")
	}
}

// wantNotDispatched fails t unless request id is consumed with the
// outcome transport_error: recorded as not dispatched, nothing ran.
func wantNotDispatched(t *testing.T, db *sqlstore.DB, id approval.ID) {
	t.Helper()
	r, err := db.GetRequest(t.Context(), id)
	if err != nil || r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeTransportError {
		t.Fatalf("request %s outcome %q (%v), want consumed, transport_error", r.State, r.DispatchOutcome, err)
	}
}
