package gate

import (
	"context"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// TestLentCallConsumeSeesTheRevisionMove (breakheld): a call handed off by
// AdmitUnlessHeld and held by AdmitOrHold (its Call lent, the hand-off
// dropped by decide) keeps the admission's decision for consume only
// while the policy's revision stays: a rule added meanwhile that denies it
// refuses it at consume, whether the approval is decided here (the
// decision's joined consume) or by another instance (the holder's own
// consume after a wake-up); with the revision unchanged it runs once,
// with no evaluation beyond admit's.
func TestLentCallConsumeSeesTheRevisionMove(t *testing.T) {
	for _, tc := range []struct {
		name      string
		revoke    bool
		elsewhere bool
		wantRuns  bool
		wantEvals int64
	}{
		{name: "same revision, decided here", wantRuns: true, wantEvals: 1},
		{name: "same revision, decided elsewhere", elsewhere: true, wantRuns: true, wantEvals: 1},
		{name: "revoked, decided here", revoke: true, wantEvals: 2},
		{name: "revoked, decided elsewhere", revoke: true, elsewhere: true, wantEvals: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, pol, _, _ := handOffFixture(t)
			c := writeCall("/lent-revoke")
			h := f.gate.AdmitUnlessHeld(t.Context(), &c, new(Admission))
			if h == nil {
				t.Fatal("not handed off")
			}
			c.Prior = h
			adm := new(Admission)
			hctx, held := f.gate.AdmitOrHold(t.Context(), &c, adm)
			if !held {
				t.Fatalf("not held: %+v", *adm)
			}
			hold := adm.TakeHold()
			r := waitPending(t, f.db, 1)[0]
			done := make(chan *Admission, 1)
			go func() { done <- f.gate.WaitHold(hctx, hold) }()
			if tc.revoke {
				p := testPolicy(time.Minute)
				p.Rules = append([]policy.Rule{{Name: "no writes now", Tools: []string{"write_*"}, Effect: policy.Deny}}, p.Rules...)
				pol.Store(p)
			}
			reviewer := f.gate
			if tc.elsewhere {
				reviewer = New(f.db, pol, &Options{Instance: "other"})
			}
			if _, err := reviewer.Review(context.Background(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
				t.Fatal(err)
			}
			a := <-done
			if a.Allowed != tc.wantRuns {
				t.Fatalf("admission allowed %v (%s), want %v", a.Allowed, a.Message, tc.wantRuns)
			}
			got, err := f.db.GetRequest(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if a.Allowed {
				a.Finish(t.Context(), approval.OutcomeOK)
				if got.State != approval.StateConsumed {
					t.Fatalf("request %s, want consumed", got.State)
				}
			} else if got.State == approval.StateConsumed {
				t.Fatalf("a call denied at consume left its request consumed")
			}
			if n := pol.n.Load(); n != tc.wantEvals {
				t.Errorf("%d evaluations, want %d", n, tc.wantEvals)
			}
		})
	}
}
