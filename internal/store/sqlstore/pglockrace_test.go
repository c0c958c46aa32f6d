package sqlstore

import (
	"errors"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestLockFollowsALeaseRowChangedWhileItWaited: the pipelined write's
// locking read (pgLockRow) reads the request's row and its holder's
// instance lease in one statement, whose snapshot is taken before it waits
// for the row's lock. A holder's lease row renewed while it waited (an
// UPDATE, committed) must be read as renewed: the take-over is refused
// (attack36). One deleted while it waited reads as no lease row: the
// take-over goes through, as it would have on e3d84af's separate read.
// One inserted while it waited (after the row had been pruned) is not in
// that snapshot; the write must still decide on it (pgLock reads it again
// by pgLockLease), not on "no lease row", which reads as a lease that
// lapsed long ago and would let the take-over through (pgapprove36).
func TestLockFollowsALeaseRowChangedWhileItWaited(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before string // run before the row is locked
		change string // run while the take-over waits for the row
		args   []any
		taken  bool
	}{
		{"renewed", "", `UPDATE instance_leases SET lease_until = $1 WHERE instance = 'gw-a'`, []any{t0.Add(20 * time.Minute).UnixMilli()}, false},
		{"deleted", "", `DELETE FROM instance_leases WHERE instance = 'gw-a'`, nil, true},
		{"inserted", `DELETE FROM instance_leases WHERE instance = 'gw-a'`,
			`INSERT INTO instance_leases (instance, lease_until) VALUES ('gw-a', $1)`, []any{t0.Add(20 * time.Minute).UnixMilli()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTest(t, postgresConfig(pgtest.Fresh(t)))
			ctx := t.Context()
			id := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1)[0]
			mustRenew(t, db, "gw-a", []approval.ID{id}, t0.Add(5*time.Minute), id)
			if tc.before != "" {
				pgExec(t, db, tc.before)
			}

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
			pgExec(t, db, tc.change, tc.args...)
			if err := rowLock.Commit(); err != nil {
				t.Fatal(err)
			}
			<-done
			h, lu := leaseOf(t, db, id)
			if tc.taken {
				if takeErr != nil || h != "gw-b" {
					t.Fatalf("take-over after gw-a's lease row went = %v (held by %q), want gw-b's", takeErr, h)
				}
				return
			}
			if !errors.Is(takeErr, errKeep) {
				t.Fatalf("take-over after gw-a's lease row was %s = %v, want none", tc.name, takeErr)
			}
			if h != "gw-a" || !lu.Equal(t0.Add(20*time.Minute)) {
				t.Errorf("held by %q until %v, want gw-a until t0+20m", h, lu)
			}
		})
	}
}
