package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// The result ledger, tasks, used request states and shared secrets
// (issue 11, migration 0011). Each row is written once with INSERT … ON
// CONFLICT DO NOTHING, so "already there" is ErrAlreadyExists on both
// databases and two instances racing to write the same row leave exactly
// one.

// insertOnce runs an INSERT … ON CONFLICT DO NOTHING and reports
// store.ErrAlreadyExists when it inserted nothing.
func (db *DB) insertOnce(ctx context.Context, op, q string, args ...any) error {
	err := db.inTx(ctx, func(t *tx) error {
		res, err := t.exec(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrAlreadyExists
		}
		return nil
	})
	if err != nil {
		return db.wrap(op, err)
	}
	return nil
}

// PutResult records the result of a consumed approval, once.
func (db *DB) PutResult(ctx context.Context, r store.Result) error {
	if err := checkResult(r); err != nil {
		return fmt.Errorf("put result %s: %w", r.RequestID, err)
	}
	r = store.NormalizeResult(r)
	return db.insertOnce(ctx, "put result "+string(r.RequestID), putResultSQL, putResultArgs(r)...)
}

// putResultSQL is PutResult's statement; it inserts nothing when the
// request has a result.
const putResultSQL = `INSERT INTO approval_results (request_id, result, error, truncated, size, recorded_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (request_id) DO NOTHING`

func putResultArgs(r store.Result) []any {
	return []any{string(r.RequestID), nullText(r.Result), nullText(r.Error), boolInt(r.Truncated), r.Size, millis(r.RecordedAt), millis(r.ExpiresAt)}
}

// checkResult is what PutResult and RecordDispatch require of r.
func checkResult(r store.Result) error {
	if r.RequestID == "" || (r.Result == nil) == (r.Error == nil) {
		return errors.New("want a request id and exactly one of result and error")
	}
	return nil
}

// RecordDispatch updates request r.RequestID with fn and records r in the
// result ledger in one transaction (on SQLite one write of the group
// commit instead of two): see store.LedgerStore.RecordDispatch.
func (db *DB) RecordDispatch(ctx context.Context, r store.Result, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if err := checkResult(r); err != nil {
		return approval.Request{}, fmt.Errorf("record dispatch %s: %w", r.RequestID, err)
	}
	r = store.NormalizeResult(r)
	return db.updateRequest(ctx, r.RequestID, actor, store.TxReads{}, func(req *approval.Request, _ store.TxRead) error { return fn(req) },
		&statement{putResultSQL, putResultArgs(r)})
}

// GetResult returns the recorded result of request id or store.ErrNotFound.
func (db *DB) GetResult(ctx context.Context, id approval.ID) (store.Result, error) {
	var (
		r                     store.Result
		result, errObj        sql.NullString
		truncated             int64
		recordedAt, expiresAt int64
	)
	err := db.queryRow(ctx, `SELECT result, error, truncated, size, recorded_at, expires_at FROM approval_results WHERE request_id = ?`, string(id)).
		Scan(&result, &errObj, &truncated, &r.Size, &recordedAt, &expiresAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.Result{}, db.wrap("get result "+string(id), store.ErrNotFound)
	case err != nil:
		return store.Result{}, db.wrap("get result "+string(id), err)
	}
	r.RequestID = id
	if result.Valid {
		r.Result = json.RawMessage(result.String)
	}
	if errObj.Valid {
		r.Error = json.RawMessage(errObj.String)
	}
	r.Truncated = truncated != 0
	r.RecordedAt, r.ExpiresAt = fromMillis(recordedAt), fromMillis(expiresAt)
	return r, nil
}

// CreateTask records a task.
func (db *DB) CreateTask(ctx context.Context, t store.Task) error {
	if t.RequestID == "" || t.Principal.ID == "" {
		return fmt.Errorf("create task %s: want a request id and a principal", t.RequestID)
	}
	p, err := json.Marshal(t.Principal)
	if err != nil {
		return fmt.Errorf("create task %s: %w", t.RequestID, err)
	}
	t = store.NormalizeTask(t)
	var lease sql.NullInt64
	if !t.LeaseUntil.IsZero() {
		lease = sql.NullInt64{Int64: millis(t.LeaseUntil), Valid: true}
	}
	return db.insertOnce(ctx, "create task "+string(t.RequestID),
		`INSERT INTO approval_tasks (request_id, principal, arguments, created_at, expires_at, state, lease_until)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (request_id) DO NOTHING`,
		string(t.RequestID), string(p), t.Arguments, millis(t.CreatedAt), millis(t.ExpiresAt), sql.NullString{String: t.State, Valid: t.State != ""}, lease)
}

