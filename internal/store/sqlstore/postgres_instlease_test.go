package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// waitBlocked returns once a backend of db's database other than the
// caller's and the notifier's waits for a lock, or fails the test if done
// closes first (the operation that should have waited did not). The
// notifier's connection is left out: its send of an earlier write's
// notifications waits, at its commit, for the cluster-wide lock every
// notifying commit takes (PreCommit_Notify), held by another database's
// commit when other tests share the server, and waitBlocked would return
// before the operation it waits for had begun.
func waitBlocked(t *testing.T, db *DB, done <-chan struct{}) {
	t.Helper()
	if err := blockedOrDone(t.Context(), db, done); err != nil {
		t.Fatal(err)
	}
}

// blockedOrDone is waitBlocked returning its failure, for a caller that
// must not stop the test where it is (inside a store's transaction).
func blockedOrDone(ctx context.Context, db *DB, done <-chan struct{}) error {
	for {
		select {
		case <-done:
			return errors.New("the operation finished instead of waiting for the lock")
		default:
		}
		var n int
		if err := db.asql.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()
			AND application_name <> $1`, NotifyApplicationName).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
}

// TestTakeOverWaitsForRenewalInFlight: the holder's renewal has written
// its instance lease and not committed yet (held open here, as a renewal
// of thousands of requests is for a while) when its instance lease, as
// committed, has lapsed. A take-over must wait for the renewal (it reads
// the instance row under a share lock) and then see the new lease: no
// take-over. Reading the committed, lapsed lease without the lock, it
// would take the request over while the renewal tells its holder that it
// still holds it.
func TestTakeOverWaitsForRenewalInFlight(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	id := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1)[0]
	mustRenew(t, db, "gw-a", []approval.ID{id}, t0.Add(5*time.Minute), id)

	renewal, err := db.asql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = renewal.Rollback() }()
	if _, err := renewal.ExecContext(ctx, `UPDATE instance_leases SET lease_until = $1 WHERE instance = 'gw-a'`,
		t0.Add(20*time.Minute).UnixMilli()); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var takeErr error
	go func() {
		defer close(done)
		_, takeErr = takeOver(ctx, db, id, "gw-b", t0.Add(10*time.Minute))
	}()
	waitBlocked(t, db, done)
	if err := renewal.Commit(); err != nil {
		t.Fatal(err)
	}
	<-done
	if !errors.Is(takeErr, errKeep) {
		t.Fatalf("take-over during the renewal = %v, want none (the renewal committed a lease until t0+20m)", takeErr)
	}
	if h, lu := leaseOf(t, db, id); h != "gw-a" || !lu.Equal(t0.Add(20*time.Minute)) {
		t.Errorf("held by %q until %v, want gw-a until t0+20m", h, lu)
	}
}

// TestRenewalWaitsForTakeOverInFlight is the other order: a take-over read
// the holder's lapsed instance lease (under its share lock) and has not
// committed when the holder renews. The renewal waits for it, and then
// does not report the request as renewed: the holder learns at once that
// it lost it, and only the new holder believes it holds it.
func TestRenewalWaitsForTakeOverInFlight(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2)
	mustRenew(t, db, "gw-a", ids, t0.Add(5*time.Minute), ids...)
	if got := renewDuringTakeOver(t, db, ids); len(got) != 1 || got[0] != ids[1] {
		t.Errorf("renewal after the take-over renewed %v, want only [%s]", got, ids[1])
	}
}

// renewDuringTakeOver renews ids for gw-a (until t0+20m) while gw-b's
// take-over of ids[0] (at t0+10m), which has read its lapsed lease and
// not committed, is in flight: the renewal must wait for it (waitBlocked
// fails the test otherwise). It returns what the renewal reported
// renewed, once the take-over committed; it checks that ids[0] is gw-b's.
func renewDuringTakeOver(t *testing.T, db *DB, ids []approval.ID) []approval.ID {
	t.Helper()
	ctx := t.Context()
	read := make(chan struct{})
	proceed := make(chan struct{})
	takenOver := make(chan error, 1)
	go func() {
		first := true
		_, err := db.UpdateRequest(ctx, ids[0], "gw-b", func(r *approval.Request) error {
			if !r.LeaseLapsed(t0.Add(10 * time.Minute)) {
				return errKeep
			}
			if first {
				first = false
				close(read)
				<-proceed
			}
			r.Renew("gw-b", t0.Add(11*time.Minute))
			return nil
		})
		takenOver <- err
	}()
	<-read

	renewed := make(chan []approval.ID, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err := db.RenewLeases(ctx, "gw-a", ids, t0.Add(20*time.Minute))
		if err != nil {
			t.Error(err)
		}
		renewed <- got
	}()
	waitBlocked(t, db, done)
	close(proceed)
	if err := <-takenOver; err != nil {
		t.Fatalf("take-over: %v", err)
	}
	<-done
	if h, _ := leaseOf(t, db, ids[0]); h != "gw-b" {
		t.Errorf("held by %q, want gw-b", h)
	}
	return <-renewed
}
