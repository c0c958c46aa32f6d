package sqlstore

import (
	"context"
	"errors"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Pipelined request creation on Postgres. Through database/sql a creation
// takes a round trip per statement: BEGIN, the session lookup, one
// advisory lock per cap, one count per cap, the INSERT, the event's
// INSERT with its notification, COMMIT. The total cap's lock is one lock
// for every creator, held from its statement to the COMMIT, so creators
// queue on it for five of those round trips each: at 5,000 held calls
// arriving at once the admission took 8 s, and the calls waiting for the
// lock (and for a pool connection behind it) kept their stacks meanwhile
// (docs/performance.md, "held29"). pgCreate sends the same transaction as
// one pgx pipeline, so the lock is held for the server's own work only.

// pgCreateGuard fails (division by zero) unless r's principal has no
// session, fewer than $2 of its tool-call requests are pending and fewer
// than $3 in total: checkCreate's checks for a principal that is no
// session's, with its caps CapPrincipal ($2) and CapTotal ($3), read after
// their locks are held (a statement of its own: READ COMMITTED takes a
// new snapshot, which sees every creation that held the locks before).
const pgCreateGuard = `SELECT 1 / (CASE WHEN NOT EXISTS (SELECT 1 FROM sessions WHERE principal = $1::text)
	AND (SELECT COUNT(*) FROM (SELECT 1 FROM requests WHERE ` + pendingToolCalls + ` AND requested_by = $1::text LIMIT $2::bigint) AS capped) < $2::bigint
	AND (` + pendingTotal + `) < $3::bigint THEN 1 ELSE 0 END)`

// pgCreateInsert inserts the request and fails (division by zero) unless
// it did (its id was taken); $n placeholders.
var pgCreateInsert = dollarPlaceholders(`WITH ins AS (INSERT INTO requests (` + requestColumns + `) VALUES (` + placeholders(numRequestColumns) + `)
	ON CONFLICT (id) DO NOTHING RETURNING 1) SELECT 1 / (SELECT count(*) FROM ins)`)

// errPGCreateRefused is pgCreateOnce's outcome when its guard or its
// insert refused r, having written nothing: the general transaction runs
// instead and says why.
var errPGCreateRefused = errors.New("pipelined creation refused")

// pgCreatable returns the principal and total caps of caps when the
// pipelined creation applies to r: a tool call's kind of request (not a
// session_policy request, whose base revision is checked) under exactly a
// CapPrincipal for r's principal and a CapTotal, what the gate asks of a
// principal that is no session's.
func pgCreatable(r approval.Request, caps []store.Cap) (own, total store.Cap, ok bool) {
	if r.Kind == approval.KindSessionPolicy || len(caps) != 2 {
		return store.Cap{}, store.Cap{}, false
	}
	for _, c := range caps {
		switch {
		case c.Limit <= 0:
			return store.Cap{}, store.Cap{}, false // the general path's error
		case c.Scope == store.CapPrincipal && c.Key == r.RequestedBy && own.Scope == 0:
			own = c
		case c.Scope == store.CapTotal && total.Scope == 0:
			total = c
		default:
			return store.Cap{}, store.Cap{}, false
		}
	}
	return own, total, true
}

// pgCreate is CreateRequest's transaction in one pipeline (see above),
// when pgCreatable says it applies: BEGIN READ COMMITTED; the caps'
// advisory locks in capLocks' order; pgCreateGuard; pgCreateInsert; the
// "requested" event; COMMIT; then the event's notification (pgNotifier). An
// error anywhere commits nothing (the COMMIT after an error is a
// rollback). It returns errPGCreateRefused when the guard or the insert
// refused r; other errors as they are. Conflicts are retried as inTx
// retries them.
func (db *DB) pgCreate(ctx context.Context, pg *postgresDialect, r approval.Request, w requestRow, own, total store.Cap) error {
	return db.retry(ctx, func() error { return db.pgCreateOnce(ctx, pg, r, w, own, total) })
}

func (db *DB) pgCreateOnce(ctx context.Context, pg *postgresDialect, r approval.Request, w requestRow, own, total store.Cap) error {
	locks, err := capLocks([]store.Cap{own, total})
	if err != nil {
		return err
	}
	conn, err := pg.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	var b pgx.Batch
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	for _, l := range locks {
		space, key := lockKeyArgs(l.space, l.key)
		b.Queue(`SELECT pg_advisory_xact_lock($1::int4, $2::int4)`, space, key)
	}
	b.Queue(pgCreateGuard, r.RequestedBy, int64(own.Limit), int64(total.Limit))
	b.Queue(pgCreateInsert, w.args()...)
	evs := eventRows(store.RequestedEvent(r))
	q, args := eventsInsert(evs)
	b.Queue(dollarPlaceholders(q), args...)
	b.Queue(`COMMIT`)
	br := conn.SendBatch(ctx, &b)
	err = pgCreateResults(br, b.Len(), len(locks))
	broken, err := pgCommitted(err, br.Close())
	switch {
	case err != nil && conn.Conn().IsClosed() && pgLostAnswer(err):
		// The connection ended before the pipeline's answers: its COMMIT
		// may have committed, and the request stands if so.
		pid := serverPID(conn.Conn().PgConn())
		conn.Release()
		if err := db.pgSettleWritten(ctx, pid, err, func(ctx context.Context) (bool, error) {
			return db.pgCreated(ctx, w)
		}); err != nil {
			return err
		}
	case err != nil:
		pgRollback(ctx, conn)
		return err
	default:
		pgReleaseAfterCommit(ctx, conn, broken)
	}
	db.pgNotify(pg.notices(evs))
	return nil
}

// pgCreated says whether request w stands as pgCreateOnce wrote it: its id
// (random, so another creation's only when it is this creation again), with
// its creator, argument hash and creation time. Its state is not compared:
// it may have been decided since.
func (db *DB) pgCreated(ctx context.Context, w requestRow) (bool, error) {
	var found bool
	err := db.sql.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM requests
		WHERE id = $1 AND requested_by = $2 AND arguments_hash = $3 AND created_at = $4)`,
		w.id, w.requestedBy, w.argumentsHash, w.createdAt).Scan(&found)
	return found, err
}

// pgCreateResults reads the n results of pgCreateOnce's pipeline: BEGIN,
// nlocks locks, the guard, the insert, the event, COMMIT.
func pgCreateResults(br pgx.BatchResults, n, nlocks int) error {
	for i := range n - 1 {
		if i == 1+nlocks || i == 2+nlocks { // the guard, the insert
			var one int64
			if err := br.QueryRow().Scan(&one); err != nil {
				if sqlState(err) == "22012" { // division_by_zero: refused
					return errPGCreateRefused
				}
				return err
			}
			continue
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return pgCommitResult(br)
}

// lockKeyArgs are the two keys of Postgres' advisory lock for key in
// space (postgresDialect.lockKey): the space and key's FNV-1a hash.
func lockKeyArgs(space lockSpace, key string) (int32, int32) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))           // never fails
	return int32(space), int32(h.Sum32()) //nolint:gosec // G115: the hash's bits, reinterpreted
}
