package sqlstore

import (
	"fmt"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// BenchmarkPGRequestLifecycle is BenchmarkRequestLifecycle on Postgres
// through a commitLoser that counts the round trips (round-trips/op: the
// client's simple queries and Syncs) and is never armed: "plain", a call
// without a session, whose creation and writes are pipelined (pgCreate,
// pgUpdateRequest), and "session", a session's call, whose every write goes
// through inTx (pgTxOnce), each reading the session chain under the row
// lock. It measures what settling a lost commit answer costs: the
// transaction id read in the first round trip of each write
// (docs/performance.md, "A commit whose answer was lost").
//
//	TOOLGATE_TEST_POSTGRES=… go test -run '^$' -bench PGRequestLifecycle ./internal/store/sqlstore/
func BenchmarkPGRequestLifecycle(b *testing.B) {
	for _, withSession := range []bool{false, true} {
		name := "plain"
		if withSession {
			name = "session"
		}
		b.Run(name, func(b *testing.B) {
			db, proxy := openThroughCommitLoser(b, 0)
			ctx := b.Context()
			principal := "desktop"
			if withSession {
				s := session.Session{ID: "s1", Principal: session.PrincipalID("s1"), TokenHash: fmt.Sprintf("%064x", 1),
					Mode: session.ModeDefault, Revision: 1, CreatedAt: t0, CreatedBy: "host"}
				if err := db.CreateSession(ctx, s, "host"); err != nil {
					b.Fatal(err)
				}
				principal = s.Principal
			}
			steps := []func(*approval.Request) error{
				func(r *approval.Request) error {
					return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
				},
				func(r *approval.Request) error { return r.Consume(r.Binding(), "", t0.Add(2*time.Minute)) },
				func(r *approval.Request) error { return r.RecordOutcome(approval.OutcomeOK) },
			}
			write := func(r approval.Request, fn func(*approval.Request) error) error {
				if withSession {
					_, err := db.UpdateRequestWithChain(ctx, r.ID, "bench", func(r *approval.Request, _ session.Chain) error { return fn(r) })
					return err
				}
				_, err := db.UpdateRequest(ctx, r.ID, "bench", fn)
				return err
			}
			n := 0
			turns := proxy.turns.Load()
			for b.Loop() {
				n++
				r := pendingRequest(testID(n))
				r.RequestedBy = principal
				caps := []store.Cap{ // the gate's: its own and the total (pgCreatable)
					{Scope: store.CapPrincipal, Key: principal, Limit: 1 << 30, Name: "own"},
					{Scope: store.CapTotal, Limit: 1 << 30, Name: "total"},
				}
				if err := db.CreateRequest(ctx, r, caps...); err != nil {
					b.Fatal(err)
				}
				for _, fn := range steps {
					if err := write(r, fn); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(proxy.turns.Load()-turns)/float64(b.N), "round-trips/op")
		})
	}
}
