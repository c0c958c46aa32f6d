package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// A dispatch outcome's write (docs/architecture.md, "Pipelined request
// writes"). Through updateRequest it is a locked read, then the
// compare-and-set UPDATE with its event and ledger row: two round trips on
// Postgres. The outcome's check (consumed, no outcome yet) needs nothing
// the row's read gives that SQL cannot test itself, so on Postgres
// RecordOutcome is one statement: the UPDATE guarded in its WHERE clause,
// its "dispatched" event and the ledger row in
// data-modifying WITHs that write only when the UPDATE did. One round trip,
// no explicit transaction (a statement commits on its own, all or nothing).

// pgOutcomeUpdate is RecordOutcome's UPDATE on Postgres: the check of
// approval.Request.RecordOutcome in its WHERE clause ($1 id, $2 outcome).
// Under READ COMMITTED an UPDATE that waited for the row's lock evaluates
// its WHERE clause again on the row as committed, so an outcome recorded
// meanwhile (the sweeper's "unknown") makes it update nothing. It returns
// the id only: RecordOutcome returns no request, and the whole row (34
// columns: pgx's field descriptions, the row's values, a Scan destination
// each) was ≈ 5 KB allocated per outcome.
//
// The outcome settles the request (it no longer needs a holder): a row
// that took its lease from its holder's instance (leaseMarker) gets that
// lease as a concrete one, read without a lock (a settled request's lease
// decides nothing; planStore does the same on the general path), so the
// holder's next renewal has no row of it to write (renew.go, step 2).
const pgOutcomeUpdate = `UPDATE requests SET dispatch_outcome = $2,
		lease_until = CASE WHEN lease_until = 253402300799999
			THEN COALESCE((SELECT l.lease_until FROM instance_leases l WHERE l.instance = requests.held_by), 0)
			ELSE lease_until END
		WHERE id = $1 AND state = 'consumed' AND dispatch_outcome = ''
		RETURNING id`

// pgOutcomeEvent writes the outcome's event ($3 type, $4 state, $5 actor,
// $6 at) for the row upd updated, if any: store.ChangeEvents of a change
// that sets only the outcome of a consumed request.
const pgOutcomeEvent = `ev AS (INSERT INTO events (request_id, type, state, actor, at)
		SELECT id, $3, $4, $5, $6 FROM upd)`

// pgOutcomeSelect returns a row when one was updated (the notification is
// sent after the statement committed: pgRecordOutcome, pgNotifier). The
// row is padded with NULLs to pgGuardWidth columns, as a guarded write's
// is (pgGuardPad): it follows a consume's locked read on a connection.
const pgOutcomeSelect = ` SELECT upd.id, NULL, NULL, NULL, NULL FROM upd`

// pgOutcome and pgOutcomeLedger are the statements of RecordOutcome on
// Postgres, without and with the ledger's row ($7–$12, putResultSQL's
// values after the request id; a result already recorded is kept).
const (
	pgOutcome       = `WITH upd AS (` + pgOutcomeUpdate + `), ` + pgOutcomeEvent + pgOutcomeSelect
	pgOutcomeLedger = `WITH upd AS (` + pgOutcomeUpdate + `), ` + pgOutcomeEvent + `,
		led AS (INSERT INTO approval_results (request_id, result, error, truncated, size, recorded_at, expires_at)
		SELECT id, $7, $8, $9, $10, $11, $12 FROM upd ON CONFLICT (request_id) DO NOTHING)` + pgOutcomeSelect
)

// RecordOutcome records outcome o on consumed request id and rec, when not
// nil, in the result ledger: see store.LedgerStore.RecordOutcome. SQLite
// runs it as RecordDispatch (UpdateRequest without rec). Postgres sends
// one statement (pgOutcome, pgOutcomeLedger); when it updates nothing
// (the request is not consumed without an outcome, or does not exist), it
// wrote nothing, and RecordOutcome runs the general write, which reads the
// row and answers why (approval.ErrResolved, store.ErrNotFound).
func (db *DB) RecordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result, actor string) error {
	probe := approval.Request{State: approval.StateConsumed}
	if err := probe.RecordOutcome(o); err != nil {
		return fmt.Errorf("record outcome %s: %w", id, err)
	}
	fn := func(r *approval.Request, _ store.TxRead) error { return r.RecordOutcome(o) }
	var also *statement
	if rec != nil {
		if rec.RequestID != id {
			return fmt.Errorf("record outcome %s: a result of request %q", id, rec.RequestID)
		}
		if err := checkResult(*rec); err != nil {
			return fmt.Errorf("record outcome %s: %w", id, err)
		}
		r := store.NormalizeResult(*rec)
		rec = &r
		also = &statement{putResultSQL, putResultArgs(r)}
	}
	pg, ok := db.d.(*postgresDialect)
	if ok {
		done, err := db.pgRecordOutcome(ctx, pg, id, o, rec, actor)
		switch {
		case err != nil:
			return db.wrap("record outcome "+string(id), err)
		case done:
			return nil
		}
	}
	_, err := db.updateRequest(ctx, id, actor, store.TxReads{}, fn, also)
	return err
}

