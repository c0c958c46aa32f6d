package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"toolgate/internal/store"
)

// Channel is the LISTEN/NOTIFY channel on which every change of a request
// that writes events is announced, with the payload "<id> <state>".
const Channel = "toolgate_requests"

// PolicyChannel is the LISTEN/NOTIFY channel on which each new deployment
// policy revision is announced, with the revision number as payload.
const PolicyChannel = "toolgate_policy"

// PoolApplicationName is the application_name of the pool's connections,
// as pg_stat_activity shows it, unless the DSN sets one.
const PoolApplicationName = "toolgate"

// LeaseApplicationName is the application_name of the connection reserved
// for lease renewals (see LeaseConns), as pg_stat_activity shows it.
const LeaseApplicationName = "toolgate-lease"

// LeaseConns is the size of the pool reserved for RenewLeases on Postgres,
// opened next to the main pool (Config.MaxConns) from the same DSN. A gate
// renews its leases in one batch at a time, so one connection is enough;
// being outside the main pool, a renewal never waits behind the writes and
// reads queued there, which under load (thousands of held calls being
// created) can take longer than a lease period and let the leases lapse.
const LeaseConns = 1

// DefaultIdleInTx is Config.IdleInTx's default. toolgate's transactions
// send their statements back to back (milliseconds apart); a session idle
// inside one for this long belongs to a process that stopped (a paused VM,
// SIGSTOP, a stalled host) while holding row locks, such as its lease
// renewal's lock on its instance lease, which every decision and take-over
// of the requests it holds waits for. Without a bound they waited until
// that process resumed or its TCP connection was declared dead (hours with
// the kernel's default keep-alive), although its leases had lapsed long
// before (branch multi37).
const DefaultIdleInTx = 10 * time.Second

// AdminApplicationName is the application_name of the connections reserved
// for the admin API's reads (see AdminConns), as pg_stat_activity shows it.
const AdminApplicationName = "toolgate-admin"

// AdminConns is the size of the pool reserved for the reads of people and
// their tools (DB.ListRequests, DB.ViewRequest: the admin API's list and
// get of approvals, the inbox), opened next to the main pool from the same
// DSN on Postgres and next to the read pool on SQLite. Outside the pools
// the calls use, a reviewer's list of pending approvals never waits behind
// the work queued there: at 10,000 held calls being created it timed out
// waiting for a connection (docs/performance.md, "Held calls at scale").
// Two connections let a list and a get run side by side; more readers
// queue on them.
const AdminConns = 2

// DefaultPoll is the safety poll interval of Watch on Postgres when
// Config.Poll is 0.
const DefaultPoll = 5 * time.Second

// postgresDialect is PostgreSQL through pgx: $n placeholders, READ
// COMMITTED transactions that lock rows with FOR UPDATE and take
// transaction-scoped advisory locks, NOTIFY on commit, and Watch on a
// dedicated LISTEN connection.
type postgresDialect struct {
	pool   *pgxpool.Pool   // behind the *sql.DB; closed by close
	lease  *pgxpool.Pool   // LeaseConns connections reserved for RenewLeases; closed by close
	admin  *pgxpool.Pool   // AdminConns connections reserved for the admin API's reads; closed by close
	notes  *pgNotifier     // sends the notices of committed writes; closed by close
	listen *pgx.ConnConfig // template of Watch's dedicated connection
	poll   time.Duration   // Watch's safety poll
	// readCommitted is txOptions' answer, kept here so that beginning a
	// transaction allocates nothing for it.
	readCommitted sql.TxOptions
	// locks keeps pgLock's scan targets (*lockedScan) between writes.
	locks sync.Pool
	// caughtUpPast, when set (tests, before Watch), is called when a
	// connection's catchUpPast read the feed: no catch-up runs after it
	// until the next reconnection or safety poll.
	caughtUpPast func()
}

