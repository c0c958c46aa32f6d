package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Defaults of ddlWait (Postgres migrations).
const (
	// DefaultDDLLockTimeout is the lock_timeout of a transactional
	// migration's statements: the longest an ALTER TABLE waits for its
	// ACCESS EXCLUSIVE lock behind another session's transaction. While it
	// waits, every later write to that table queues behind it (PostgreSQL
	// grants locks in order), so the wait is kept short and retried.
	DefaultDDLLockTimeout = 2 * time.Second
	// DefaultDDLWaitTotal bounds the time a migration keeps trying after a
	// lock timeout before the start fails, naming the sessions that held
	// the lock.
	DefaultDDLWaitTotal = 5 * time.Minute
	// ddlBackoffMax is the longest pause between two tries; the first is
	// 100 ms, doubling.
	ddlBackoffMax = 10 * time.Second
)

// ddlWait bounds how a transactional Postgres migration waits for the
// locks of its DDL: each try waits at most lockTimeout (lock_timeout), and
// the tries go on, with backoff, until total has passed since the first.
// A zero field means its default (DefaultDDLLockTimeout,
// DefaultDDLWaitTotal); tests set small ones.
type ddlWait struct {
	lockTimeout, total time.Duration
}

func (w ddlWait) withDefaults() ddlWait {
	if w.lockTimeout <= 0 {
		w.lockTimeout = DefaultDDLLockTimeout
	}
	if w.total <= 0 {
		w.total = DefaultDDLWaitTotal
	}
	return w
}

// pgLockNotAvailable is SQLSTATE 55P03, the error of a statement whose
// lock_timeout passed.
const pgLockNotAvailable = "55P03"

// pgApplyWaiting applies ms (transactional migrations) in one transaction
// on conn (pgApplyInTx) with lock_timeout db.ddl.lockTimeout, so that a
// statement waiting for a lock another session holds gives up its place
// in the lock queue, and the writes queued behind it go on. Each give-up
// is logged with the sessions that held the lock (blockers) and tried
// again after a pause (100 ms, doubling up to ddlBackoffMax); once
// db.ddl.total has passed since the first try, the error names them. Any
// other error ends it at once.
func (db *DB) pgApplyWaiting(ctx context.Context, conn *sql.Conn, ms []migration) error {
	w := db.ddl.withDefaults()
	start := time.Now()
	pause := 100 * time.Millisecond
	for try := 1; ; try++ {
		tryStart := time.Now()
		err := db.pgApplyInTx(ctx, conn, ms, w.lockTimeout)
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || pe.Code != pgLockNotAvailable {
			return err
		}
		who := db.pgBlockers(ctx, conn, tryStart)
		if time.Since(start)+pause > w.total {
			return fmt.Errorf("migration %s waited %v for a table lock held by %s: end that transaction, or start again when it has ended: %w",
				ms[0].name, time.Since(start).Round(time.Millisecond), who, err)
		}
		db.log.WarnContext(ctx, "schema migration gave up waiting for a table lock another session holds; trying again",
			"driver", DriverPostgres, "migration", ms[0].name, "try", try, "lock_timeout", w.lockTimeout,
			"pause", pause, "blocked_by", who)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("migration %s: waiting for a table lock held by %s: %w", ms[0].name, who, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, ddlBackoffMax)
	}
}

// pgBlockers describes the sessions of conn's database (other than conn's)
// whose transaction began before since and that hold a lock on a table of
// the current schema: those a migration's statement that began at since
// may have waited for. Each is "pid N (application_name "a", state "s",
// transaction open D)"; never the session's query, which may hold a
// tool's arguments. A failed read says so instead.
func (db *DB) pgBlockers(ctx context.Context, conn *sql.Conn, since time.Time) string {
	rows, err := conn.QueryContext(ctx, `
SELECT a.pid, a.application_name, COALESCE(a.state, ''), EXTRACT(EPOCH FROM clock_timestamp() - a.xact_start)::float8
FROM pg_stat_activity a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.xact_start < $1
	AND EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		WHERE l.pid = a.pid AND l.granted AND c.relnamespace = current_schema()::regnamespace)
ORDER BY a.xact_start`, since)
	if err != nil {
		return fmt.Sprintf("unknown sessions (reading pg_stat_activity: %v)", err)
	}
	defer func() { _ = rows.Close() }()
	var who []string
	for rows.Next() {
		var (
			pid        int
			app, state string
			open       float64
		)
		if err := rows.Scan(&pid, &app, &state, &open); err != nil {
			return fmt.Sprintf("unknown sessions (reading pg_stat_activity: %v)", err)
		}
		who = append(who, fmt.Sprintf("pid %d (application_name %q, state %q, transaction open %v)",
			pid, app, state, (time.Duration(open*float64(time.Second))).Round(time.Second)))
	}
	if err := rows.Err(); err != nil {
		return fmt.Sprintf("unknown sessions (reading pg_stat_activity: %v)", err)
	}
	if len(who) == 0 {
		return "a session that has ended since"
	}
	return strings.Join(who, ", ")
}
