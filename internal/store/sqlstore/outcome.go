package sqlstore

import (
	"context"
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
// its "dispatched" event (with the notification) and the ledger row in
// data-modifying WITHs that write only when the UPDATE did. One round trip,
// no explicit transaction (a statement commits on its own, all or nothing).

// pgOutcomeUpdate is RecordOutcome's UPDATE on Postgres: the check of
// approval.Request.RecordOutcome in its WHERE clause ($1 id, $2 outcome).
// Under READ COMMITTED an UPDATE that waited for the row's lock evaluates
// its WHERE clause again on the row as committed, so an outcome recorded
// meanwhile (the sweeper's "unknown") makes it update nothing.
const pgOutcomeUpdate = `UPDATE requests SET dispatch_outcome = $2
		WHERE id = $1 AND state = 'consumed' AND dispatch_outcome = ''
		RETURNING ` + requestSelect

// pgOutcomeEvent writes the outcome's event ($3 type, $4 state, $5 actor,
// $6 at) for the row upd updated, if any: store.ChangeEvents of a change
// that sets only the outcome of a consumed request.
const pgOutcomeEvent = `ev AS (INSERT INTO events (request_id, type, state, actor, at)
		SELECT id, $3, $4, $5, $6 FROM upd)`

// pgOutcomeSelect returns the updated row, and notifies ($7 channel, $8
// payload) as eventsStatement does, once per row updated.
const pgOutcomeSelect = ` SELECT upd.*, pg_notify($7, $8) FROM upd`

// pgOutcome and pgOutcomeLedger are the statements of RecordOutcome on
// Postgres, without and with the ledger's row ($9–$14, putResultSQL's
// values after the request id; a result already recorded is kept).
const (
	pgOutcome       = `WITH upd AS (` + pgOutcomeUpdate + `), ` + pgOutcomeEvent + pgOutcomeSelect
	pgOutcomeLedger = `WITH upd AS (` + pgOutcomeUpdate + `), ` + pgOutcomeEvent + `,
		led AS (INSERT INTO approval_results (request_id, result, error, truncated, size, recorded_at, expires_at)
		SELECT id, $9, $10, $11, $12, $13, $14 FROM upd ON CONFLICT (request_id) DO NOTHING)` + pgOutcomeSelect
)

// RecordOutcome records outcome o on consumed request id and rec, when not
// nil, in the result ledger: see store.LedgerStore.RecordOutcome. SQLite
// runs it as RecordDispatch (UpdateRequest without rec). Postgres sends
// one statement (pgOutcome, pgOutcomeLedger); when it updates nothing
// (the request is not consumed without an outcome, or does not exist), it
// wrote nothing, and RecordOutcome runs the general write, which reads the
// row and answers why (approval.ErrResolved, store.ErrNotFound).
func (db *DB) RecordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result, actor string) (approval.Request, error) {
	probe := approval.Request{State: approval.StateConsumed}
	if err := probe.RecordOutcome(o); err != nil {
		return approval.Request{}, fmt.Errorf("record outcome %s: %w", id, err)
	}
	fn := func(r *approval.Request, _ store.TxRead) error { return r.RecordOutcome(o) }
	var also *statement
	if rec != nil {
		if rec.RequestID != id {
			return approval.Request{}, fmt.Errorf("record outcome %s: a result of request %q", id, rec.RequestID)
		}
		if err := checkResult(*rec); err != nil {
			return approval.Request{}, fmt.Errorf("record outcome %s: %w", id, err)
		}
		r := store.NormalizeResult(*rec)
		rec = &r
		also = &statement{putResultSQL, putResultArgs(r)}
	}
	pg, ok := db.d.(*postgresDialect)
	if !ok {
		return db.updateRequest(ctx, id, actor, store.TxReads{}, fn, also)
	}
	out, done, err := db.pgRecordOutcome(ctx, pg, id, o, rec, actor)
	switch {
	case err != nil:
		return approval.Request{}, db.wrap("record outcome "+string(id), err)
	case done:
		return out, nil
	}
	return db.updateRequest(ctx, id, actor, store.TxReads{}, fn, also)
}

// pgRecordOutcome sends RecordOutcome's statement. done is false when it
// updated no row (and so wrote nothing). It takes a connection without the
// pool's ping (skipPing) and, when the statement found that connection
// broken before it wrote anything (pgOutcomeOnce), sends it once more on a
// pinged one; any other error may follow a commit whose reply was lost,
// and is returned (the gate's retry recognises its own outcome).
func (db *DB) pgRecordOutcome(ctx context.Context, pg *postgresDialect, id approval.ID, o approval.Outcome, rec *store.Result, actor string) (approval.Request, bool, error) {
	q := pgOutcome
	args := []any{string(id), string(o), string(approval.EventDispatched), string(approval.StateConsumed), actor,
		store.Millis(db.now()).UnixMilli(), Channel, string(id) + " " + string(approval.StateConsumed)}
	if rec != nil {
		q = pgOutcomeLedger
		args = append(args, putResultArgs(*rec)[1:]...)
	}
	var (
		w    requestRow
		done bool
	)
	err := db.retry(ctx, func() error {
		var (
			err   error
			again bool
		)
		w, done, again, err = pgOutcomeOnce(context.WithValue(ctx, skipPing{}, true), pg, q, args)
		if again && ctx.Err() == nil {
			w, done, _, err = pgOutcomeOnce(ctx, pg, q, args)
		}
		return err
	})
	if err != nil || !done {
		return approval.Request{}, false, err
	}
	out, err := w.decode()
	return out, err == nil, err
}

// pgOutcomeOnce runs q on a connection of pg's pool and scans the row it
// returns; done is false when it returned none. again reports an error
// after which q is safe to send once more: the connection broke, and
// either nothing was sent (pgconn.SafeToRetry) or the server's answer was
// an error (a FATAL one: the server closed the connection, e.g. a restart)
// with no row before it. The server sends a statement's row before it
// commits and its answers in order, so no row before the error means
// nothing was written: the UPDATE updated nothing, or did not complete
// and was rolled back. A connection that broke without the server's
// answer (EOF, a reset) may follow a commit: not again.
func pgOutcomeOnce(ctx context.Context, pg *postgresDialect, q string, args []any) (w requestRow, done, again bool, err error) {
	conn, err := pg.pool.Acquire(ctx)
	if err != nil {
		return requestRow{}, false, false, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, q, args...)
	if err == nil {
		if rows.Next() {
			done = true
			err = rows.Scan(w.destWith(nil)...)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err == nil {
		return w, done, false, nil
	}
	var pgErr *pgconn.PgError
	again = conn.Conn().IsClosed() && (pgconn.SafeToRetry(err) || (!done && errors.As(err, &pgErr)))
	return requestRow{}, false, again, err
}