// openPostgres parses cfg.DSN, builds a pgxpool (nothing is connected yet)
// and returns a *sql.DB on it through pgx's stdlib package, a second
// *sql.DB on a pool of LeaseConns connections (application_name
// LeaseApplicationName) reserved for lease renewals, and a third on a pool
// of AdminConns connections (AdminApplicationName) reserved for the admin
// API's reads. The pool keeps
// pgxpool's behaviour: every connection is pinged before it is handed out,
// so right after a restart or failover a dead connection used a moment ago
// does not fail the next gated call or decision (pgxpool pings only
// connections idle for over a second by default); a pipelined request
// write (pgUpdateRequest) skips the ping and finds a dead connection with
// its first pipeline instead, trying again on a pinged one. Its connections get
// application_name PoolApplicationName unless the DSN sets one; Watch's get
// WatchApplicationName.
func openPostgres(ctx context.Context, cfg Config) (main, lease, admin *sql.DB, _ dialect, _ error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, nil, nil, nil, dsnError(err) // without the DSN
	}
	switch {
	case cfg.MaxConns > math.MaxInt32:
		return nil, nil, nil, nil, fmt.Errorf("MaxConns %d is too large", cfg.MaxConns)
	case cfg.MaxConns > 0:
		pcfg.MaxConns = int32(cfg.MaxConns)
	}
	// Every connection is pinged before it is handed out, except to a
	// pipelined request write (pgUpdateRequest, skipPing), which finds a
	// broken connection with its first pipeline, writing nothing, and then
	// tries again on a pinged one.
	pcfg.ShouldPing = func(ctx context.Context, _ pgxpool.ShouldPingParams) bool { return ctx.Value(skipPing{}) == nil }
	if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = PoolApplicationName
	}
	idle := cfg.IdleInTx
	if idle <= 0 {
		idle = DefaultIdleInTx
	}
	// Set once each connection is made, not as a startup parameter: a
	// pooler such as PgBouncer refuses a startup parameter it does not
	// track ("unsupported startup parameter"), and deploy.md supports one
	// in session mode (attack37). The server says whether the DSN (source
	// "client": options=-c …, a runtime parameter, however the name is
	// spelled), the role or the database set it; those keep their value
	// (attack38: the DSN was searched for one spelling only).
	// The same statement reads the server process's own id, which settling
	// a lost commit asks about (serverPID).
	set := fmt.Sprintf(setIdleInTx, idle.Milliseconds())
	pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		var pid int64
		var setTo *string
		if err := c.QueryRow(ctx, set, pgx.QueryExecModeSimpleProtocol).Scan(&pid, &setTo); err != nil {
			return fmt.Errorf("set idle_in_transaction_session_timeout: %w", err)
		}
		if pid > 0 && pid <= math.MaxUint32 {
			c.PgConn().CustomData()[serverPIDKey] = uint32(pid)
		}
		return nil
	}
	d := &postgresDialect{listen: pcfg.ConnConfig.Copy(), poll: cfg.Poll, readCommitted: sql.TxOptions{Isolation: sql.LevelReadCommitted}}
	d.listen.RuntimeParams["application_name"] = WatchApplicationName
	if d.poll == 0 {
		d.poll = DefaultPoll
	}
	lcfg := pcfg.Copy()
	lcfg.MaxConns, lcfg.MinConns, lcfg.MinIdleConns = LeaseConns, 0, 0
	lcfg.ConnConfig.RuntimeParams["application_name"] = LeaseApplicationName
	acfg := pcfg.Copy()
	acfg.MaxConns, acfg.MinConns, acfg.MinIdleConns = AdminConns, 0, 0
	acfg.ConnConfig.RuntimeParams["application_name"] = AdminApplicationName
	if d.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, nil, nil, nil, err
	}
	if d.lease, err = pgxpool.NewWithConfig(ctx, lcfg); err != nil {
		d.pool.Close()
		return nil, nil, nil, nil, err
	}
	if d.admin, err = pgxpool.NewWithConfig(ctx, acfg); err != nil {
		d.pool.Close()
		d.lease.Close()
		return nil, nil, nil, nil, err
	}
	ncfg := pcfg.Copy()
	ncfg.MaxConns, ncfg.MinConns, ncfg.MinIdleConns = NotifyConns, 0, 0
	ncfg.ConnConfig.RuntimeParams["application_name"] = NotifyApplicationName
	npool, err := pgxpool.NewWithConfig(ctx, ncfg)
	if err != nil {
		d.pool.Close()
		d.lease.Close()
		d.admin.Close()
		return nil, nil, nil, nil, err
	}
	d.notes = newPGNotifier(npool)
	// The *sql.DBs keep no idle connections of their own: the pools do.
	// Reads and writes share the main pool (row locks order the writers).
	return stdlib.OpenDBFromPool(d.pool), stdlib.OpenDBFromPool(d.lease), stdlib.OpenDBFromPool(d.admin), d, nil
}

func (*postgresDialect) name() string           { return DriverPostgres }
func (*postgresDialect) rebind(q string) string { return dollarPlaceholders(q) }
func (*postgresDialect) forUpdate() string      { return " FOR UPDATE" }

func (d *postgresDialect) txOptions() *sql.TxOptions { return &d.readCommitted }
func (d *postgresDialect) close() {
	d.notes.close()
	d.pool.Close()
	d.lease.Close()
	d.admin.Close()
}

func (*postgresDialect) lock(ctx context.Context, t *tx, l lockName) error {
	_, err := t.exec(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(l))
	return err
}

