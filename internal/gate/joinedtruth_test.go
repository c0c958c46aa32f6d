package gate

import (
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore"
)

// An approval whose own transaction consumes the call held here, and whose
// consume's re-check refuses it, answers the reviewer with the truth: the
// request invalidated, with the reason, nothing run (it answered
// "approved" on a7b144b1). The held call's refusal, and the invalidated
// event, are still reported once, by its holder.
func TestJoinedInvalidationAnswersTheReviewer(t *testing.T) {
	denying := func() *policy.Policy {
		p := testPolicy(time.Minute)
		p.Rules = append(p.Rules, policy.Rule{Name: "no writes now", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Deny})
		return p
	}
	for _, tc := range []struct {
		name   string
		now    func() *policy.Policy
		reason string
	}{
		{"raised quorum", func() *policy.Policy { return quorumPolicy(2, policy.ModeHold) }, raisedReason},
		{"policy now denies", denying, `policy now denies the call (rule "no writes now")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, db *sqlstore.DB) {
				t.Helper()
				f := newFixtureOn(t, db, time.Minute, nil)
				f.pol.p.Store(quorumPolicy(1, policy.ModeHold))
				offers := signalOffers(f.gate)
				ch := admitAsync(t.Context(), f.gate, writeCall("/truth"))
				r := waitPending(t, db, 1)[0]
				waitOffered(t, offers, r.ID)
				f.pol.p.Store(tc.now())
				got, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", "")
				if err != nil {
					t.Fatal(err)
				}
				if got.State != approval.StateInvalidated || got.Reason != tc.reason || got.DecidedBy != alice.ID || got.DispatchOutcome != approval.OutcomeNone {
					t.Fatalf("the review answered %s %q decided by %q outcome %q, want invalidated %q decided by alice, nothing run",
						got.State, got.Reason, got.DecidedBy, got.DispatchOutcome, tc.reason)
				}
				if n := approvalsOf(got); n != 1 || got.RequiredApprovals != 1 {
					t.Errorf("the answer counts %d of %d approvals, want alice's 1 of the request's 1", n, got.RequiredApprovals)
				}
				mustInvalidated(t, db, recv(t, ch), r.ID, tc.reason)
				evs, err := db.Events(t.Context(), 0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, e := range evs {
					if e.RequestID == r.ID && e.Type == approval.EventInvalidated {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("%d invalidated events of %s, want 1", n, r.ID)
				}
			})
		})
	}
}

// approvalsOf counts the approving reviews of r.
func approvalsOf(r approval.Request) int {
	n := 0
	for _, rv := range r.Reviews {
		if rv.Verdict == approval.VerdictApprove {
			n++
		}
	}
	return n
}
