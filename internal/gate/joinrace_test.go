package gate

import (
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore"
)

// Decisions racing on a call held here (issue 13, joined consume): two
// reviewers approving at once for a quorum of two, and an approval racing
// a denial. Whatever order the store puts them in, the call gets one
// answer, runs at most once, and only when the request ends approved and
// consumed; a denial that wins leaves it unrun.
func TestJoinedConsumeRacingDecisions(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		bob := approval.Principal{ID: "bob-reviewer", Kind: "human"}
		for _, c := range []struct {
			name   string
			quorum int
			second approval.Verdict
		}{
			{"quorum of two, both approve", 2, approval.VerdictApprove},
			{"approve races deny", 1, approval.VerdictDeny},
		} {
			t.Run(c.name, func(t *testing.T) {
				pol := &swappable{}
				p := testPolicy(time.Minute)
				p.Approval.Approvals = c.quorum
				pol.p.Store(p)
				g := New(db, pol, &Options{})
				offers := signalOffers(g)
				for round := range 10 {
					ch := admitAsync(t.Context(), g, writeCall("/race-"+c.name+string(rune('a'+round))))
					r := waitPending(t, db, 1)[0]
					waitOffered(t, offers, r.ID)
					var wg sync.WaitGroup
					wg.Go(func() { _, _ = g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", "") })
					wg.Go(func() { _, _ = g.Review(t.Context(), r.ID, bob, c.second, "", "") })
					wg.Wait()
					a := recv(t, ch)
					if a.Allowed {
						a.Finish(t.Context(), approval.OutcomeOK)
					}
					cur, err := db.GetRequest(t.Context(), r.ID)
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case a.Allowed && (cur.State != approval.StateConsumed || cur.DispatchOutcome != approval.OutcomeOK):
						t.Fatalf("round %d: the call ran but the request is %s/%q", round, cur.State, cur.DispatchOutcome)
					case !a.Allowed && cur.State == approval.StateConsumed:
						t.Fatalf("round %d: the request was consumed (%q) but the call did not run: %+v", round, cur.DispatchOutcome, a)
					case c.quorum == 2 && !a.Allowed:
						t.Fatalf("round %d: two approvals of two, the call did not run: %+v (request %s)", round, a, cur.State)
					case c.quorum == 1 && !a.Allowed && cur.State != approval.StateDenied:
						t.Fatalf("round %d: the call did not run and the request is %s", round, cur.State)
					}
				}
			})
		}
	})
}
