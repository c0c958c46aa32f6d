package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

var _ store.Store = (*DB)(nil)

// Drivers: the values of [Config.Driver] (as in the config key
// storage.driver).
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// defaultLimit is the page size of ListRequests, Due and Events when the
// caller passes 0.
const defaultLimit = 100

// txRetries is how many more times a transaction that failed with a
// conflict (SQLite: the database stayed locked past the busy timeout;
// Postgres: a serialization failure or a deadlock) is tried before its
// error is returned.
const txRetries = 3

// Config says which database to open and how. Driver and, for it, Path or
// DSN are required; every other field may be left zero.
type Config struct {
	// Driver is DriverSQLite or DriverPostgres.
	Driver string
	// Path is the SQLite database file: a file system path, not a URI (it
	// must not contain '?'). Its directory is created with mode 0700 and a
	// new file with mode 0600.
	Path string
	// DSN is the Postgres connection string (a libpq URL or key=value
	// string, as pgxpool.ParseConfig accepts, pool_* keys included). It is
	// never logged or put in errors.
	DSN string
	// MaxConns caps the Postgres pool; 0 keeps pgxpool's default (the DSN's
	// pool_max_conns, else max(4, number of CPUs)). Outside the pool, a DB
	// opens LeaseConns (1) more, reserved for RenewLeases, AdminConns (2)
	// more, reserved for the admin API's reads, NotifyConns (1) more for the
	// notifications sent after commits (pgNotifier), and each Watch one more
	// of its own: MaxConns + 5 in all with one Watch, as toolgate serve runs.
	// SQLite ignores it.
	MaxConns int
	// Poll is the interval of Watch's safety poll on Postgres; 0 means
	// DefaultPoll. SQLite ignores it.
	Poll time.Duration
	// WatchInterval is how often Watch reads PRAGMA data_version on SQLite;
	// 0 means DefaultWatchInterval. Postgres ignores it.
	WatchInterval time.Duration
	// IdleInTx is the Postgres idle_in_transaction_session_timeout of the
	// pools' connections (the main pool, the lease and admin pools): the
	// server ends a session that stays inside a transaction without sending
	// anything for that long, and so releases its row locks. 0 means
	// DefaultIdleInTx; a DSN that sets the parameter itself (options=-c …)
	// keeps its own. SQLite ignores it.
	IdleInTx time.Duration
	// Logger receives debug and warning messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock for events whose request records no time of its own
	// (see store.ChangeEvents) and for schema_migrations; nil means
	// time.Now.
	Now func() time.Time
	// ddl bounds a Postgres migration's waits for its tables' locks; the
	// zero value is the defaults (ddlWait). Tests set it.
	ddl ddlWait
}

// A DB is a store.Store on SQLite or Postgres, safe for concurrent use by
// any number of goroutines, and by other processes (SQLite) or gateway
// instances (Postgres) sharing the database.
type DB struct {
	sql      *sql.DB // reads (and, on Postgres, writes)
	wsql     *sql.DB // write transactions: on SQLite a pool of one connection; on Postgres sql
	lsql     *sql.DB // Postgres only (nil on SQLite): RenewLeases' reserved pool of LeaseConns
	asql     *sql.DB // the admin API's reserved read pool of AdminConns connections
	d        dialect
	log      *slog.Logger
	now      func() time.Time
	closed   atomic.Bool
	done     chan struct{} // closed by Close; stops Watch
	doneOnce sync.Once
	// SQLite only (nil on Postgres): the group commit of write
	// transactions and the prepared statements of each pool (batch.go).
	batch          *batcher
	rcache, wcache *stmtCache
	// renewed: each holder's last committed renewal's ids, for a quiet
	// renewal that counts instead of reading (renewquiet.go).
	renewed renewMemo
	// settled: SQLite only (nil on Postgres): what the watch saw of the
	// store's commits (Settled).
	settled *settledState
	// created: Open found no migration recorded (Created). Set once by
	// migrate, before Open returns.
	created bool
	// ddl: Config.ddl (Postgres migrations).
	ddl ddlWait
}

