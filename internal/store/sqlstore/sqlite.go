package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"toolgate/internal/store"
)

// busyTimeout is how long SQLite itself waits for a lock (PRAGMA
// busy_timeout) before reporting SQLITE_BUSY; inTx then retries the
// transaction.
const busyTimeout = 5 * time.Second

// DefaultWatchInterval is how often Watch reads PRAGMA data_version on
// SQLite when Config.WatchInterval is 0.
const DefaultWatchInterval = 250 * time.Millisecond

// sqliteReadConns is the size of the SQLite read pool: WAL readers run
// concurrently, and a few suffice on any machine this runs on (a query
// takes microseconds). One more connection is Watch's.
const sqliteReadConns = 4

// sqliteCacheKiB is each SQLite connection's page cache (PRAGMA
// cache_size, in KiB), a quarter of SQLite's default 2,000 KiB. The cache
// is C heap (modernc's libc), outside the Go heap and its collector, and
// that allocator rounds a page's slot (4 KiB of page and its header) up to
// 8 KiB, so a full default cache holds ≈ 3.7 MB of memory; toolgate keeps
// up to nine connections (two writers, sqliteReadConns + 1 readers,
// AdminConns), and after 10,000 held calls were admitted and listed their
// caches were 10–20 MB of toolgate's RSS (docs/performance.md, "rss26").
// The queries that read many pages (a reviewer's list, the audit trail's
// catch-up) read them once per query; the pages stay in the OS's page
// cache.
const sqliteCacheKiB = 512

// sqliteDialect is SQLite through modernc.org/sqlite: ? placeholders, every
// transaction IMMEDIATE (_txlock=immediate), so it holds the write lock from
// BEGIN and needs no row or named locks.
type sqliteDialect struct {
	interval time.Duration // of Watch
}

