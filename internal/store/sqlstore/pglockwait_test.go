package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// holdRequests opens a transaction on a new connection of raw, named app
// (application_name), that reads requests, as a long report would: it
// holds ACCESS SHARE on the table, which an ALTER TABLE requests waits
// for. It returns the transaction and the session's pid; the test ends it.
func holdRequests(t *testing.T, raw *sql.DB, app string) (*sql.Tx, int) {
	t.Helper()
	ctx := t.Context()
	c, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var pid int
	if err := c.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(ctx, `SET application_name = '`+app+`'`); err != nil {
		t.Fatal(err)
	}
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM requests`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

// ddlWaitMessage is pgApplyWaiting's log message for a try that gave up.
const ddlWaitMessage = "schema migration gave up waiting for a table lock another session holds; trying again"

// TestDDLLockWaitLetsWritesThrough: a database at version 23 is opened
// while another session's transaction reads requests. Migration 24's ALTER
// TABLE requests waits for it at most its lock_timeout, gives up (logged)
// and tries again; meanwhile an INSERT into requests from a third session
// completes while the reader still holds its lock; once the reader ends,
// Open succeeds. At 804731b2 the ALTER waited for the reader for as long
// as it ran, and the INSERT queued behind the ALTER: here it fails by its
// own lock_timeout (30 s, a bound, not a measure).
func TestDDLLockWaitLetsWritesThrough(t *testing.T) {
	ctx := t.Context()
	cfg := oldDatabase(t, postgresBackend(t), 23, v2RequestInsert("r1"))
	var gaveUp atomic.Int64
	cfg.Logger = slog.New(messageCount{msg: ddlWaitMessage, n: &gaveUp})
	cfg.ddl = ddlWait{lockTimeout: 100 * time.Millisecond, total: time.Hour}
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	reader, readerPID := holdRequests(t, raw, "long-report")

	opened := make(chan error, 1)
	openAsync(ctx, cfg, opened)
	waitCount(t, raw, "its ALTER waited for the reader", func() bool { return len(opened) > 0 },
		`SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'requests'::regclass`)

	w, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	if _, err := w.ExecContext(ctx, `SET lock_timeout = '30s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ExecContext(ctx, v2RequestInsert("r2")); err != nil {
		t.Fatalf("the insert while a migration waits for the reader: %v", err)
	}
	// The reader still holds its lock (idle in its transaction), and Open
	// still waits.
	var state string
	if err := raw.QueryRowContext(ctx, `SELECT state FROM pg_stat_activity WHERE pid = $1`, readerPID).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != "idle in transaction" || len(opened) > 0 {
		t.Fatalf("the insert completed after the reader (state %q) or Open (%d) ended", state, len(opened))
	}
	if err := reader.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open = %v", err)
	}
	if gaveUp.Load() == 0 {
		t.Error("no try that gave up was logged")
	}
	db := openTest(t, cfg)
	checkMigrations(t, db)
}

// TestDDLLockWaitFailsNamingBlocker: when the reader never ends within the
// bound, Open fails with the lock timeout (SQLSTATE 55P03) and names the
// reader's pid, application_name and state, and no migration after 23 is
// recorded. At 804731b2 Open waited for the reader as long as it ran
// (here: until the test's bound of a minute ended Open's context, without
// naming it).
func TestDDLLockWaitFailsNamingBlocker(t *testing.T) {
	cfg := oldDatabase(t, postgresBackend(t), 23, v2RequestInsert("r1"))
	cfg.ddl = ddlWait{lockTimeout: 50 * time.Millisecond, total: 400 * time.Millisecond}
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	_, readerPID := holdRequests(t, raw, "long-report")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	db, err := Open(ctx, cfg)
	if err == nil {
		_ = db.Close()
		t.Fatal("Open succeeded while the reader held requests")
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgLockNotAvailable {
		t.Errorf("Open = %v, want a lock timeout (%s)", err, pgLockNotAvailable)
	}
	for _, want := range []string{fmt.Sprintf("pid %d ", readerPID), `application_name "long-report"`, `state "idle in transaction"`, "0024_"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open = %v, want it to name %s", err, want)
		}
	}
	var v int
	if err := raw.QueryRowContext(t.Context(), `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != 23 {
		t.Errorf("schema version %d after the failed start, want 23", v)
	}
}

// TestFirstStartIsOneTransaction: a new database's first start does not
// wait for another transaction's snapshot (its index builds are plain, in
// the one transaction of all migrations), and reports Created. At 804731b2
// the first start committed versions 1–25, then built migration 26's
// indexes concurrently, waiting for the snapshot; a start that failed
// there (here: its context's bound of a minute) left 25 versions, and the
// next start was not Created.
func TestFirstStartIsOneTransaction(t *testing.T) {
	cfg := postgresBackend(t).fresh(t)
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	snap := holdSnapshot(t, raw)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	db, err := Open(ctx, cfg)
	if err != nil {
		_ = snap.Commit()
		again := openTest(t, cfg)
		t.Fatalf("first start = %v; the next start's Created() = %v", err, again.Created())
	}
	defer func() { _ = db.Close() }()
	if !db.Created() {
		t.Error("first start: Created() = false")
	}
	checkMigrations(t, db)
	if got := inTxForm("CREATE UNIQUE INDEX\tconcurrently IF NOT EXISTS a ON a (b) WHERE c = ' CONCURRENTLY '"); got != "CREATE UNIQUE INDEX IF NOT EXISTS a ON a (b) WHERE c = ' CONCURRENTLY '" {
		t.Errorf("inTxForm = %q", got)
	}
}
