package gate

import (
	"testing"
	"time"

	"toolgate/internal/approval"
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

	for _, v := range []approval.Verdict{approval.VerdictApprove, approval.VerdictDeny} {
		c := writeCall("/" + string(v))
		adm := new(Admission)
		hctx, held := g.AdmitOrHold(t.Context(), &c, adm)
		if !held || hctx == nil {
			t.Fatalf("%s: held %v, want the call held", v, held)
		}
		// The request is stored before anything waits.
		r := waitPending(t, db, 1)[0]
		done := make(chan struct{})
		go func() {
			defer close(done)
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
