package sqlstore

import (
	"errors"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestLockReadsALeaseRowInsertedWhileItWaited: the pipelined write's
// locking read (pgLockRow) reads the request's row and its holder's
// instance lease in one statement, whose snapshot is taken before it waits
// for the row's lock. An instance lease row inserted while it waited is
// not in that snapshot; the write must still decide on it (pgLock reads it
// again by pgLockLease), not on "no lease row", which reads as a lease
// that lapsed long ago and would let a take-over through. Without the
// second read the take-over below succeeds.
func TestLockReadsALeaseRowInsertedWhileItWaited(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	id := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1)[0]
	mustRenew(t, db, "gw-a", []approval.ID{id}, t0.Add(5*time.Minute), id)
	// gw-a's lease row goes (pruned) and the request keeps its marker.
	pgExec(t, db, `DELETE FROM instance_leases WHERE instance = 'gw-a'`)

	rowLock, err := db.asql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rowLock.Rollback() }()
	if _, err := rowLock.ExecContext(ctx, `SELECT 1 FROM requests WHERE id = $1 FOR UPDATE`, string(id)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var takeErr error
	go func() {
		defer close(done)
		_, takeErr = takeOver(ctx, db, id, "gw-b", t0.Add(10*time.Minute))
	}()
	waitBlocked(t, db, done)
	// While the take-over waits for the row: gw-a's lease row is written
	// again (a renewal's upsert), until t0+20m, and committed.
	pgExec(t, db, `INSERT INTO instance_leases (instance, lease_until) VALUES ('gw-a', $1)`, t0.Add(20*time.Minute).UnixMilli())
	if err := rowLock.Commit(); err != nil {
		t.Fatal(err)
	}
	<-done
	if !errors.Is(takeErr, errKeep) {
		t.Fatalf("take-over after the lease row came back = %v, want none (gw-a's lease runs until t0+20m)", takeErr)
	}
	if h, lu := leaseOf(t, db, id); h != "gw-a" || !lu.Equal(t0.Add(20*time.Minute)) {
		t.Errorf("held by %q until %v, want gw-a until t0+20m", h, lu)
	}
}