// Open opens the database cfg names and applies pending migrations so that
// processes or instances starting together apply each once (SQLite: in one
// transaction; Postgres: under a session advisory lock, see pgMigrate and
// noTxMarker for the index builds that run outside a transaction). A
// database whose schema is newer
// than this binary knows is refused. A bad Config (unknown driver, invalid
// path, malformed DSN) is an error that does not wrap store.ErrUnavailable;
// failing to reach or use the database is one that does.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.MaxConns < 0 || cfg.Poll < 0 || cfg.WatchInterval < 0 {
		return nil, fmt.Errorf("open %s: negative MaxConns %d, Poll %v or WatchInterval %v", cfg.Driver, cfg.MaxConns, cfg.Poll, cfg.WatchInterval)
	}
	db := &DB{log: cfg.Logger, now: cfg.Now, ddl: cfg.ddl, done: make(chan struct{})}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	if db.now == nil {
		db.now = time.Now
	}
	var (
		op  string
		err error
	)
	switch cfg.Driver {
	case DriverSQLite:
		op = "open sqlite " + cfg.Path
		db.sql, db.wsql, db.asql, db.d, err = openSQLite(cfg)
		if d, ok := db.d.(*sqliteDialect); ok {
			db.settled = &settledState{base: time.Now(), every: d.interval}
		}
	case DriverPostgres:
		op = "open postgres"
		db.sql, db.lsql, db.asql, db.d, err = openPostgres(ctx, cfg)
		db.wsql = db.sql
		if pg, ok := db.d.(*postgresDialect); ok {
			pg.notes.log = db.log
		}
	default:
		return nil, fmt.Errorf("open store: driver %q: want %s or %s", cfg.Driver, DriverSQLite, DriverPostgres)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if db.wsql != db.sql {
		db.batch = newBatcher(db)
		db.rcache, db.wcache = newStmtCache(db.sql), newStmtCache(db.wsql)
	}
	if err := db.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return db, nil
}

// Driver returns the driver the DB was opened with (Config.Driver).
func (db *DB) Driver() string { return db.d.name() }

// Ping checks that the database answers a query. Errors wrap
// store.ErrUnavailable unless the context ended.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	err := db.sql.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, store.ErrUnavailable):
		return fmt.Errorf("ping: %w", err)
	}
	// Whatever stops a ping means the store cannot be used.
	return fmt.Errorf("ping: %w: %w", store.ErrUnavailable, err)
}

// Close stops every Watch and closes the database, waiting for connections
// in use to be returned. Calls after Close fail with errors wrapping
// store.ErrUnavailable.
func (db *DB) Close() error {
	db.closed.Store(true)
	db.doneOnce.Do(func() { close(db.done) })
	var err error
	if db.batch != nil {
		db.batch.close()
		err = errors.Join(db.rcache.close(), db.wcache.close())
	}
	err = errors.Join(err, db.sql.Close())
	if db.wsql != db.sql {
		err = errors.Join(err, db.wsql.Close())
	}
	if db.lsql != nil {
		err = errors.Join(err, db.lsql.Close())
	}
	if db.asql != nil {
		err = errors.Join(err, db.asql.Close())
	}
	db.d.close()
	return err
}

// inTx runs fn in one write transaction and commits when fn returns nil;
// every write of the store goes through it. On SQLite the transaction is
// IMMEDIATE (it holds the database's write lock from BEGIN) and may be
// committed together with other write transactions waiting at the same
// moment, each in its own savepoint (group commit, batch.go): fn sees the
// database as if it ran alone, and inTx returns once the commit is on
// disk. On Postgres it is READ COMMITTED, and fn locks what it reads with
// tx.forUpdate and tx.lock. When it fails with a conflict (see
// dialect.retryable) the whole transaction is tried again, up to
// txRetries times with a short backoff, so fn must be safe to run more
// than once: it must reset whatever it captures on each run. fn's own
// errors are returned as they are. fn must not call inTx itself.
func (db *DB) inTx(ctx context.Context, fn func(*tx) error) error {
	return db.retry(ctx, func() error {
		if db.batch != nil {
			return db.batch.run(ctx, fn)
		}
		return db.txOnce(ctx, db.wsql, fn)
	})
}