// pgRecordOutcome sends RecordOutcome's statement. done is false when it
// updated no row (and so wrote nothing). It takes a connection without the
// pool's ping (skipPing) and, when the statement found that connection
// broken before it wrote anything (pgOutcomeOnce), sends it once more on a
// pinged one. When the connection ended without the statement's answer,
// which may follow its commit, pgSettleWritten settles it by what it wrote
// (pgOutcomeWritten): the row when it stands, the error when it does not,
// store.ErrInDoubt when that cannot be known.
func (db *DB) pgRecordOutcome(ctx context.Context, pg *postgresDialect, id approval.ID, o approval.Outcome, rec *store.Result, actor string) (bool, error) {
	q := pgOutcome
	args := []any{string(id), string(o), string(approval.EventDispatched), string(approval.StateConsumed), actor,
		store.Millis(db.now()).UnixMilli()}
	if rec != nil {
		q = pgOutcomeLedger
		args = append(args, putResultArgs(*rec)[1:]...)
	}
	var done bool
	err := db.retry(ctx, func() error {
		t := pgOutcomeOnce(context.WithValue(ctx, skipPing{}, true), pg, q, args)
		if t.again && ctx.Err() == nil {
			t = pgOutcomeOnce(ctx, pg, q, args)
		}
		done = t.done
		if t.lost {
			// The statement's answer was lost: it may have committed.
			done = false
			t.err = db.pgSettleWritten(ctx, t.pid, t.err, func(ctx context.Context) (bool, error) {
				var err error
				done, err = db.pgOutcomeWritten(ctx, args)
				return done, err
			})
		}
		return t.err
	})
	if done && err == nil {
		// The payload an older instance sent ("<id> consumed"): a change
		// of the request (parseNotification). Tasks results read on
		// another instance and the outbox wake on it.
		db.pgNotify([]notice{{Channel, string(id) + " " + string(approval.StateConsumed)}})
	}
	return done && err == nil, err
}

// pgOutcomeWritten says whether the writes of RecordOutcome's statement
// whose arguments are args (pgRecordOutcome's) stand: the outcome set on
// its request, and its own "dispatched" event, by its actor at its
// millisecond. An outcome is set once (the UPDATE's guard), so a request
// with the outcome but without that event had it set by another writer,
// and this statement wrote nothing.
func (db *DB) pgOutcomeWritten(ctx context.Context, args []any) (bool, error) {
	var one int
	err := db.sql.QueryRowContext(ctx, `SELECT 1 FROM requests
		WHERE id = $1 AND dispatch_outcome = $2 AND EXISTS (SELECT 1 FROM events
			WHERE request_id = $1 AND type = $3 AND state = $4 AND actor = $5 AND at = $6)`,
		args[:6]...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// outcomeTry is one try of RecordOutcome's statement (pgOutcomeOnce).
type outcomeTry struct {
	done bool // a row was returned (and so updated)
	// again reports an error after which the statement is safe to send
	// once more; lost one after which it may have committed, on the
	// connection of server process pid.
	again, lost bool
	pid         uint32
	err         error
}

// pgOutcomeOnce runs q on a connection of pg's pool; done is true when it
// returned a row (the statement updated its request). again reports an error
// after which q is safe to send once more: the connection broke, and
// either nothing was sent (pgconn.SafeToRetry) or the server's answer was
// an error (a FATAL one: the server closed the connection, e.g. a restart)
// with no row before it. The server sends a statement's row before it
// commits and its answers in order, so no row before the error means
// nothing was written: the UPDATE updated nothing, or did not complete
// and was rolled back. A connection that broke otherwise, without the
// server's answer (EOF, a reset) or after the row, may follow a commit:
// lost (pgLostAnswer), for pgSettleWritten.
func pgOutcomeOnce(ctx context.Context, pg *postgresDialect, q string, args []any) outcomeTry {
	conn, err := pg.pool.Acquire(ctx)
	if err != nil {
		return outcomeTry{err: err}
	}
	defer conn.Release()
	var t outcomeTry
	rows, err := conn.Query(ctx, q, args...)
	if err == nil {
		t.done = rows.Next()
		rows.Close()
		err = rows.Err()
	}
	if err == nil {
		return t
	}
	var pgErr *pgconn.PgError
	closed := conn.Conn().IsClosed()
	again := closed && (pgconn.SafeToRetry(err) || (!t.done && errors.As(err, &pgErr)))
	return outcomeTry{again: again, lost: closed && !again && pgLostAnswer(err), pid: serverPID(conn.Conn().PgConn()), err: err}
}
