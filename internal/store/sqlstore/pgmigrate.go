package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// noTxMarker, as the first line of a Postgres migration, has the runner
// apply it outside a transaction: the format of an index build that must
// not hold writes back on a large table (CREATE INDEX CONCURRENTLY, which
// PostgreSQL refuses inside a transaction block; a plain CREATE INDEX
// holds a SHARE lock on the table, so every INSERT and UPDATE waits, for
// as long as the build takes). Such a migration holds only statements of
// two forms, each ended by a semicolon:
//
//	CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name ON …;
//	DROP INDEX CONCURRENTLY IF EXISTS name;
//
// with whole-line "--" comments between them and no semicolon inside a
// statement (the runner splits the file at semicolons and sends each
// statement alone). Each statement can run again after a crash, and a
// CREATE finding an index of its name that is not valid (pg_index.
// indisvalid: the leftover of a failed or interrupted concurrent build,
// which IF NOT EXISTS would keep) drops it first. Any later index build on
// a table that can be large goes into such a migration, after the
// transactional one that adds its columns; SQLite has no such migrations
// (its one writer waits for any build anyway), so its file of the same
// number builds the index in its transaction or does nothing.
const noTxMarker = "-- toolgate:no-transaction"

// An indexStep is one statement of a noTxMarker migration.
type indexStep struct {
	stmt   string // as written, without the semicolon
	index  string // the name of the index it creates or drops
	create bool   // CREATE (else DROP)
}

var (
	createConcurrently = regexp.MustCompile(`(?is)^CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+([a-z_][a-z0-9_]*)\s+ON\s`)
	dropConcurrently   = regexp.MustCompile(`(?is)^DROP\s+INDEX\s+CONCURRENTLY\s+IF\s+EXISTS\s+([a-z_][a-z0-9_]*)$`)
)

// parseNoTx splits the text of a noTxMarker migration into its statements;
// an error names the first statement of another form (see noTxMarker).
func parseNoTx(text string) ([]indexStep, error) {
	var body strings.Builder
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			body.WriteString(line)
		}
	}
	var steps []indexStep
	for stmt := range strings.SplitSeq(body.String(), ";") {
		stmt = strings.TrimSpace(stmt)
		switch m, d := createConcurrently.FindStringSubmatch(stmt), dropConcurrently.FindStringSubmatch(stmt); {
		case stmt == "":
		case m != nil:
			steps = append(steps, indexStep{stmt: stmt, index: m[1], create: true})
		case d != nil:
			steps = append(steps, indexStep{stmt: stmt, index: d[1]})
		default:
			return nil, fmt.Errorf("%s: %.60q is neither CREATE INDEX CONCURRENTLY IF NOT EXISTS nor DROP INDEX CONCURRENTLY IF EXISTS", noTxMarker, stmt)
		}
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("%s: no statement", noTxMarker)
	}
	return steps, nil
}

// migrateLockPoll is the longest wait between two tries of the migrations
// lock (pgLockMigrations); the first wait is 10 ms, doubling.
const migrateLockPoll = time.Second

// pgMigrate is migrate on Postgres. It runs on one connection of the pool
// that holds the migrations advisory lock (lockMigrate) at session level
// from the version check to the last recorded migration, so instances
// starting together apply each migration once, as do older binaries, whose
// transaction-level lock of the same key waits for it. The pending
// migrations run in order. On an existing database each transactional one
// runs in a READ COMMITTED transaction of its own that records it, so the
// locks one takes (an ALTER TABLE's ACCESS EXCLUSIVE, which every write to
// that table waits for) are not held while the next waits for its table's
// lock; its statements wait for a lock at most a short lock_timeout and
// are tried again (pgApplyWaiting), so an ALTER TABLE queued behind a long
// transaction does not hold up the writes queued behind it. Each
// noTxMarker one runs statement by statement outside a transaction
// (pgApplyNoTx), then is recorded. On a new database (no version
// recorded: empty tables) all of them share one transaction, the
// noTxMarker ones' index builds without CONCURRENTLY (inTxForm: a build on
// an empty table holds nothing back and waits for no other transaction's
// snapshot), so a failed first start leaves the database empty and the
// next one is Created. A crash on an existing database
// in between leaves the versions recorded so far, and the next start goes
// on from there. The lock is held outside any transaction, so
// idle_in_transaction_session_timeout never ends the migrating session
// between two steps. At the end, whatever happened, the lock is released
// and the connection given back to the pool, or closed if that fails: the
// lock never stays with the pool's connection, or through a session-mode
// pooler with the pooler's next client.
func (db *DB) pgMigrate(ctx context.Context, ms []migration) error {
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pgRelease(ctx, conn)
	if err := db.pgLockMigrations(ctx, conn); err != nil {
		return err
	}
	current, err := db.schemaVersion(ctx, conn, ms)
	if err != nil {
		return err
	}
	pending := pendingAfter(ms, current)
	if db.created {
		// A new database: every migration in one transaction, so that a
		// failed first start leaves it empty (and the next one Created).
		return db.pgApplyWaiting(ctx, conn, pending)
	}
	for len(pending) > 0 {
		if pending[0].steps != nil {
			if err := db.pgApplyNoTx(ctx, conn, pending[0]); err != nil {
				return err
			}
			pending = pending[1:]
			continue
		}
		if err := db.pgApplyWaiting(ctx, conn, pending[:1]); err != nil {
			return err
		}
		pending = pending[1:]
	}
	return nil
}