// inLeaseTx is inTx on the connection reserved for lease renewals
// (LeaseConns) on Postgres, so that a renewal does not wait behind the
// transactions queued for the main pool; on SQLite it is inTx.
func (db *DB) inLeaseTx(ctx context.Context, fn func(*tx) error) error {
	if db.lsql == nil {
		return db.inTx(ctx, fn)
	}
	return db.retry(ctx, func() error { return db.txOnce(ctx, db.lsql, fn) })
}

// retry runs once and runs it again, up to txRetries times with a short
// backoff, while it fails with a conflict (see inTx).
func (db *DB) retry(ctx context.Context, once func() error) error {
	for attempt := 0; ; attempt++ {
		err := once()
		if err == nil || !db.d.retryable(err) || attempt == txRetries {
			return err
		}
		db.log.DebugContext(ctx, "store transaction conflict; retrying", "driver", db.d.name(), "attempt", attempt+1, "err", err)
		backoff := time.NewTimer(time.Duration(attempt+1) * 20 * time.Millisecond)
		select {
		case <-ctx.Done():
			backoff.Stop()
			return err
		case <-backoff.C:
		}
	}
}

// txOnce is one try of a write transaction of inTx on the pool on. On
// Postgres it is pgTxOnce, which settles a commit whose answer was lost.
func (db *DB) txOnce(ctx context.Context, on *sql.DB, fn func(*tx) error) error {
	if _, ok := db.d.(*postgresDialect); ok {
		return db.pgTxOnce(ctx, on, fn)
	}
	stx, err := on.BeginTx(ctx, db.d.txOptions())
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		// A panicking fn must not keep its connection, and the row locks
		// its statements took, until ctx ends (which may be never).
		if p := recover(); p != nil {
			_ = stx.Rollback()
			panic(p)
		}
	}()
	if err := fn(&tx{sql: stx, d: db.d, db: db}); err != nil {
		_ = stx.Rollback()
		return err
	}
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// A tx is one transaction of DB.inTx. Its query methods take queries
// written with ? placeholders and rebind them for the dialect.
type tx struct {
	// sql runs the statements: a *sql.Tx (SQLite), or on Postgres the
	// *sql.Conn whose server-side transaction pgTxOnce began.
	sql txRunner
	d   dialect
	db  *DB
	// grouped marks a transaction the batcher shares among several
	// callers (batch.go): its statements ignore the cancellation of the
	// context they are given, because SQLite rolls back the whole
	// transaction when a write is interrupted, and that would fail the
	// other callers' writes in the group too.
	grouped bool
	// stmts are the statements of the cache (stmt) prepared for this
	// transaction so far, by query: a batch runs the same few statements
	// for each of its writes, and sql.Tx.StmtContext makes a new
	// transaction statement (and its dependency entry) on every call.
	stmts []txStmt
	// rows, when not nil, is the requests row its reads scan into
	// (getRequestRow), the batcher's: one row and its 34 Scan
	// destinations on the heap per read otherwise (≈ 1 KB; a decision
	// and a consume read one each).
	rows *requestScanner
	// notes are the notifications of the transaction's changes, sent once
	// it committed (Postgres: pgTxOnce, pgNotifier); none on SQLite.
	notes []notice
}

// txStmt is one statement of tx.stmts.
type txStmt struct {
	q string
	s *sql.Stmt
}

