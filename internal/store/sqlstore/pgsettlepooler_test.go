package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestSettleBehindAPooler: behind a pooler that makes up the cancel key of
// each connection (PgBouncer; commitLoser.madeUpKey), a write whose
// connection ended while its transaction still ran on the server, waiting
// for a lock, is settled by the server process that runs it: still running
// for the whole settling, so the write is in doubt; it then commits and
// stands. Before, the made-up key (PgConn.PID) named no server process, so
// the writer read as gone and the write was reported failed (unavailable,
// not in doubt) while it went on to commit: a held call denied whose
// request then stood pending, or an outcome reported lost that stood.
func TestSettleBehindAPooler(t *testing.T) {
	writes := []struct {
		name  string
		setup func(t *testing.T, db *DB) (hold string, holdArgs []any, write func(context.Context) error, stands func() bool)
	}{
		// The creation's pipeline waits at its first cap's advisory lock.
		{"create", func(t *testing.T, db *DB) (string, []any, func(context.Context) error, func() bool) {
			t.Helper()
			r := freshRequest(1)
			locks, err := capLocks(createCaps)
			if err != nil {
				t.Fatal(err)
			}
			space, key := lockKeyArgs(locks[0].space, locks[0].key)
			return `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`, []any{space, key},
				func(ctx context.Context) error { return db.CreateRequest(ctx, r, createCaps...) },
				func() bool {
					got, err := db.GetRequest(t.Context(), r.ID)
					return err == nil && got.State == approval.StatePending
				}
		}},
		// The outcome's UPDATE waits for its request's row.
		{"outcome", func(t *testing.T, db *DB) (string, []any, func(context.Context) error, func() bool) {
			t.Helper()
			id := testID(1)
			consumedRequest(t, db, id)
			return `SELECT 1 FROM requests WHERE id = $1 FOR UPDATE`, []any{string(id)},
				func(ctx context.Context) error {
					return db.RecordOutcome(ctx, id, approval.OutcomeOK, nil, "toolgate")
				}, func() bool {
					got, err := db.GetRequest(t.Context(), id)
					return err == nil && got.DispatchOutcome == approval.OutcomeOK
				}
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			db, proxy := openThroughProxy(t, 0, true)
			ctx := t.Context()
			hold, holdArgs, write, stands := w.setup(t, db)

			// Hold a lock the write's transaction waits for once begun (on
			// the admin pool: the main pool's connections are the write's
			// and the settling's).
			lock, err := db.asql.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lock.Rollback() }()
			if _, err := lock.ExecContext(ctx, hold, holdArgs...); err != nil {
				t.Fatal(err)
			}
			notesSent(db) // no notification of an earlier write is sent through the armed proxy
			proxy.arm(cutAfterSync)
			werr := write(ctx)
			if n := proxy.lost.Load(); n != 1 {
				t.Fatalf("connections cut after the write's Sync = %d, want 1", n)
			}
			// Its transaction still waits: the settling cannot have seen it
			// commit, nor seen its server process end.
			if !errors.Is(werr, store.ErrInDoubt) || !errors.Is(werr, store.ErrUnavailable) {
				t.Errorf("the write whose transaction still ran when its connection ended = %v; want in doubt and unavailable (it may yet commit)", werr)
			}
			writer := lockWaiter(t, db.sql)
			if err := lock.Commit(); err != nil {
				t.Fatal(err)
			}
			waitGone(t, db.sql, writer)
			if !stands() {
				t.Errorf("the write does not stand after its transaction ended")
			}
		})
	}
}

// lockWaiter is the server process of the database that waits for a
// lock: the cut write's, whose settling found it running.
func lockWaiter(t *testing.T, q *sql.DB) int64 {
	t.Helper()
	var pids []int64
	rows, err := q.QueryContext(t.Context(), `SELECT l.pid FROM pg_locks l
		JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var pid int64
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil || len(pids) != 1 {
		t.Fatalf("server processes waiting for a lock = %v, %v; want the cut write's only", pids, err)
	}
	return pids[0]
}

// waitGone waits until server process pid has ended: the cut write's,
// whose connection is closed, ends once its transaction has (it commits
// the pipeline it holds, then finds the connection closed).
func waitGone(t *testing.T, q *sql.DB, pid int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var alive bool
		if err := q.QueryRowContext(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut write's server process %d still runs after 30s", pid)
		}
		time.Sleep(time.Millisecond)
	}
}
