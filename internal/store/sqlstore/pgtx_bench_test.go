package sqlstore

import (
	"fmt"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
)

// BenchmarkSessionRequestLifecycle is BenchmarkRequestLifecycle for a
// session's call on Postgres, whose every write goes through inTx
// (pgTxOnce): its creation (a session's principal), the approval, the
// consume and the outcome, each reading the session chain under the row
// lock. It measures what pgTxOnce costs against database/sql's own
// transaction (docs/performance.md, "A commit whose answer was lost"),
// through a commitLoser that counts the round trips (round-trips/op: the
// client's simple queries and Syncs), never armed.
//
//	TOOLGATE_TEST_POSTGRES=… go test -run '^$' -bench SessionRequestLifecycle ./internal/store/sqlstore/
func BenchmarkSessionRequestLifecycle(b *testing.B) {
	db, proxy := openThroughCommitLoser(b, 0)
	ctx := b.Context()
	s := session.Session{ID: "s1", Principal: session.PrincipalID("s1"), TokenHash: fmt.Sprintf("%064x", 1),
		Mode: session.ModeDefault, Revision: 1, CreatedAt: t0, CreatedBy: "host"}
	if err := db.CreateSession(ctx, s, "host"); err != nil {
		b.Fatal(err)
	}
	steps := []func(*approval.Request, session.Chain) error{
		func(r *approval.Request, _ session.Chain) error {
			return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
		},
		func(r *approval.Request, _ session.Chain) error {
			return r.Consume(r.Binding(), "", t0.Add(2*time.Minute))
		},
		func(r *approval.Request, _ session.Chain) error { return r.RecordOutcome(approval.OutcomeOK) },
	}
	n := 0
	turns := proxy.turns.Load()
	for b.Loop() {
		n++
		r := pendingRequest(testID(n))
		r.RequestedBy = s.Principal
		if err := db.CreateRequest(ctx, r); err != nil {
			b.Fatal(err)
		}
		for _, fn := range steps {
			if _, err := db.UpdateRequestWithChain(ctx, r.ID, "bench", fn); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(proxy.turns.Load()-turns)/float64(b.N), "round-trips/op")
}
