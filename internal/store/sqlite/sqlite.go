package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"toolgate/internal/store"
)

var _ store.Store = (*DB)(nil)

// busyTimeout is how long SQLite itself waits for a lock (PRAGMA
// busy_timeout) before reporting SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// busyRetries is how many more times a transaction that still got
// SQLITE_BUSY after busyTimeout is tried before its error is returned.
const busyRetries = 3

// Options configures a DB. The zero value (or nil) is valid.
type Options struct {
	// Logger receives debug and warning messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock for events whose request records no time of its own
	// (see store.ChangeEvents) and for schema_migrations; nil means time.Now.
	Now func() time.Time
}

// A DB is a store.Store backed by one SQLite file, shared safely by any
// number of goroutines and processes. Writes use IMMEDIATE transactions, so
// a read-modify-write holds the database write lock from its first read.
type DB struct {
	sql    *sql.DB
	log    *slog.Logger
	now    func() time.Time
	closed atomic.Bool
}

// Open opens (creating if needed) the SQLite database at path, a file
// system path (not a URI; it must not contain '?'), and applies pending
// migrations. The parent directory is created with mode 0700 and a new
// database file with mode 0600. The connection uses WAL journaling, a
// 5 s busy timeout, foreign keys and IMMEDIATE transactions (STYLE R21).
// Errors reaching the file wrap store.ErrUnavailable.
func Open(ctx context.Context, path string, opts *Options) (*DB, error) {
	if path == "" || strings.ContainsRune(path, '?') || path == ":memory:" {
		return nil, fmt.Errorf("open sqlite: invalid path %q: want a file path without '?'", path)
	}
	db := &DB{log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	if opts != nil {
		if opts.Logger != nil {
			db.log = opts.Logger
		}
		if opts.Now != nil {
			db.now = opts.Now
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w: %w", path, store.ErrUnavailable, err)
	}
	// Create the file ourselves so it is private; SQLite gives the -wal and
	// -shm files the same mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w: %w", path, store.ErrUnavailable, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w: %w", path, store.ErrUnavailable, err)
	}
	dsn := path + "?_pragma=journal_mode(WAL)" +
		fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()) +
		"&_pragma=foreign_keys(ON)&_txlock=immediate"
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	db.sql = sdb
	if err := db.migrate(ctx); err != nil {
		_ = sdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// Ping checks that the database answers a query. Errors wrap
// store.ErrUnavailable.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	if err := db.sql.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return db.wrap("ping", err)
	}
	return nil
}

// Close closes the database. Calls after Close fail with errors wrapping
// store.ErrUnavailable.
func (db *DB) Close() error {
	db.closed.Store(true)
	return db.sql.Close()
}

// inTx runs fn in one IMMEDIATE transaction (see _txlock in Open) and commits
// when it returns nil. When the database stays locked past the busy timeout
// (SQLITE_BUSY), the whole transaction is tried again up to busyRetries
// times, so fn must be safe to run more than once.
func (db *DB) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := db.txOnce(ctx, fn)
		if err == nil || !isBusy(err) || attempt == busyRetries {
			return err
		}
		db.log.DebugContext(ctx, "sqlite busy; retrying transaction", "attempt", attempt+1, "err", err)
		backoff := time.NewTimer(time.Duration(attempt+1) * 20 * time.Millisecond)
		select {
		case <-ctx.Done():
			backoff.Stop()
			return err
		case <-backoff.C:
		}
	}
}

func (db *DB) txOnce(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// sqliteCode returns the primary SQLite result code in err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

func isBusy(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
}

// wrap prefixes err with op and, when it means the database cannot be
// reached or used (closed handle, I/O error, unopenable or corrupt file,
// lock held past every retry), adds store.ErrUnavailable to its chain.
func (db *DB) wrap(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	unavailable := db.closed.Load() || errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn)
	switch sqliteCode(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_FULL, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_READONLY,
		sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PERM:
		unavailable = true
	}
	if unavailable && !errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