// txRunner is what a tx sends its statements through: *sql.Tx and
// *sql.Conn have it.
type txRunner interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// context returns the context a statement of t runs under: ctx, or for a
// grouped transaction ctx without its cancellation.
func (t *tx) context(ctx context.Context) context.Context {
	if t.grouped {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// stmt returns q prepared for t (SQLite's statement cache), or nil. A
// statement is made for t once (t.stmts); database/sql closes it when t
// ends. t's statements run one at a time (its owner's goroutine).
func (t *tx) stmt(ctx context.Context, q string) *sql.Stmt {
	stx, ok := t.sql.(*sql.Tx)
	if !ok || t.db == nil || t.db.wcache == nil {
		return nil
	}
	for _, ts := range t.stmts {
		if ts.q == q {
			return ts.s
		}
	}
	if s := t.db.wcache.get(ctx, q); s != nil {
		ts := stx.StmtContext(ctx, s)
		t.stmts = append(t.stmts, txStmt{q: q, s: ts})
		return ts
	}
	return nil
}

func (t *tx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx = t.context(ctx)
	q = t.d.rebind(q)
	if s := t.stmt(ctx, q); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return t.sql.ExecContext(ctx, q, args...)
}

func (t *tx) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx = t.context(ctx)
	q = t.d.rebind(q)
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return t.sql.QueryContext(ctx, q, args...)
}

func (t *tx) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	ctx = t.context(ctx)
	q = t.d.rebind(q)
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return t.sql.QueryRowContext(ctx, q, args...)
}

// forUpdate is the clause that, appended to a SELECT, locks the rows it
// reads until the transaction ends (see dialect.forUpdate).
func (t *tx) forUpdate() string { return t.d.forUpdate() }

// lock takes the named lock l until the transaction ends (see
// dialect.lock).
func (t *tx) lock(ctx context.Context, l lockName) error {
	if err := t.d.lock(ctx, t, l); err != nil {
		return fmt.Errorf("lock %s: %w", l, err)
	}
	return nil
}

// querier is what reads need; *DB (outside any transaction) and *tx have
// it. Queries use ? placeholders.
type querier interface {
	query(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	queryRow(ctx context.Context, q string, args ...any) *sql.Row
}

func (db *DB) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	q = db.d.rebind(q)
	if db.rcache != nil {
		if s := db.rcache.get(ctx, q); s != nil {
			return s.QueryContext(ctx, args...)
		}
	}
	return db.sql.QueryContext(ctx, q, args...)
}

func (db *DB) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	q = db.d.rebind(q)
	if db.rcache != nil {
		if s := db.rcache.get(ctx, q); s != nil {
			return s.QueryRowContext(ctx, args...)
		}
	}
	return db.sql.QueryRowContext(ctx, q, args...)
}

// adminReads is the querier of the admin API's reads (ListRequests,
// ViewRequest): the pool reserved for them (AdminConns), so they never
// queue behind the calls' reads and writes in the other pools.
func (db *DB) adminReads() querier {
	return adminPool{db.asql, db.d}
}

// adminPool is a querier on the admin API's reserved pool.
type adminPool struct {
	sql *sql.DB
	d   dialect
}

func (p adminPool) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return p.sql.QueryContext(ctx, p.d.rebind(q), args...)
}

func (p adminPool) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return p.sql.QueryRowContext(ctx, p.d.rebind(q), args...)
}

