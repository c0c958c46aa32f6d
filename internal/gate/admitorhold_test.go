package gate

import (
	"fmt"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// AdmitOrHold admits in two steps what AdmitTo admits in one: an allowed
// or denied call is answered at once (held false), a call that needs
// approval is recorded pending and returned without waiting (held true,
// the request already stored), and WaitAdmitted, on another goroutine,
// then waits for the decision: approved (run once: a second consume is
// refused) or denied, as AdmitTo answers them.
func TestAdmitOrHoldThenWaitAdmitted(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	g := New(db, pol, &Options{})

	read := Call{Principal: agent, Server: "fs", Tool: "read_file", Arguments: []byte(`{"path":"/a"}`), ToolDigest: "sha256:d1"}
	var adm Admission
	if hctx, held := g.AdmitOrHold(t.Context(), &read, &adm); held || hctx != nil || !adm.Allowed {
		t.Fatalf("allowed call: held %v, admission %+v", held, adm)
	}
	adm.Finish(t.Context(), approval.OutcomeOK)

	// WaitAdmitted answers in the Admission; WaitHold, the parked calls'
	// way, in a new one, the hold taken out of the first (TakeHold).
	for _, take := range []bool{false, true} {
		for _, v := range []approval.Verdict{approval.VerdictApprove, approval.VerdictDeny} {
			admitOrHoldThenWait(t, g, db, v, take)
		}
	}
}

func admitOrHoldThenWait(t *testing.T, g *Gate, db store.Store, v approval.Verdict, take bool) {
	t.Helper()
	{
		c := writeCall(fmt.Sprintf("/%s/%v", v, take))
		adm := new(Admission)
		hctx, held := g.AdmitOrHold(t.Context(), &c, adm)
		if !held || hctx == nil {
			t.Fatalf("%s: held %v, want the call held", v, held)
		}
		var hold HeldCall
		if take {
			hold = adm.TakeHold()
			if hold.h == nil || adm.held != nil {
				t.Fatalf("%s: TakeHold gave %+v and left %+v, want the hold moved out", v, hold, adm.held)
			}
		}
		// The request is stored before anything waits.
		r := waitPending(t, db, 1)[0]
		done := make(chan struct{})
		go func() {
			defer close(done)
			if take {
				adm = g.WaitHold(hctx, hold)
				return
			}
			g.WaitAdmitted(hctx, adm)
		}()
		if _, err := g.Review(t.Context(), r.ID, alice, v, "ok", ""); err != nil {
			t.Fatal(err)
		}
		<-done
		if adm.Allowed != (v == approval.VerdictApprove) || adm.ApprovalID != r.ID {
			t.Fatalf("%s: admission %+v", v, *adm)
		}
		if adm.Allowed {
			adm.Finish(t.Context(), approval.OutcomeOK)
			got, err := db.GetRequest(t.Context(), r.ID)
			if err != nil || got.State != approval.StateConsumed {
				t.Fatalf("%s: request %s (%v), want consumed once", v, got.State, err)
			}
		}
	}
}

// A call AdmitOrHold holds is the caller's own Call, lent to the gate
// until the wait returns, not a copy of it (the gate's heldCall kept a
// second 280 B Call per parked call), and once admitted it no longer
// carries AdmitUnlessHeld's hand-off and the policy decision in it (the
// admission's own decision is kept for consume): docs/performance.md,
// "heldmem4". Approved, it still runs exactly once.
func TestAdmitOrHoldLendsTheCall(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	g := New(db, pol, &Options{})

	c := writeCall("/lent")
	h := g.AdmitUnlessHeld(t.Context(), &c, new(Admission))
	if h == nil {
		t.Fatal("AdmitUnlessHeld decided a call that needs approval")
	}
	c.Prior = h
	adm := new(Admission)
	hctx, held := g.AdmitOrHold(t.Context(), &c, adm)
	if !held {
		t.Fatalf("not held: %+v", *adm)
	}
	hold := adm.TakeHold()
	if hold.h.c != &c {
		t.Error("the hold keeps a copy of the call, want the caller's own")
	}
	if c.Prior != nil {
		t.Error("the held call keeps AdmitUnlessHeld's hand-off")
	}
	if c.admitted == nil {
		t.Error("the held call lost the admission's decision (consume reuses it)")
	}
	r := waitPending(t, db, 1)[0]
	done := make(chan *Admission)
	go func() { done <- g.WaitHold(hctx, hold) }()
	if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if !a.Allowed || a.ApprovalID != r.ID {
		t.Fatalf("admission %+v", *a)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	if got, err := db.GetRequest(t.Context(), r.ID); err != nil || got.State != approval.StateConsumed {
		t.Fatalf("request %s (%v), want consumed once", got.State, err)
	}
}
