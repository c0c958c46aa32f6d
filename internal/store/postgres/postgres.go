package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"toolgate/internal/store"
)

var _ store.Store = (*DB)(nil)

// Channel is the LISTEN/NOTIFY channel on which every change that writes
// events is announced, with the payload "<id> <state>".
const Channel = "toolgate_requests"

// PoolApplicationName is the application_name of the pool's connections,
// as pg_stat_activity shows it, unless the DSN sets one.
const PoolApplicationName = "toolgate"

// DefaultPoll is the safety poll interval of Watch when Options.Poll is 0.
const DefaultPoll = 5 * time.Second

// Advisory lock keys (one 64-bit key space per database). They spell
// "toolgate" in ASCII, plus a small offset per purpose.
const (
	lockKeyBase    int64 = 0x746f6f6c67617465
	migrateLockID        = lockKeyBase     // held by the migrating transaction
	eventsLockID         = lockKeyBase + 1 // held by each transaction that writes events
	sessionsLockID       = lockKeyBase + 2 // held by child creations and revocations
	policyLockID         = lockKeyBase + 3 // held by each transaction that appends a policy revision
)

// txRetries is how many more times a transaction that failed with a
// serialization failure or a deadlock is tried before its error is returned.
const txRetries = 3

// Options configures a DB. The zero value (or nil) is valid.
type Options struct {
	// Logger receives debug and warning messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock for events whose request records no time of its own
	// (see store.ChangeEvents) and for schema_migrations; nil means time.Now.
	Now func() time.Time
	// MaxConns caps the pool; 0 keeps pgxpool's default (the DSN's
	// pool_max_conns, else max(4, number of CPUs)). Watch uses one more
	// connection of its own, outside the pool.
	MaxConns int32
	// Poll is the interval of Watch's safety poll; 0 means DefaultPoll.
	Poll time.Duration
}

// A DB is a store.Store backed by PostgreSQL, safe for concurrent use by any
// number of goroutines and gateway instances.
type DB struct {
	pool     *pgxpool.Pool
	listen   *pgx.ConnConfig // template of Watch's dedicated connection
	log      *slog.Logger
	now      func() time.Time
	poll     time.Duration
	closed   atomic.Bool
	done     chan struct{} // closed by Close; stops Watch
	doneOnce sync.Once
}

// Open connects to the database named by dsn (a libpq URL or key=value
// string, as pgxpool.ParseConfig accepts) and applies pending migrations.
// The pool's connections get application_name [PoolApplicationName] unless
// the dsn sets one; Watch's connection always gets [WatchApplicationName].
// A malformed dsn is an error that does not wrap store.ErrUnavailable;
// failing to reach or use the database does. The dsn is never logged or put
// in errors.
func Open(ctx context.Context, dsn string, opts *Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's ParseConfigError redacts the password.
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db := &DB{
		log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		now:  time.Now,
		poll: DefaultPoll,
		done: make(chan struct{}),
	}
	if opts != nil {
		if opts.Logger != nil {
			db.log = opts.Logger
		}
		if opts.Now != nil {
			db.now = opts.Now
		}
		if opts.MaxConns < 0 || opts.Poll < 0 {
			return nil, fmt.Errorf("open postgres: negative MaxConns %d or Poll %v", opts.MaxConns, opts.Poll)
		}
		if opts.MaxConns > 0 {
			cfg.MaxConns = opts.MaxConns
		}
		if opts.Poll > 0 {
			db.poll = opts.Poll
		}
	}
	// Ping every connection before handing it out (one round trip). pgxpool
	// pings only connections idle for over a second by default, so right
	// after a restart or failover a dead connection used a moment ago would
	// fail the next gated call or decision although the server is back.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = PoolApplicationName
	}
	db.listen = cfg.ConnConfig.Copy()
	db.listen.RuntimeParams["application_name"] = WatchApplicationName
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db.pool = pool
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return db, nil
}

// Ping checks that the database answers. Errors wrap store.ErrUnavailable.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		// Whatever stops a ping means the store cannot be used.
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, store.ErrUnavailable) {
			return fmt.Errorf("ping: %w: %w", store.ErrUnavailable, err)
		}
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// Close stops every Watch and closes the pool, waiting for connections in
// use to be returned. Calls after Close fail with errors wrapping
// store.ErrUnavailable.
func (db *DB) Close() error {
	db.closed.Store(true)
	db.doneOnce.Do(func() { close(db.done) })
	db.pool.Close()
	return nil
}

// inTx runs fn in one READ COMMITTED transaction and commits when it
// returns nil. A transaction that fails with a serialization failure or a
// deadlock is tried again up to txRetries times, so fn must be safe to run
// more than once.
func (db *DB) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := db.txOnce(ctx, fn)
		if err == nil || !isRetryable(err) || attempt == txRetries {
			return err
		}
		db.log.DebugContext(ctx, "postgres transaction conflict; retrying", "attempt", attempt+1, "err", err)
	}
}

func (db *DB) txOnce(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := db.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// sqlState returns the SQLSTATE of a server error in err, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isRetryable reports a serialization failure (40001) or deadlock (40P01).
func isRetryable(err error) bool {
	c := sqlState(err)
	return c == "40001" || c == "40P01"
}

// isUnavailable reports whether err means the database cannot be reached or
// used: any failure to connect (refused, timed out, rejected by the server:
// unknown database, bad credentials), a broken or closed connection, or a server
// error of class 08 (connection exception), 53 (insufficient resources),
// 57 (operator intervention: shutdown, terminated backend), 58 (system
// error), XX (internal error, corruption) or 25006 (read-only standby).
func isUnavailable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if c := sqlState(err); c != "" {
		switch c[:2] {
		case "08", "53", "57", "58", "XX":
			return true
		}
		return c == "25006"
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}

// wrap prefixes err with op and, when it means the database cannot be
// reached or used (see isUnavailable) or the DB is closed, adds
// store.ErrUnavailable to its chain. Context errors are only prefixed.
func (db *DB) wrap(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if (db.closed.Load() || isUnavailable(err)) && !errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