// pendingAfter returns the migrations of ms (in version order) newer than
// version current.
func pendingAfter(ms []migration, current int) []migration {
	for i, m := range ms {
		if m.version > current {
			return ms[i:]
		}
	}
	return nil
}

// pgLockMigrations takes the migrations advisory lock at session level on
// conn. It tries (pg_try_advisory_lock) and waits between tries instead of
// waiting inside pg_advisory_lock: a statement waiting for a lock holds a
// snapshot, and CREATE INDEX CONCURRENTLY waits for every transaction with
// an older snapshot in the database, so the instance building an index
// would wait for the instances waiting for its lock (PostgreSQL finds the
// deadlock and fails one of them). Between tries conn holds no snapshot.
func (db *DB) pgLockMigrations(ctx context.Context, conn *sql.Conn) error {
	wait := 10 * time.Millisecond
	for logged := false; ; logged = true {
		var ok bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, int64(lockMigrate)).Scan(&ok); err != nil {
			return fmt.Errorf("lock %s: %w", lockMigrate, err)
		}
		if ok {
			return nil
		}
		if !logged {
			db.log.InfoContext(ctx, "waiting for another instance's schema migration", "driver", DriverPostgres)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("lock %s: %w", lockMigrate, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, migrateLockPoll)
	}
}

// pgRelease releases the session's advisory locks (the migrations lock, if
// taken) on conn and gives the connection back to the pool. One whose
// release failed, or that is inside a transaction, is closed first, so that
// the pool makes a new one: no lock or transaction stays with it.
func pgRelease(ctx context.Context, conn *sql.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, err := conn.ExecContext(cctx, `SELECT pg_advisory_unlock_all()`)
	_ = pgRaw(conn, func(pc *pgconn.PgConn) error {
		if err != nil || pc.TxStatus() != 'I' {
			return pc.Close(cctx)
		}
		return nil
	})
	_ = conn.Close()
}

// pgApplyInTx applies ms and records them in one transaction on conn (a
// noTxMarker migration's steps in their inTxForm, for a new database only), whose statements wait at most lockTimeout for a
// lock (SQLSTATE 55P03 after that; see pgApplyWaiting).
func (db *DB) pgApplyInTx(ctx context.Context, conn *sql.Conn, ms []migration, lockTimeout time.Duration) error {
	stx, err := conn.BeginTx(ctx, db.d.txOptions())
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = stx.Rollback() }()
	if _, err := stx.ExecContext(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, max(lockTimeout.Milliseconds(), 1))); err != nil {
		return fmt.Errorf("set lock_timeout: %w", err)
	}
	for _, m := range ms {
		// No arguments: the file's statements run as written (pgx then
		// uses the simple protocol, which runs several statements in one
		// call).
		stmts := []string{m.sql}
		if m.steps != nil {
			stmts = stmts[:0]
			for _, st := range m.steps {
				stmts = append(stmts, inTxForm(st.stmt))
			}
		}
		for _, q := range stmts {
			if _, err := stx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
		}
		if err := db.pgRecord(ctx, stx, m); err != nil {
			return err
		}
	}
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}

// concurrently is the keyword of an indexStep that inTxForm removes.
var concurrently = regexp.MustCompile(`(?i)\sCONCURRENTLY\s`)

// inTxForm returns stmt, an indexStep's statement, without its first
// CONCURRENTLY: the form PostgreSQL accepts in a transaction, for a new
// database's empty tables (pgMigrate).
func inTxForm(stmt string) string {
	loc := concurrently.FindStringIndex(stmt)
	if loc == nil {
		return stmt
	}
	return stmt[:loc[0]] + " " + stmt[loc[1]:]
}

// pgApplyNoTx applies m, a noTxMarker migration, one statement at a time
// on conn outside a transaction, then records it. A CREATE first drops an
// index of its name that is not valid, the leftover of a build that failed
// or whose instance stopped (a valid one stays: IF NOT EXISTS skips it).
func (db *DB) pgApplyNoTx(ctx context.Context, conn *sql.Conn, m migration) error {
	for _, s := range m.steps {
		if s.create {
			var valid bool
			err := conn.QueryRowContext(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`, s.index).Scan(&valid)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return fmt.Errorf("apply migration %s: read index %s: %w", m.name, s.index, err)
			case !valid:
				db.log.WarnContext(ctx, "dropping an invalid index left by an interrupted build, to build it again",
					"driver", DriverPostgres, "migration", m.name, "index", s.index)
				if _, err := conn.ExecContext(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+s.index); err != nil {
					return fmt.Errorf("apply migration %s: drop invalid index %s: %w", m.name, s.index, err)
				}
			}
		}
		if _, err := conn.ExecContext(ctx, s.stmt); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.name, err)
		}
	}
	return db.pgRecord(ctx, conn, m)
}

// pgRecord records m in schema_migrations through on.
func (db *DB) pgRecord(ctx context.Context, on txRunner, m migration) error {
	if _, err := on.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.version, m.name, db.now().UnixMilli()); err != nil {
		return fmt.Errorf("record migration %s: %w", m.name, err)
	}
	db.log.DebugContext(ctx, "applied migration", "driver", DriverPostgres, "migration", m.name)
	return nil
}
