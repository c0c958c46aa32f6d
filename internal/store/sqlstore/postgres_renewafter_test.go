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

// TestRenewalReadsAgainAfterItsCommit: RenewLeases' step 5 on Postgres
// (count the rows still marked, read them again when the count falls
// short) runs after the renewal committed, so the instance row is not
// held exclusively while it reads (branch pglease45c: in approve-all the
// count always fell short and every decision in flight waited, for its
// FOR SHARE of that row, through a read of ≈ 10,000 rows). And it still
// sees a take-over that committed while the renewal waited for the
// instance row.
//
// A decision in flight (s) holds gw-a's instance row FOR SHARE; gw-a's
// full renewal of a and b waits for it at its upsert. Inside s, b is
// taken over (a new holder and a concrete lease, as lockedRequest's
// take-over writes them), and a session queues for the requests table's
// exclusive lock behind both. s commits. The renewal proceeds; when it
// has committed the queued session gets its lock, and the renewal's
// count, a new statement, waits for it: the instance row, committed with
// the new lease, is free for a decision while step 5 has not run. Under
// the lock (the base), the renewal's count ran on the table lock its
// transaction already held and the renewal returned before the session
// got its lock. Then the renewal answers a only.
func TestRenewalReadsAgainAfterItsCommit(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	all := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2, 3)
	mustRenew(t, db, "gw-a", all, t0.Add(5*time.Minute), all...)
	ids := all[:2] // not the last renewal's ids: the full renewal
	a, b := ids[0], ids[1]
	until := t0.Add(20 * time.Minute)

	s, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Rollback() }()
	if _, err := s.ExecContext(ctx, `SELECT lease_until FROM instance_leases WHERE instance = 'gw-a' FOR SHARE`); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		ids []approval.ID
		err error
	}
	renewed := make(chan answer, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err := db.RenewLeases(ctx, "gw-a", ids, until)
		renewed <- answer{got, err}
	}()
	waitBlocked(t, db, done) // at the upsert, behind s
	if _, err := s.ExecContext(ctx, `UPDATE requests SET held_by = 'gw-b', lease_until = $1 WHERE id = $2`,
		t0.Add(30*time.Minute).UnixMilli(), string(b)); err != nil {
		t.Fatal(err)
	}

	locker, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Rollback() }()
	locked := make(chan error, 1)
	go func() {
		_, err := locker.ExecContext(ctx, `LOCK TABLE requests IN ACCESS EXCLUSIVE MODE`)
		locked <- err
	}()
	waitLockWaiters(t, db, 2, nil) // the renewal and the locker
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if err := countWaitsOrDone(ctx, db, done); err != nil {
		t.Fatal(err)
	}
	// Step 5 waits; the instance row is committed and free.
	var lease int64
	if err := db.asql.QueryRowContext(ctx, `SELECT lease_until FROM instance_leases
		WHERE instance = 'gw-a' FOR SHARE NOWAIT`).Scan(&lease); err != nil {
		t.Fatalf("a decision's FOR SHARE of the instance row while step 5 waits: %v", err)
	}
	if lease != until.UnixMilli() {
		t.Errorf("instance lease %d while step 5 waits, want the renewal's %d", lease, until.UnixMilli())
	}
	if err := locker.Rollback(); err != nil {
		t.Fatal(err)
	}
	got := <-renewed
	if got.err != nil {
		t.Fatal(got.err)
	}
	if !slices.Equal(got.ids, []approval.ID{a}) {
		t.Errorf("renewed %v, want [%s] (b was taken over before the renewal committed)", got.ids, a)
	}
	if h, _ := leaseOf(t, db, b); h != "gw-b" {
		t.Errorf("b held by %q, want gw-b", h)
	}
}

// countWaitsOrDone returns once a backend of db's database waits for a
// lock in the renewal's count of its marked rows (quietCountQuery), or an
// error if done closes first (the renewal finished without waiting).
func countWaitsOrDone(ctx context.Context, db *DB, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		select {
		case <-done:
			return errRenewedUnderTheLock
		default:
		}
		var n int
		err := db.asql.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()
			AND query LIKE 'SELECT COUNT(*) FROM requests%'`).Scan(&n)
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
}

// errRenewedUnderTheLock: the renewal finished step 5 before its commit.
var errRenewedUnderTheLock = errors.New("the renewal read its marked rows again before it committed: the instance row was held through step 5")
