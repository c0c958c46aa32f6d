package sqlstore

import (
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestLockedReadLooksUpTheLeaseOnce: pgLock's locking read (pgLockRow,
// pgLockRowTask) reads the holder's instance lease once, under its share
// lock (pgLockedLease), not also unlocked as requestSelect's last column
// reads it for every other request read; pgLock scans the locked one into
// the row's holderLease in that column's place (pgalloc43: one column and
// one lease lookup fewer per decision, consume and outcome). Counted in
// the statements' plans: every lookup is a scan of instance_leases.
func TestLockedReadLooksUpTheLeaseOnce(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	for name, q := range map[string]string{"pgLockRow": pgLockRow, "pgLockRowTask": pgLockRowTask} {
		rows, err := db.asql.QueryContext(t.Context(), `EXPLAIN (COSTS OFF) `+q, string(testID(1)))
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		if n := strings.Count(text, " on instance_leases"); n != 1 {
			t.Errorf("%s looks up instance_leases %d times, want once (under its share lock):\n%s", name, n, text)
		}
	}
}

// TestLockedReadsMatchTheStoredRows: pgLock scans into targets it keeps
// between writes (postgresDialect.locks), so one locked read must not
// leave a value in the next: reading rows that differ in every optional
// column (the marked lease with and without its instance's lease row, a
// concrete lease, no lease, NULL and present arguments, decided and not)
// one after another, with and without the task column, each must read as
// the unlocked read (getRequestRow, requestSelect) reads it, and the task
// probe and transaction id must be the row's own.
func TestLockedReadsMatchTheStoredRows(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	pg := db.d.(*postgresDialect)
	marked := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2)
	mustRenew(t, db, "gw-a", marked, t0.Add(5*time.Minute), marked...)
	gone := createHeld(t, db, "gw-gone", t0.Add(time.Minute), 3)
	mustRenew(t, db, "gw-gone", gone, t0.Add(5*time.Minute), gone...)
	pgExec(t, db, `DELETE FROM instance_leases WHERE instance = 'gw-gone'`)
	concrete := createHeld(t, db, "gw-c", t0.Add(3*time.Minute), 4)
	plain := pendingRequest(testID(5))
	plain.Arguments = nil
	if err := db.CreateRequest(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateRequest(ctx, marked[1], "alice", approveFn); err != nil {
		t.Fatal(err)
	}
	pgExec(t, db, `INSERT INTO approval_tasks (request_id, principal, created_at, expires_at) VALUES ($1, '{}', 0, 0)`, string(concrete[0]))
	ids := []approval.ID{marked[0], gone[0], concrete[0], plain.ID, marked[1], concrete[0], marked[0], plain.ID, gone[0]}
	var lastXid int64
	for i, id := range ids {
		want, err := getRequestRow(ctx, db, id, "")
		if err != nil {
			t.Fatal(err)
		}
		var (
			task *bool
			xid  int64
		)
		if i%2 == 0 {
			task = new(bool)
		}
		conn, got, err := pgLock(ctx, pg, id, false, task, nil, &xid)
		if err != nil {
			t.Fatalf("read %d (%s): %v", i, id, err)
		}
		pgRollback(ctx, conn)
		if got != want {
			t.Errorf("read %d (%s) locked:\n%+v\nwant as stored:\n%+v", i, id, got, want)
		}
		if task != nil && *task != (id == concrete[0]) {
			t.Errorf("read %d (%s) says it holds a task: %v", i, id, *task)
		}
		if xid == 0 || xid == lastXid {
			t.Errorf("read %d (%s) took transaction id %d after %d", i, id, xid, lastXid)
		}
		lastXid = xid
	}
}

// TestGuardRowKeepsTheLockedRowsValues: the row of a guarded write (the
// second pipeline's first statement) follows pgLock's locking read on
// its connection; pgx (v5.12) makes the connection's slice of row values
// anew for a row over 32 columns narrower than the slice, and again for
// the next locked read. The statements' widths, as Postgres describes
// them, must keep every guard row, and the outcome's row (pgOutcome, the
// next statement after a consume), within 32 columns of either locked
// read and no wider than it (pgGuardPad), so a write allocates no values
// slice for either.
func TestGuardRowKeepsTheLockedRowsValues(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	pg := db.d.(*postgresDialect)
	p := approvalPlan(t)
	withEvents, _ := pgGuardedWrite(pg, p)
	p.events = nil
	alone, _ := pgGuardedWrite(pg, p)
	conn, err := pg.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	width := func(q string) int {
		t.Helper()
		sd, err := conn.Conn().Prepare(ctx, "", q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return len(sd.Fields)
	}
	for lname, lq := range map[string]string{"pgLockRow": pgLockRow, "pgLockRowTask": pgLockRowTask} {
		l := width(lq)
		if lname == "pgLockRowTask" && l != pgLockWidth {
			t.Errorf("pgLockRowTask answers %d columns, pgLockWidth says %d", l, pgLockWidth)
		}
		for gname, gq := range map[string]string{"the guarded write with its events": withEvents, "the guarded write alone": alone,
			"pgOutcome": pgOutcome, "pgOutcomeLedger": pgOutcomeLedger} {
			if g := width(gq); g > l || l-g > 32 {
				t.Errorf("%s answers %d columns after %s's %d: pgx makes a values slice for each", gname, g, lname, l)
			}
		}
	}
}
