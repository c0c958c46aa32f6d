package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// busyTimeout is how long SQLite itself waits for a lock (PRAGMA
// busy_timeout) before reporting SQLITE_BUSY; inTx then retries the
// transaction.
const busyTimeout = 5 * time.Second

// DefaultWatchInterval is how often Watch reads PRAGMA data_version on
// SQLite when Config.WatchInterval is 0.
const DefaultWatchInterval = 250 * time.Millisecond

// sqliteDialect is SQLite through modernc.org/sqlite: ? placeholders, every
// transaction IMMEDIATE (_txlock=immediate), so it holds the write lock from
// BEGIN and needs no row or named locks.
type sqliteDialect struct {
	interval time.Duration // of Watch
}

// openSQLite creates cfg.Path's directory (0700) and file (0600) if
// needed and opens it with WAL journaling, a 5 s busy timeout, foreign keys
// and IMMEDIATE transactions (STYLE R21). Nothing is read yet.
func openSQLite(cfg Config) (*sql.DB, dialect, error) {
	path := cfg.Path
	if path == "" || strings.ContainsRune(path, '?') || path == ":memory:" {
		return nil, nil, fmt.Errorf("invalid path %q: want a file path without '?'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	// Create the file ourselves so it is private; SQLite gives the -wal and
	// -shm files the same mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // G304: the operator's storage.path, opened on purpose

	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if err := f.Close(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	dsn := path + "?_pragma=journal_mode(WAL)" +
		fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()) +
		"&_pragma=foreign_keys(ON)&_txlock=immediate"
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, nil, err
	}
	d := &sqliteDialect{interval: cfg.WatchInterval}
	if d.interval == 0 {
		d.interval = DefaultWatchInterval
	}
	return sdb, d, nil
}

func (*sqliteDialect) name() string           { return DriverSQLite }
func (*sqliteDialect) rebind(q string) string { return q }
func (*sqliteDialect) forUpdate() string      { return "" }
func (*sqliteDialect) close()                 {}

func (*sqliteDialect) lock(context.Context, *tx, lockName) error  { return nil }
func (*sqliteDialect) notify(context.Context, *tx, []event) error { return nil }

func (*sqliteDialect) schemaMigrationsDDL() string {
	return `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`
}

// sqliteCode returns the primary SQLite result code in err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

func (*sqliteDialect) retryable(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
}

// unavailable: a lock held past every retry, an I/O error, an unopenable,
// full, corrupt, read-only or foreign file, or no memory.
func (*sqliteDialect) unavailable(err error) bool {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_FULL, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_READONLY,
		sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PERM:
		return true
	}
	return false
}

// watch polls PRAGMA data_version every interval on one dedicated
// connection; the value changes when any other connection, of this process
// or another, commits. It calls changed("") after the first reading, on
// every change, and after the connection had to be replaced. Poll errors
// are logged once and the poll retried.
func (d *sqliteDialect) watch(ctx context.Context, db *DB, changed func(approval.ID)) {
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	var (
		conn    *sql.Conn
		last    int64
		seen    bool // last holds a reading from conn
		failing bool // the previous poll failed and was logged
	)
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for {
		v, err := dataVersion(ctx, db, &conn)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				db.log.WarnContext(ctx, "poll sqlite data_version", "err", err)
				failing = true
			}
			if conn != nil {
				_ = conn.Close()
				conn = nil
			}
			seen = false
		default:
			if failing {
				db.log.InfoContext(ctx, "poll sqlite data_version recovered")
				failing = false
			}
			if !seen || v != last {
				last, seen = v, true
				changed("")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// dataVersion reads PRAGMA data_version on *conn, taking a connection from
// the pool first if *conn is nil.
func dataVersion(ctx context.Context, db *DB, conn **sql.Conn) (int64, error) {
	if *conn == nil {
		c, err := db.sql.Conn(ctx)
		if err != nil {
			return 0, db.wrap("watch", err)
		}
		*conn = c
	}
	var v int64
	if err := (*conn).QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return 0, db.wrap("watch", err)
	}
	return v, nil
}
