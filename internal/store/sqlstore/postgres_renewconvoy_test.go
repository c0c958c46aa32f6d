package sqlstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestRenewalDoesNotHoldAKeptConsume is approve-all's lock convoy on
// Postgres (docs/performance.md, "pglease45"), in its smallest form: a
// decision on request a is in flight (its row locked, its holder's
// instance row held FOR SHARE, as pgLock holds them), and the holder
// renews a and b, the latter consumed for its dispatch. The renewal
// waits for the instance row, behind the decision. Meanwhile b's outcome
// is written.
//
// When b's consume kept the lease its holder held (the gate's
// holdForDispatch), b's row still takes its lease from the instance row
// and the renewal has nothing to write on it: b's outcome commits while
// the renewal waits. When the consume renewed b's lease to a time of its
// own (the gate before pglease45), the renewal marked b's row again
// before it waited, holding the row's lock, and b's outcome waited for
// the renewal, which waited for the decision: every outcome of a request
// consumed since the last renewal queued behind the slowest decision in
// flight.
func TestRenewalDoesNotHoldAKeptConsume(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep bool
	}{{"kept", true}, {"renewed", false}} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTest(t, postgresConfig(pgtest.Fresh(t)))
			ctx := t.Context()
			all := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2, 3)
			mustRenew(t, db, "gw-a", all, t0.Add(5*time.Minute), all...)
			// The renewal below names a and b only (c's call went away): not
			// the last renewal's ids, so it is the full renewal (renew.go),
			// as during approve-all, where calls leave between renewals.
			ids := all[:2]
			a, b := ids[0], ids[1]
			for _, id := range ids {
				if _, err := db.UpdateRequest(ctx, id, "bob", func(r *approval.Request) error {
					return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
				}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.UpdateRequest(ctx, b, "gw-a", func(r *approval.Request) error {
				if err := r.Consume(r.Binding(), "", t0.Add(2*time.Minute)); err != nil {
					return err
				}
				if !tc.keep {
					r.Renew("gw-a", t0.Add(3*time.Minute))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if marked := rawLease(t, db, b) == leaseMarker; marked != tc.keep {
				t.Fatalf("after the consume b's row marked %v, want %v", marked, tc.keep)
			}

			// a's decision in flight: its row and gw-a's instance row locked.
			decision, err := db.asql.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = decision.Rollback() }()
			var lease int64
			if _, err := decision.ExecContext(ctx, `SELECT 1 FROM requests WHERE id = $1 FOR UPDATE`, string(a)); err != nil {
				t.Fatal(err)
			}
			if err := decision.QueryRowContext(ctx, `SELECT lease_until FROM instance_leases WHERE instance = 'gw-a' FOR SHARE`).Scan(&lease); err != nil {
				t.Fatal(err)
			}

			renewed := make(chan []approval.ID, 1)
			renewing := make(chan struct{})
			go func() {
				defer close(renewing)
				got, err := db.RenewLeases(ctx, "gw-a", ids, t0.Add(10*time.Minute))
				if err != nil {
					t.Error(err)
				}
				renewed <- got
			}()
			waitBlocked(t, db, renewing) // the renewal waits for the instance row

			recorded := make(chan error, 1)
			go func() {
				_, err := db.UpdateRequest(ctx, b, "gw-a", func(r *approval.Request) error { return r.RecordOutcome(approval.OutcomeOK) })
				recorded <- err
			}()
			if tc.keep {
				select {
				case err := <-recorded:
					if err != nil {
						t.Fatalf("b's outcome: %v", err)
					}
				case <-renewing:
					t.Fatal("the renewal ended while the decision held the instance row")
				case <-time.After(30 * time.Second):
					t.Fatal("b's outcome waited 30 s for the renewal waiting behind a's decision")
				}
			} else {
				// b's outcome waits too: two backends wait for locks.
				waitLockWaiters(t, db, 2, recorded)
			}
			if err := decision.Commit(); err != nil {
				t.Fatal(err)
			}
			<-renewing
			// Kept, b's outcome committed before the renewal went on: b
			// needs no holder. Renewed, the renewal marked b before its
			// outcome could be written.
			//
			// Renewed, b may still be reported not renewed: the renewal's
			// step 5 (renewedAfter) counts the marked rows after its commit,
			// which also lets b's outcome go on, and an outcome that commits
			// before that count takes b out of the marked set (CI saw it
			// once). The convoy itself is what waitLockWaiters asserted.
			got := <-renewed
			switch {
			case tc.keep && !slices.Equal(got, []approval.ID{a}):
				t.Errorf("renewal renewed %v, want [%s]", got, a)
			case !tc.keep && !slices.Equal(got, ids) && !slices.Equal(got, []approval.ID{a}):
				t.Errorf("renewal renewed %v, want %v (or [%s] when b's outcome committed before step 5's count)", got, ids, a)
			}
			if !tc.keep {
				if err := <-recorded; err != nil {
					t.Fatalf("b's outcome: %v", err)
				}
			}
			if raw := rawLease(t, db, a); raw != leaseMarker {
				t.Errorf("a's stored lease %d, want the marker", raw)
			}
			if h, lu := leaseOf(t, db, a); h != "gw-a" || !lu.Equal(t0.Add(10*time.Minute)) {
				t.Errorf("a held by %q until %v, want gw-a until t0+10m", h, lu)
			}
			if got, err := db.GetRequest(ctx, b); err != nil || got.DispatchOutcome != approval.OutcomeOK {
				t.Errorf("b: %v outcome %q, want ok", err, got.DispatchOutcome)
			}
		})
	}
}

// waitLockWaiters returns once n backends of db's cluster other than the
// caller's wait for a lock; it fails the test if done yields first.
func waitLockWaiters(t *testing.T, db *DB, n int, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		select {
		case err := <-done:
			t.Fatalf("finished (%v) instead of waiting for a lock", err)
		default:
		}
		var got int
		if err := db.asql.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()`).Scan(&got); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fewer than %d backends waited for a lock within a minute", n)
			}
			t.Fatal(err)
		}
		if got >= n {
			return
		}
	}
}