// openSQLite creates cfg.Path's directory (0700) and file (0600) if
// needed and opens it with WAL journaling, a 5 s busy timeout, foreign keys
// and IMMEDIATE transactions (STYLE R21), and temporary files (the
// savepoints' journals of the group commit) in memory, and a page cache of
// sqliteCacheKiB per connection. Nothing is read yet.
//
// It returns two bounded pools on the file. Writes go through one
// connection, the group commit's (batch.go): SQLite lets one transaction
// write at a time anyway, so in-process writers queue in Go (each waiting
// only as long as its context allows) and share commits, instead of each
// holding a connection of its own while SQLite's busy handler sleeps and
// retries, which starved some of them past the busy timeout under load.
// Only other processes on the same file contend through the busy timeout.
// Reads get sqliteReadConns connections (+1 for Watch), all kept open:
// opening one costs a file open and the pragmas. The admin API's reads
// get a third pool of AdminConns connections (DB.adminReads): while
// thousands of held calls are admitted, their reads queue for the read
// pool, and database/sql hands a freed connection to any one of the
// waiters, so a reviewer's list could wait there past its deadline.
func openSQLite(cfg Config) (read, write, admin *sql.DB, _ dialect, _ error) {
	path := cfg.Path
	if path == "" || strings.ContainsRune(path, '?') || path == ":memory:" || strings.HasPrefix(path, "file:") {
		// A "file:" URI would be opened by SQLite as the URI's file, not
		// the one created below with mode 0600 (attack31).
		return nil, nil, nil, nil, fmt.Errorf("invalid path %q: want a file path (not :memory:, no \"file:\" URI, no '?')", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	// Create the file ourselves so it is private; SQLite gives the -wal and
	// -shm files the same mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // G304: the operator's storage.path, opened on purpose

	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if err := f.Close(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	dsn := path + "?_pragma=journal_mode(WAL)" +
		fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()) +
		"&_pragma=foreign_keys(ON)&_pragma=temp_store(MEMORY)" +
		fmt.Sprintf("&_pragma=cache_size(%d)", -sqliteCacheKiB) + // negative: KiB
		"&_txlock=immediate"
	write, err = sql.Open("sqlite", dsn)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// One connection writes (the batcher's); the other only prepares the
	// cached statements, which the writing one then prepares for itself
	// once (batch.go).
	write.SetMaxOpenConns(2)
	write.SetMaxIdleConns(2)
	read, err = sql.Open("sqlite", dsn)
	if err != nil {
		_ = write.Close()
		return nil, nil, nil, nil, err
	}
	read.SetMaxOpenConns(sqliteReadConns + 1)
	read.SetMaxIdleConns(sqliteReadConns + 1)
	admin, err = sql.Open("sqlite", dsn)
	if err != nil {
		_ = write.Close()
		_ = read.Close()
		return nil, nil, nil, nil, err
	}
	admin.SetMaxOpenConns(AdminConns)
	admin.SetMaxIdleConns(AdminConns)
	d := &sqliteDialect{interval: cfg.WatchInterval}
	if d.interval == 0 {
		d.interval = DefaultWatchInterval
	}
	return read, write, admin, d, nil
}

func (*sqliteDialect) name() string           { return DriverSQLite }
func (*sqliteDialect) rebind(q string) string { return q }
func (*sqliteDialect) forUpdate() string      { return "" }

func (*sqliteDialect) txOptions() *sql.TxOptions { return nil }
func (*sqliteDialect) close()                    {}

func (*sqliteDialect) lock(context.Context, *tx, lockName) error             { return nil }
func (*sqliteDialect) lockShared(context.Context, *tx, lockName) error       { return nil }
func (*sqliteDialect) lockKey(context.Context, *tx, lockSpace, string) error { return nil }

// feedQuery: one transaction writes at a time, so seq order is commit
// order and every event with a seq after the cursor's is final.
func (*sqliteDialect) feedQuery(cols string, after store.Cursor, limit int) (string, []any) {
	return `SELECT ` + cols + `, '0' FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, []any{after.Seq, limit}
}

func (*sqliteDialect) feedEndQuery() string {
	return `SELECT '0', seq FROM events ORDER BY seq DESC LIMIT 1`
}
func (*sqliteDialect) notices([]event) []notice { return nil }

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
// or another, commits, and then watch reads the change feed from its place
// (see DB.Watch). Errors are logged once and the poll retried; the feed
// position is kept, so nothing is missed.
func (d *sqliteDialect) watch(ctx context.Context, db *DB, w watchFuncs) {
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	var (
		ver     versionReader
		last    int64
		seen    bool // last holds a reading from ver's connection
		failing bool // the previous round failed and was logged
		feed    = follower{db: db}
	)
	defer ver.close()
	var touch *touchWorker
	if w.touched != nil {
		touch = startTouchWorker(ctx, w.touched)
		defer touch.wait() // ctx is done whenever watch returns
	}
	for {
		v, err := ver.read(ctx, db)
		if st := db.settled; st != nil {
			st.polled(err == nil && (!seen || v != last), err)
		}
		if err == nil && (!seen || v != last || !feed.ok) {
			if err = feed.sync(ctx, w); err == nil {
				if seen && touch != nil {
					touch.kick() // a commit that may have written no event (a lease's release); off this goroutine
				}
				last, seen = v, true
			}
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				db.log.WarnContext(ctx, "watch sqlite changes", "err", err)
				failing = true
			}
			ver.close()
			seen = false
		case failing:
			db.log.InfoContext(ctx, "watch sqlite changes recovered")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// versionReader reads PRAGMA data_version on one connection of db, with
// the statement prepared once, on the driver's connection: SQLite's parser
// and code generator (tokenizer, pragma table, the VDBE's assembly) then run
// once per connection instead of every interval, so an idle gateway's poll
// no longer maps their code back after an idle release (docs/performance.md,
// branch idle27), and a poll allocates less (no
// database/sql rows or statement per poll). The zero value is ready; not
// safe for concurrent use.
type versionReader struct {
	conn *sql.Conn
	// stmt is prepared on conn's driver connection and used only within
	// conn.Raw, which holds that connection.
	stmt driver.Stmt
	dest [1]driver.Value
}

// read returns PRAGMA data_version, taking a connection from the pool and
// preparing the statement on it first if it has none. After an error the
// caller closes it (close), so the next read starts on a new connection.
func (r *versionReader) read(ctx context.Context, db *DB) (int64, error) {
	if r.conn == nil {
		c, err := db.sql.Conn(ctx)
		if err != nil {
			return 0, db.wrap("watch", err)
		}
		r.conn = c
	}
	var v int64
	err := r.conn.Raw(func(dc any) error {
		if r.stmt == nil {
			p, ok := dc.(driver.ConnPrepareContext)
			if !ok {
				return fmt.Errorf("sqlite driver connection %T cannot prepare", dc)
			}
			st, err := p.PrepareContext(ctx, `PRAGMA data_version`)
			if err != nil {
				return err
			}
			r.stmt = st
		}
		q, ok := r.stmt.(driver.StmtQueryContext)
		if !ok {
			return fmt.Errorf("sqlite statement %T cannot query", r.stmt)
		}
		rows, err := q.QueryContext(ctx, nil)
		if err != nil {
			return err
		}
		err = rows.Next(r.dest[:])
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		n, ok := r.dest[0].(int64)
		if !ok {
			return fmt.Errorf("PRAGMA data_version = %T, want an integer", r.dest[0])
		}
		v = n
		return nil
	})
	if err != nil {
		return 0, db.wrap("watch", err)
	}
	return v, nil
}

// close closes the statement and returns the connection to the pool.
func (r *versionReader) close() {
	if r.conn == nil {
		return
	}
	if r.stmt != nil {
		_ = r.conn.Raw(func(any) error { return r.stmt.Close() })
		r.stmt = nil
	}
	_ = r.conn.Close()
	r.conn = nil
}