// RenewTask extends a working direct task's lease and returns its state.
func (db *DB) RenewTask(ctx context.Context, id approval.ID, until time.Time) (string, error) {
	var state sql.NullString
	err := db.inTx(ctx, func(t *tx) error {
		if _, err := t.exec(ctx, `UPDATE approval_tasks SET lease_until = ? WHERE request_id = ? AND state = ?`,
			millis(store.Millis(until)), string(id), store.TaskWorking); err != nil {
			return err
		}
		return t.queryRow(ctx, `SELECT state FROM approval_tasks WHERE request_id = ?`, string(id)).Scan(&state)
	})
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return "", db.wrap("renew task "+string(id), err)
	}
	return state.String, nil
}

// CancelDirectTask moves a working direct task without a result to
// cancelled.
func (db *DB) CancelDirectTask(ctx context.Context, id approval.ID) (bool, error) {
	var n int64
	err := db.inTx(ctx, func(t *tx) error {
		res, err := t.exec(ctx, `UPDATE approval_tasks SET state = ? WHERE request_id = ? AND state IN (?, ?)
			AND NOT EXISTS (SELECT 1 FROM approval_results WHERE approval_results.request_id = approval_tasks.request_id)`,
			store.TaskCancelled, string(id), store.TaskWorking, store.TaskInputRequired)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, db.wrap("cancel task "+string(id), err)
	}
	return n == 1, nil
}

// SwapTask moves a direct task without a result from one state (and
// sealed arguments) to another, atomically.
func (db *DB) SwapTask(ctx context.Context, id approval.ID, from string, fromArgs []byte, to string, toArgs []byte, until time.Time) (bool, error) {
	var lease sql.NullInt64
	if !until.IsZero() {
		lease = sql.NullInt64{Int64: millis(store.Millis(until)), Valid: true}
	}
	q := `UPDATE approval_tasks SET state = ?, arguments = ?, lease_until = ? WHERE request_id = ? AND state = ? AND arguments IS NULL
		AND NOT EXISTS (SELECT 1 FROM approval_results WHERE approval_results.request_id = approval_tasks.request_id)`
	args := []any{to, toArgs, lease, string(id), from}
	if fromArgs != nil {
		q = `UPDATE approval_tasks SET state = ?, arguments = ?, lease_until = ? WHERE request_id = ? AND state = ? AND arguments = ?
			AND NOT EXISTS (SELECT 1 FROM approval_results WHERE approval_results.request_id = approval_tasks.request_id)`
		args = append(args, fromArgs)
	}
	var n int64
	err := db.inTx(ctx, func(t *tx) error {
		res, err := t.exec(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, db.wrap("swap task "+string(id), err)
	}
	return n == 1, nil
}

// getTaskSQL reads a task's row (GetTask).
const getTaskSQL = `SELECT principal, arguments, created_at, expires_at, state, lease_until FROM approval_tasks WHERE request_id = ?`

// GetTask returns the task of request id or store.ErrNotFound.
func (db *DB) GetTask(ctx context.Context, id approval.ID) (store.Task, error) {
	var (
		t                    store.Task
		principal            string
		args                 []byte
		createdAt, expiresAt int64
		state                sql.NullString
		lease                sql.NullInt64
	)
	dest := []any{&principal, &args, &createdAt, &expiresAt, &state, &lease}
	var err error
	if pg, ok := db.d.(*postgresDialect); ok {
		err = pgGetTask(ctx, pg, id, dest)
	} else {
		err = db.queryRow(ctx, getTaskSQL, string(id)).Scan(dest...)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.Is(err, pgx.ErrNoRows):
		return store.Task{}, db.wrap("get task "+string(id), store.ErrNotFound)
	case err != nil:
		return store.Task{}, db.wrap("get task "+string(id), err)
	}
	if err := json.Unmarshal([]byte(principal), &t.Principal); err != nil {
		return store.Task{}, fmt.Errorf("get task %s: decode principal: %w", id, err)
	}
	t.RequestID = id
	t.Arguments = args
	t.CreatedAt, t.ExpiresAt = fromMillis(createdAt), fromMillis(expiresAt)
	t.State = state.String
	if lease.Valid {
		t.LeaseUntil = fromMillis(lease.Int64)
	}
	return t, nil
}

// DropTaskArguments forgets a task's sealed arguments.
func (db *DB) DropTaskArguments(ctx context.Context, id approval.ID) error {
	err := db.inTx(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `UPDATE approval_tasks SET arguments = NULL WHERE request_id = ? AND arguments IS NOT NULL`, string(id))
		return err
	})
	if err != nil {
		return db.wrap("drop task arguments "+string(id), err)
	}
	return nil
}

// UseRequestState records a request state's nonce as used, once.
func (db *DB) UseRequestState(ctx context.Context, nonce string, id approval.ID, expiresAt time.Time) error {
	if nonce == "" {
		return errors.New("use request state: empty nonce")
	}
	return db.insertOnce(ctx, "use request state",
		`INSERT INTO request_states (nonce, request_id, expires_at) VALUES (?, ?, ?) ON CONFLICT (nonce) DO NOTHING`,
		nonce, string(id), millis(store.Millis(expiresAt)))
}

// Secret returns the secret named name, storing value first when absent.
func (db *DB) Secret(ctx context.Context, name string, value []byte, now time.Time) ([]byte, error) {
	if name == "" || len(value) == 0 {
		return nil, errors.New("secret: want a name and a value")
	}
	var out []byte
	err := db.inTx(ctx, func(t *tx) error {
		if _, err := t.exec(ctx, `INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			name, value, millis(store.Millis(now))); err != nil {
			return err
		}
		out = nil
		return t.queryRow(ctx, `SELECT value FROM secrets WHERE name = ?`, name).Scan(&out)
	})
	if err != nil {
		return nil, db.wrap("secret "+name, err)
	}
	return out, nil
}

// PruneLedger deletes expired results, tasks and used request states.
func (db *DB) PruneLedger(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := db.inTx(ctx, func(t *tx) error {
		n = 0
		for _, table := range []string{"approval_results", "approval_tasks", "request_states"} {
			res, err := t.exec(ctx, `DELETE FROM `+table+` WHERE expires_at <= ?`, millis(store.Millis(now)))
			if err != nil {
				return err
			}
			c, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += c
		}
		return nil
	})
	if err != nil {
		return 0, db.wrap("prune ledger", err)
	}
	return int(n), nil
}

// nullText stores raw JSON as text, or NULL for nil.
func nullText(b json.RawMessage) sql.NullString {
	return sql.NullString{String: string(b), Valid: b != nil}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// pgGetTask is GetTask's read on Postgres, scanned into dest: one round
// trip on a connection of the main pool taken without the pool's ping
// (skipPing), where database/sql's read took two (the ping, then the
// query) and a transaction each on the server. The REST API reads it once
// per decision (Gate.HeldAsTask). A read writes nothing, so when the
// connection turns out broken (a restart or failover since it was last
// used) it is sent once more on a pinged one. It returns pgx.ErrNoRows
// when there is no task.
func pgGetTask(ctx context.Context, pg *postgresDialect, id approval.ID, dest []any) error {
	q := dollarPlaceholders(getTaskSQL)
	once := func(ctx context.Context) (broken bool, err error) {
		conn, err := pg.pool.Acquire(ctx)
		if err != nil {
			return false, err
		}
		defer conn.Release()
		err = conn.QueryRow(ctx, q, string(id)).Scan(dest...)
		return err != nil && conn.Conn().IsClosed(), err
	}
	broken, err := once(context.WithValue(ctx, skipPing{}, true))
	if broken && ctx.Err() == nil {
		_, err = once(ctx)
	}
	return err
}
