package sqlstore

import (
	"context"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestSettleRacingRenewal (lease45b, Postgres): a settling write of a
// request marked for gw-a (a cancellation of a pending one; the outcome of
// one consumed with its lease kept, through the general write a retried
// outcome takes) holds the request's row and gw-a's instance row shared
// while gw-a's renewal runs: the renewal waits at its instance row, the
// settle commits the instance's lease from before the renewal as a
// concrete lease, and the renewal, counting the marked rows short, does
// not report the settled request renewed; a second renewal neither marks
// it nor reports it. The live request beside it stays marked and renewed.
// And the one-statement outcome (RecordOutcome, pgOutcomeUpdate), which
// reads the instance's lease without a lock, does not wait for a renewal
// holding the instance row: it commits the lease from before it. The
// race's invariant (no settled request reported renewed, none marked
// again) holds on ca0a3f75 too; the settle's own unmarking is then
// what the renewal's step 2 does instead (TestSettlingWriteUnmarks).
func TestSettleRacingRenewal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		settle func(r *approval.Request) error
		prep   func(t *testing.T, db *DB, id approval.ID)
	}{
		{"cancel", func(r *approval.Request) error { return r.Cancel(t0.Add(2 * time.Minute)) }, func(*testing.T, *DB, approval.ID) {}},
		{"outcome after a kept consume", func(r *approval.Request) error { return r.RecordOutcome(approval.OutcomeOK) },
			func(t *testing.T, db *DB, id approval.ID) {
				t.Helper()
				if _, err := db.UpdateRequest(t.Context(), id, "bob", approveFn); err != nil {
					t.Fatal(err)
				}
				if _, err := db.UpdateRequest(t.Context(), id, "gw-a", func(r *approval.Request) error {
					return r.Consume(r.Binding(), "", t0.Add(time.Minute)) // the lease kept (holdForDispatch)
				}); err != nil {
					t.Fatal(err)
				}
				if raw := rawLease(t, db, id); raw != leaseMarker {
					t.Fatalf("consumed: stored lease %d, want the marker", raw)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTest(t, postgresConfig(pgtest.Fresh(t)))
			ctx := t.Context()
			ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2)
			mustRenew(t, db, "gw-a", ids, t0.Add(5*time.Minute), ids...)
			tc.prep(t, db, ids[0])

			read, proceed, settled := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				first := true
				_, err := db.UpdateRequest(ctx, ids[0], "bob", func(r *approval.Request) error {
					if first {
						first = false
						close(read)
						<-proceed
					}
					return tc.settle(r)
				})
				settled <- err
			}()
			<-read
			renewed, done := make(chan []approval.ID, 1), make(chan struct{})
			go func() {
				defer close(done)
				got, err := db.RenewLeases(ctx, "gw-a", ids, t0.Add(10*time.Minute))
				if err != nil {
					t.Error(err)
				}
				renewed <- got
			}()
			waitBlocked(t, db, done) // at the instance row, which the settle holds shared
			close(proceed)
			if err := <-settled; err != nil {
				t.Fatalf("settle: %v", err)
			}
			<-done
			if got := <-renewed; len(got) != 1 || got[0] != ids[1] {
				t.Errorf("renewal racing the settle renewed %v, want only %s", got, ids[1])
			}
			if raw := rawLease(t, db, ids[0]); raw != t0.Add(5*time.Minute).UnixMilli() {
				t.Errorf("settled: stored lease %d, want the instance's lease before the renewal %d", raw, t0.Add(5*time.Minute).UnixMilli())
			}
			mustRenew(t, db, "gw-a", ids, t0.Add(15*time.Minute), ids[1])
			if raw := rawLease(t, db, ids[0]); raw == leaseMarker {
				t.Error("settled: marked again by the next renewal")
			}
			if _, lu := leaseOf(t, db, ids[1]); !lu.Equal(t0.Add(15 * time.Minute)) {
				t.Errorf("the live request: lease %v, want t0+15m", lu)
			}
		})
	}

	t.Run("one-statement outcome beside a renewal in flight", func(t *testing.T) {
		db := openTest(t, postgresConfig(pgtest.Fresh(t)))
		ctx := t.Context()
		ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1)
		mustRenew(t, db, "gw-a", ids, t0.Add(5*time.Minute), ids...)
		if _, err := db.UpdateRequest(ctx, ids[0], "bob", approveFn); err != nil {
			t.Fatal(err)
		}
		if _, err := db.UpdateRequest(ctx, ids[0], "gw-a", func(r *approval.Request) error {
			return r.Consume(r.Binding(), "", t0.Add(time.Minute))
		}); err != nil {
			t.Fatal(err)
		}
		// A renewal between its upsert and its commit: the instance row
		// locked, its new lease not yet committed.
		tx, err := db.sql.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, `UPDATE instance_leases SET lease_until = $1 WHERE instance = 'gw-a'`, t0.Add(10*time.Minute).UnixMilli()); err != nil {
			t.Fatal(err)
		}
		octx, cancel := context.WithTimeout(ctx, 10*time.Second) // it would wait for the renewal's commit
		err = db.RecordOutcome(octx, ids[0], approval.OutcomeOK, nil, "gw-a")
		cancel()
		if err != nil {
			t.Fatalf("outcome beside a renewal in flight: %v", err)
		}
		if raw := rawLease(t, db, ids[0]); raw != t0.Add(5*time.Minute).UnixMilli() {
			t.Errorf("outcome: stored lease %d, want the committed instance lease %d", raw, t0.Add(5*time.Minute).UnixMilli())
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got, err := db.RenewLeases(ctx, "gw-a", ids, t0.Add(15*time.Minute)); err != nil || len(got) != 0 {
			t.Errorf("renewal after the outcome: renewed %v (%v), want none", got, err)
		}
	})
}
