package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Pipelined request writes on Postgres (docs/architecture.md, "Pipelined
// request writes"). Through database/sql a request's write takes a round
// trip per statement: the pool's liveness ping, BEGIN, SELECT … FOR
// UPDATE, the holder's lease FOR SHARE when the request takes its lease
// from its instance, the UPDATE, the events' INSERT, the ledger's INSERT (RecordDispatch), COMMIT. pgUpdateRequest
// sends the same statements as two pgx pipelines on a connection of the
// same pool: the reads that lock, then, after fn decided, the writes and
// the COMMIT.

// pgLockRow is the one statement of the first pipeline, after BEGIN: the
// request's row, locked, then the lease of its holder's instance under a
// share lock when the row takes its lease from it (leaseMarker), which is
// lockedRequest's second read; NULL when it does not. The request's read
// is a materialised WITH, so the row is locked before the lease is read
// (lockedRequest's order: a lease read under its lock first would lock
// the two rows in the renewal's order reversed). In one statement the
// lease is read in the statement's snapshot, taken before any wait for
// the row's lock: a lease row renewed or deleted since is locked as last
// committed (READ COMMITTED follows the row to its newest version, as a
// statement of its own would read it), but a lease row inserted since is
// not seen; pgLock then reads it again by pgLockLease, a statement of its
// own, when the marked row's lease read NULL.
// pgLockRowTask also reads whether the request holds a task, when the
// write's context asks (store.TaskProbe). Both end with the transaction's
// id (txid_current(), for pgSettle), which the row's lock assigns: a
// column of this statement, where a statement of its own cost every write
// one more statement's work in Postgres and in pgx (branch pgcost42).
// The row is read as requestColumns, not requestSelect: the locked lease
// is the holder's lease requestSelect's last column would read unlocked,
// and it is scanned into the row's holderLease in its place (one column
// and one lease lookup fewer per write; pgalloc43).
const (
	pgLockRow = `WITH r AS MATERIALIZED (SELECT ` + requestColumns + ` FROM requests WHERE id = $1 FOR UPDATE)
		SELECT r.*, ` + pgLockedLease + `, txid_current() FROM r`
	pgLockRowTask = `WITH r AS MATERIALIZED (SELECT ` + requestColumns + ` FROM requests WHERE id = $1 FOR UPDATE)
		SELECT r.*, ` + pgLockedLease + `, EXISTS (SELECT 1 FROM approval_tasks t WHERE t.request_id = r.id), txid_current() FROM r`
	pgLockedLease = `(SELECT l.lease_until FROM instance_leases l
		WHERE l.instance = r.held_by AND r.lease_until = 253402300799999 FOR SHARE)`
	// pgLockLease reads the lease of the holder's instance of the row the
	// transaction locked, in a statement of its own (see pgLockRow); the
	// row is found by its id (unindexedMarked).
	pgLockLease = `SELECT lease_until FROM instance_leases
		WHERE instance = (SELECT held_by FROM requests WHERE id = $1 AND ` + unindexedMarked + `) FOR SHARE`
)

// pgGuardedUpdate wraps a request's UPDATE (its compare-and-set on id and
// state) so that it fails unless it updated exactly one row: the COMMIT
// goes in the same pipeline, before its result is read, and an error in
// the transaction turns that COMMIT into a rollback. Division by zero is
// the one error plain SQL can raise on a count (no PL/pgSQL needed);
// pgUpdateRequest reports it as errChangedUnderLock. The guard's column
// is followed by pgGuardPad.
func pgGuardedUpdate(update string) string {
	return `WITH upd AS (` + update + ` RETURNING 1) ` + pgGuard
}

// pgGuard is the select of a guarded write (pgGuardedUpdate,
// pgGuardedWrite): the guard's column, then pgGuardPad.
const pgGuard = `SELECT 1 / (SELECT count(*) FROM upd)` + pgGuardPad

// pgGuardPad pads a guarded write's row to pgGuardWidth columns with
// NULLs (12 bytes each on the wire), so the connection keeps the values
// slice of the locked read before it: pgx (v5.12, pgproto3.DataRow.Decode)
// makes a connection's slice of a row's values anew when a row has more
// columns than the slice holds or over 32 fewer, so a 2-column guard row
// after pgLock's 36 made one of 32 and the next locked read one of 36
// again, ≈ 0.85 KB per write (pgalloc43); pgLock's 37 since migration 27
// (requests.no_grants) take a fifth column. TestGuardRowKeepsTheLockedRowsValues
// holds the widths to that rule.
const pgGuardPad = `, NULL, NULL, NULL, NULL`

// pgGuardWidth is the columns of a guarded write's row before its
// notifications: the guard's and pgGuardPad's. pgLockWidth − pgGuardWidth
// must not exceed 32 (see pgGuardPad).
const pgGuardWidth = 5

// pgLockWidth is the most columns pgLock's locking read answers
// (pgLockRowTask): the request's, its holder's locked lease, the task's
// and the transaction id.
const pgLockWidth = numRequestColumns + 3

// pgGuardedWrite is the first statement of the second pipeline of a write
// that changed the row: its UPDATE guarded as pgGuardedUpdate, and the
// events of the change inserted in a data-modifying WITH of the same
// statement (their notifications are sent after the commit: pgNotifier).
// One statement where there were two: the guard's error
// aborts the statement, the events' INSERT with it, and the transaction.
// The statement comes with its placeholders as Postgres's ($1, $2, …),
// built in one allocation (dollarJoin).
func pgGuardedWrite(pg *postgresDialect, p storePlan) (string, []any) {
	if len(p.events) == 0 {
		return dollarPlaceholders(pgGuardedUpdate(p.update)), p.updateArgs
	}
	ins, insArgs := eventsInsert(p.events)
	q := dollarJoin(`WITH upd AS (`, p.update, ` RETURNING 1), ins AS (`, ins, `) `+pgGuard)
	args := make([]any, 0, len(p.updateArgs)+len(insArgs))
	return q, append(append(args, p.updateArgs...), insArgs...)
}

// skipPing in an Acquire's context tells the pool's ShouldPing not to
// ping the connection first (openPostgres): pgUpdateRequest sends its
// first pipeline, which writes nothing, without the ping's round trip and
// tries once more on a pinged connection when that pipeline finds the
// connection broken.
type skipPing struct{}

// pgUpdateRequest is updateRequest without the session chain on Postgres:
// the same transaction (the same statements, locks, checks and events)
// in two round trips. The first pipeline is BEGIN and the locking read
// (pgLockRow: the row and its holder's lease), with withRev also the
// policy lock taken shared and the newest revision read after it
// (sharedRevision's statements, each its own snapshot), passed to fn in
// store.TxRead; fn runs on the request read; the second
// is the guarded UPDATE (pgGuardedUpdate), the events' INSERT, also, and COMMIT, and commits nothing when any of them
// fails. When fn fails, or nothing changed and there is no also, the
// transaction is rolled back (a third round trip, writing nothing).
// Conflicts are retried as inTx retries them (db.retry), so fn may run
// more than once.
func (db *DB) pgUpdateRequest(ctx context.Context, pg *postgresDialect, id approval.ID, actor string, withRev bool, fn func(*approval.Request, store.TxRead) error, also *statement) (approval.Request, error) {
	var (
		out   approval.Request
		fnErr error
	)
	err := db.retry(ctx, func() error {
		fnErr = nil
		var err error
		out, err = db.pgUpdateOnce(ctx, pg, id, actor, withRev, func(r *approval.Request, read store.TxRead) error {
			fnErr = fn(r, read)
			return fnErr
		}, also)
		return err
	})
	switch {
	case fnErr != nil:
		return approval.Request{}, fnErr
	case err != nil:
		return approval.Request{}, db.wrap("update request "+string(id), err)
	}
	return out, nil
}

// pgUpdateOnce is one try of pgUpdateRequest.
func (db *DB) pgUpdateOnce(ctx context.Context, pg *postgresDialect, id approval.ID, actor string, withRev bool, fn func(*approval.Request, store.TxRead) error, also *statement) (approval.Request, error) {
	probe := store.TaskProbeFor(ctx, id)
	var (
		task *bool
		read store.TxRead
		rev  *int64
	)
	if probe != nil {
		task = new(bool)
	}
	if withRev {
		rev = &read.PolicyRevision
	}
	var xid int64
	conn, old, err := pgLock(ctx, pg, id, true, task, rev, &xid)
	if conn == nil && err != nil && ctx.Err() == nil {
		// The connection broke before anything was written (a restart or
		// failover since it was last used): once more, pinged first.
		conn, old, err = pgLock(ctx, pg, id, false, task, rev, &xid)
	}
	if err != nil {
		if conn != nil {
			pgRollback(ctx, conn)
		}
		return approval.Request{}, err
	}
	cur, err := old.decode()
	if err == nil {
		err = fn(&cur, read)
	}
	if err == nil && cur.ID != id {
		err = fmt.Errorf("update changed the request id to %q", cur.ID)
	}
	var p storePlan
	if err == nil {
		p, err = planStore(old, cur, actor, db.now())
	}
	if err != nil || (!p.changed && also == nil) {
		pgRollback(ctx, conn)
		return p.out, err
	}
	var b pgx.Batch
	if p.changed {
		q, args := pgGuardedWrite(pg, p)
		b.Queue(dollarPlaceholders(q), args...)
	}
	if also != nil {
		b.Queue(dollarPlaceholders(also.q), also.args...)
	}
	b.Queue(`COMMIT`)
	br := conn.SendBatch(ctx, &b)
	err = pgCommitBatch(br, b.Len(), p.changed, old.id)
	broken, err := pgCommitted(err, br.Close())
	switch {
	case err != nil && conn.Conn().IsClosed() && pgLostAnswer(err):
		// The connection ended before the pipeline's answers: the
		// COMMIT, sent with them, may have committed (pgSettle).
		conn.Release()
		if err = db.pgSettle(ctx, db.sql, xid, err); err != nil {
			return approval.Request{}, err
		}
	case err != nil:
		pgRollback(ctx, conn)
		return approval.Request{}, err
	default:
		pgReleaseAfterCommit(ctx, conn, broken)
	}
	if p.changed {
		db.pgNotify(append(releaseNotice(pg, p), pg.notices(p.events)...))
	}
	if probe != nil {
		probe.Read, probe.Task = true, *task
	}
	return p.out, nil
}

// pgLock acquires a connection of pg.pool (without its ping when noPing),
// begins a transaction and reads and locks the row of id, with the
// transaction's id into *xid (txid_current, for pgSettle), in one pipeline
// (pgLockRow). It returns the connection, inside the
// transaction, with the row, or an error (store.ErrNotFound for a missing
// row) and the connection to roll back, or nil when it broke (then the
// pool destroyed it) or could not be acquired. When task is not nil the
// pipeline also reads whether the request holds a task (pgLockRowTask)
// into *task. When rev is not nil it then takes the policy lock shared
// and reads the newest revision into *rev (tx.sharedRevision's
// statements).
func pgLock(ctx context.Context, pg *postgresDialect, id approval.ID, noPing bool, task *bool, rev *int64, xid *int64) (*pgxpool.Conn, requestRow, error) {
	actx := ctx
	if noPing {
		actx = context.WithValue(ctx, skipPing{}, true)
	}
	conn, err := pg.pool.Acquire(actx)
	if err != nil {
		return nil, requestRow{}, err
	}
	var b pgx.Batch
	// At the session's default isolation, not txOnce's READ COMMITTED: its
	// reads lock what they read (under REPEATABLE READ a row changed
	// meanwhile fails with 40001, retried), and under a SERIALIZABLE
	// default a take-over stays visible to an older instance's
	// serializable renewal (docs/performance.md, "attack26").
	b.Queue(`BEGIN`)
	if task != nil {
		b.Queue(pgLockRowTask, string(id))
	} else {
		b.Queue(pgLockRow, string(id))
	}
	if rev != nil {
		b.Queue(`SELECT pg_advisory_xact_lock_shared($1)`, int64(lockPolicy))
		b.Queue(newestRevision)
	}
	br := conn.SendBatch(ctx, &b)
	s := pg.lockScan()
	defer pg.locks.Put(s)
	_, err = br.Exec()
	if err == nil {
		dest := s.dest[:]
		if task == nil {
			dest = s.plain[:]
		}
		err = br.QueryRow().Scan(dest...)
	}
	w := s.w
	if task != nil {
		*task = s.task
	}
	*xid = s.xid
	if err == nil && rev != nil {
		if _, err = br.Exec(); err == nil {
			err = br.QueryRow().Scan(rev)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	// As lockedRequest: holderLease is the lease read under the share
	// lock (pgLockedLease), NULL when the row is not marked or when the
	// instance has no lease row.
	marked := err == nil && w.leaseUntil.Valid && w.leaseUntil.Int64 == leaseMarker
	if marked && !w.holderLease.Valid {
		// No lease row in the statement's snapshot: read it again in a
		// snapshot taken now, with the row locked (see pgLockRow).
		var rows pgx.Rows
		if rows, err = conn.Query(ctx, pgLockLease, string(id)); err == nil {
			var got []int64
			if got, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err == nil && len(got) == 1 {
				w.holderLease = sql.NullInt64{Int64: got[0], Valid: true}
			}
		}
	}
	switch {
	case conn.Conn().IsClosed():
		conn.Release()
		return nil, requestRow{}, err
	case errors.Is(err, pgx.ErrNoRows):
		return conn, requestRow{}, store.ErrNotFound
	case err != nil:
		return conn, requestRow{}, err
	}
	return conn, w, nil
}

// A lockedScan is the scan targets of pgLock's locking read: the row
// (its holderLease is pgLockedLease's column), whether it holds a task,
// the transaction's id, and the destinations pointing at them, made once
// per lockedScan: dest for pgLockRowTask, plain for pgLockRow. Kept in
// postgresDialect.locks between writes, so a locked read allocates no
// destinations and its row stays off the heap (≈ 1.1 KB per write;
// pgalloc43).
type lockedScan struct {
	w     requestRow
	task  bool
	xid   int64
	dest  [numRequestColumns + 3]any
	plain [numRequestColumns + 2]any
}

// lockScan returns a lockedScan of pg.locks, or a new one; the caller
// puts it back when done with it.
func (pg *postgresDialect) lockScan() *lockedScan {
	if s, ok := pg.locks.Get().(*lockedScan); ok {
		return s
	}
	s := new(lockedScan)
	copy(s.dest[:], s.w.destWith(&s.task, &s.xid))
	copy(s.plain[:], s.w.destWith(&s.xid))
	return s
}

// pgCommitBatch reads the n results of the second pipeline of
// pgUpdateOnce, the last of them the COMMIT's; guarded says the first is
// pgGuardedUpdate's. An error anywhere means nothing was committed.
func pgCommitBatch(br pgx.BatchResults, n int, guarded bool, id string) error {
	for i := range n - 1 {
		if i == 0 && guarded {
			if err := pgGuardResult(br); err != nil {
				if sqlState(err) == "22012" { // division_by_zero: the guard
					return errChangedUnderLock(id, 0)
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

// pgGuardResult reads the one row of pgGuardedWrite: the guard's column,
// then pgGuardPad's, skipped.
func pgGuardResult(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	dest := make([]any, len(rows.FieldDescriptions()))
	var one int64
	dest[0] = &one
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// pgCommitResult reads a pipeline's last result, its COMMIT's: an error,
// or a COMMIT that rolled back (an earlier statement of the transaction
// failed), means nothing was committed.
func pgCommitResult(br pgx.BatchResults) error {
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tag.String() == "ROLLBACK" {
		return fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	return nil
}

// pgCommitted settles a pipeline that ends in COMMIT: resultsErr is the
// error of reading its results up to and including COMMIT's, closeErr that
// of closing the batch (reading on to the ReadyForQuery after it). Once
// COMMIT has answered, the transaction is durable: an error after that
// answer (the server ending the connection between COMMIT's CommandComplete
// and its ReadyForQuery, as a fast shutdown of Postgres does) says only that
// the connection is gone. The pipeline then succeeded (err nil), and broken
// says not to pool the connection. Reporting it failed instead would deny a
// call whose request stands pending, or refuse a decision that was
// recorded (TestCommitAnsweredThenConnectionLost).
func pgCommitted(resultsErr, closeErr error) (broken bool, err error) {
	if resultsErr != nil {
		return false, resultsErr
	}
	return closeErr != nil, nil
}

// pgReleaseAfterCommit returns conn to its pool after a committed
// pipeline, or, when broken (pgCommitted), closes it first so that the pool
// destroys it instead of handing out a connection in an unknown state.
func pgReleaseAfterCommit(ctx context.Context, conn *pgxpool.Conn, broken bool) {
	if broken && !conn.Conn().IsClosed() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = conn.Conn().Close(cctx)
		cancel()
	}
	conn.Release()
}

// pgRollback ends conn's transaction and returns conn to its pool; when
// the ROLLBACK fails the pool destroys the connection (pgxpool does not
// reuse one left inside a transaction).
func pgRollback(ctx context.Context, conn *pgxpool.Conn) {
	if ctx.Err() == nil && !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(ctx, `ROLLBACK`)
	}
	conn.Release()
}