// collect scans every row of rows with scan and closes rows. err is the
// error of the query that returned rows, so that a query can be passed in
// directly.
func collect[T any](rows *sql.Rows, err error, scan func(*sql.Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // on early returns; the error of the last Close is returned below
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// wrap prefixes err with op. A condition callers branch on (not found,
// already exists, conflict, revoked session) or the end of the context is
// only prefixed; an error that means the database cannot be reached or used
// (the DB is closed, a connection broke, or see dialect.unavailable) also
// gets store.ErrUnavailable in its chain.
func (db *DB) wrap(op string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrAlreadyExists), errors.Is(err, store.ErrConflict),
		errors.Is(err, store.ErrCapReached),
		errors.Is(err, session.ErrRevoked), errors.Is(err, store.ErrUnavailable),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", op, err)
	case db.closed.Load(), errors.Is(err, sql.ErrConnDone), errors.Is(err, driver.ErrBadConn), db.d.unavailable(err):
		return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Watch calls changed when requests changed, in this process or another,
// until ctx is done or the DB is closed; then it returns. It follows the
// change feed (Feed), so its work does not grow with the number of
// requests anyone waits on:
//
//   - changed("") once, when Watch has found its place in the feed (its
//     end): the caller re-reads whatever it holds, which covers changes
//     made before Watch started;
//   - changed(id) for each request with events after that place other
//     than its "requested" event (nobody waits on a request before it
//     exists), read from the feed: on SQLite when PRAGMA data_version moved (another
//     connection committed; read every Config.WatchInterval on one
//     dedicated connection); on Postgres at once from the NOTIFY sent
//     once the change committed (pgNotifier), and from the feed after every reconnect and
//     every Config.Poll (the safety poll), so a notification missed while
//     the listening connection was down is caught up, not lost.
//
// Watch uses one dedicated connection (SQLite: one of the read pool, held
// while Watch runs; Postgres: a pgx connection of its own outside the
// pool), so it never takes a pool connection while a person decides; run
// one per process. When the connection or a feed read fails, Watch keeps
// its place and tries again (Postgres: reconnecting with a backoff from
// 100 ms doubling to 5 s), logging a warning once. changed is called from
// one goroutine at a time, should return quickly, and must tolerate
// spurious calls (a request may be reported more than once).
func (db *DB) Watch(ctx context.Context, changed func(id approval.ID)) {
	db.WatchLog(ctx, changed, func() {})
}

// WatchLog is Watch that also calls appended whenever it saw the event log
// grow (any event, a request's creation too; on Postgres with every
// NOTIFY): readers of the whole log, such as the notification outbox,
// wake on it. appended is called like changed (one call at a time, never
// concurrently with changed) and may be spurious.
func (db *DB) WatchLog(ctx context.Context, changed func(id approval.ID), appended func()) {
	db.WatchLogTouched(ctx, changed, appended, nil)
}

// WatchLogTouched is WatchLog that also reports the writes the event
// log does not show (a lease's release, which ends a held call's lease
// early so that an identical re-send may take its request over): on
// SQLite it calls touched (when not nil) after every commit of another
// connection, of this process or another, that it noticed, once that
// commit's events were reported (at most once per poll, and spurious
// for commits that released nothing); on Postgres a release is notified
// and reported as changed(id) of its request, and touched is never
// called. touched runs on a goroutine of the watch's own, one call at a
// time, possibly while changed or appended runs, so that a slow touched
// does not hold up the next poll and its changed(id) calls; commits seen
// while it runs ask for one more call after it, not one each (see
// touchWorker). WatchLogTouched returns once the touched in flight did.
func (db *DB) WatchLogTouched(ctx context.Context, changed func(id approval.ID), appended, touched func()) {
	db.WatchEvents(ctx, WatchFuncs{Changed: changed, Appended: appended, Touched: touched})
}

// WatchFuncs are the callbacks of DB.WatchEvents. Changed and Appended
// are required; Touched and Policy may be nil.
type WatchFuncs struct {
	Changed  func(id approval.ID) // as in DB.Watch
	Appended func()               // as in DB.WatchLog
	Touched  func()               // as in DB.WatchLogTouched
	// Policy is called when a new deployment policy revision may have been
	// committed by any process: on Postgres for each NOTIFY on
	// PolicyChannel and once each time the LISTEN is (re)established (a
	// revision committed while nobody listened), and on both databases
	// when a read of the change feed met a policy_changed event (SQLite:
	// within one data_version poll of the commit). It is called like Changed (one call at a time, never
	// concurrently with Changed or Appended), must return quickly, and may
	// be spurious; the caller reads the current revision itself.
	Policy func()
}

// WatchEvents is WatchLogTouched with the callbacks in w, Policy among
// them.
func (db *DB) WatchEvents(ctx context.Context, w WatchFuncs) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-db.done:
			cancel()
		case <-ctx.Done():
		}
	})
	db.d.watch(ctx, db, watchFuncs{changed: w.Changed, appended: w.Appended, touched: w.Touched, policy: w.Policy})
	cancel()
	wg.Wait()
}

// lockKey takes the lock on (space, key) until the transaction ends (see
// dialect.lockKey).
func (t *tx) lockKey(ctx context.Context, space lockSpace, key string) error {
	if err := t.d.lockKey(ctx, t, space, key); err != nil {
		return fmt.Errorf("lock %x/%q: %w", int32(space), key, err)
	}
	return nil
}