func (*postgresDialect) lockShared(ctx context.Context, t *tx, l lockName) error {
	_, err := t.exec(ctx, `SELECT pg_advisory_xact_lock_shared(?)`, int64(l))
	return err
}

func (*postgresDialect) lockKey(ctx context.Context, t *tx, space lockSpace, key string) error {
	k1, k2 := lockKeyArgs(space, key)
	_, err := t.exec(ctx, `SELECT pg_advisory_xact_lock(?::int4, ?::int4)`, k1, k2)
	return err
}

// feedSafe is the condition under which an event is final: its transaction
// is older than every transaction still running, so it has committed (it
// is visible) and no transaction that could still commit has an id below
// it. Events are ordered by (xid, seq), so nothing can later appear before
// an event returned.
const feedSafe = `xid < pg_snapshot_xmin(pg_current_snapshot())`

func (*postgresDialect) feedQuery(cols string, after store.Cursor, limit int) (string, []any) {
	// The text form gets its own name: ORDER BY xid would otherwise sort
	// by the output column, as text ("1000" < "999").
	return `SELECT ` + cols + `, xid::text AS xid_text FROM events
		WHERE (xid, seq) > (?::xid8, ?) AND ` + feedSafe + `
		ORDER BY events.xid, events.seq LIMIT ?`, []any{strconv.FormatUint(after.Tx, 10), after.Seq, limit}
}

func (*postgresDialect) feedEndQuery() string {
	return `SELECT xid::text AS xid_text, seq FROM events WHERE ` + feedSafe + ` ORDER BY events.xid DESC, events.seq DESC LIMIT 1`
}

// notices are, for each request with events in evs, a notice of
// "<id> <state> <type>" on Channel (the state and type of its last event:
// the state as committed; Watch reads the type to tell a request's
// creation, which wakes nobody, from a change), and for each policy
// revision one of its number on PolicyChannel. Session events send
// nothing: no request changed, so there is no holder to wake.
func (*postgresDialect) notices(evs []event) []notice {
	var out []notice
	for i, ev := range evs {
		switch {
		case ev.RequestID != "":
			if i+1 < len(evs) && evs[i+1].RequestID == ev.RequestID {
				continue // the last event of a run carries the state as committed
			}
			out = append(out, notice{Channel, string(ev.RequestID) + " " + string(ev.State) + " " + string(ev.Type)})
		case ev.PolicyRevision != 0:
			out = append(out, notice{PolicyChannel, strconv.FormatInt(ev.PolicyRevision, 10)})
		}
	}
	return out
}

func (*postgresDialect) schemaMigrationsDDL() string {
	return `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    bigint PRIMARY KEY,
		name       text NOT NULL,
		applied_at bigint NOT NULL
	)`
}

// sqlState returns the SQLSTATE of a server error in err, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// retryable: a serialization failure (40001) or a deadlock (40P01).
func (*postgresDialect) retryable(err error) bool {
	c := sqlState(err)
	return c == "40001" || c == "40P01"
}

// unavailable: any failure to connect (refused, timed out, rejected by the
// server: unknown database, bad credentials), a broken or closed
// connection, or a server error of class 08 (connection exception), 53
// (insufficient resources), 57 (operator intervention: shutdown, terminated
// backend), 58 (system error), XX (internal error, corruption) or 25006
// (read-only standby).
func (*postgresDialect) unavailable(err error) bool {
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

// setIdleInTx sets idle_in_transaction_session_timeout for the session to
// %d milliseconds unless the DSN, the role or the database set it, and
// answers one row: the session's server process id (pg_backend_pid()) and
// the value set, or NULL. It is sent with the simple protocol (no prepared
// statement on each new connection, nothing a pooler must track).
const setIdleInTx = `SELECT pg_backend_pid(), (SELECT set_config('idle_in_transaction_session_timeout', '%d', false)
FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'
AND source NOT IN ('client', 'user', 'database', 'database user'))`

// serverPIDKey is the pgconn.PgConn.CustomData key under which each
// connection keeps its server process id, read once connected.
const serverPIDKey = "toolgate.server_pid"

// serverPID is the id of the server process of c's session, as the server
// itself answered it when c connected, or 0 when that is unknown (a
// connection made without AfterConnect). It is not PgConn.PID: that is the
// key of the startup's BackendKeyData, which a pooler such as PgBouncer
// makes up (its own cancel key), so pg_stat_activity never lists it and
// pgSettleWritten read the writer as gone while it still ran. In session
// pooling (deploy.md: the mode supported) the session keeps one server
// process, so the id read at connect is the one that runs its writes.
func serverPID(c *pgconn.PgConn) uint32 {
	pid, _ := c.CustomData()[serverPIDKey].(uint32)
	return pid
}
