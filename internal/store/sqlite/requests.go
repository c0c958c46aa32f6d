package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// defaultLimit is the page size of ListRequests, Due and Events when the
// caller passes 0.
const defaultLimit = 100

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// CreateRequest inserts r, which must be pending and have an id, CreatedAt
// and ExpiresAt, and writes its "requested" event in the same transaction.
// Times are stored truncated to the millisecond. It returns an error
// wrapping store.ErrAlreadyExists if the id is taken.
func (db *DB) CreateRequest(ctx context.Context, r approval.Request) error {
	switch {
	case r.ID == "":
		return errors.New("create request: empty id")
	case r.State != approval.StatePending:
		return fmt.Errorf("create request %s: state %q, want pending", r.ID, r.State)
	case r.CreatedAt.IsZero() || r.ExpiresAt.IsZero():
		return fmt.Errorf("create request %s: created_at and expires_at are required", r.ID)
	}
	w, err := toRow(r)
	if err != nil {
		return fmt.Errorf("create request %s: %w", r.ID, err)
	}
	err = db.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO requests (`+columns+`) VALUES (`+placeholders(numColumns)+`)
			ON CONFLICT (id) DO NOTHING`, w.Args()...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrAlreadyExists
		}
		return insertEvents(ctx, tx, []approval.Event{store.RequestedEvent(r)})
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		return fmt.Errorf("create request %s: %w", r.ID, err)
	}
	if err != nil {
		return db.wrap("create request "+string(r.ID), err)
	}
	return nil
}

// GetRequest returns the request with id, or an error wrapping
// store.ErrNotFound.
func (db *DB) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	r, err := getRequest(ctx, db.sql, id)
	if errors.Is(err, store.ErrNotFound) {
		return approval.Request{}, fmt.Errorf("get request %s: %w", id, err)
	}
	if err != nil {
		return approval.Request{}, db.wrap("get request "+string(id), err)
	}
	return r, nil
}

func getRow(ctx context.Context, q querier, id approval.ID) (row, error) {
	var w row
	err := q.QueryRowContext(ctx, `SELECT `+columns+` FROM requests WHERE id = ?`, string(id)).Scan(w.Dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, store.ErrNotFound
	}
	return w, err
}

func getRequest(ctx context.Context, q querier, id approval.ID) (approval.Request, error) {
	w, err := getRow(ctx, q, id)
	if err != nil {
		return approval.Request{}, err
	}
	return w.Decode()
}

// ListRequests returns one page of requests matching f, ordered by id, and
// the cursor of the next page ("" when this page is the last). The cursor is
// the id of the last request on the page.
func (db *DB) ListRequests(ctx context.Context, f store.Filter) ([]approval.Request, string, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	var where []string
	var args []any
	add := func(cond string, vs ...any) {
		where = append(where, cond)
		args = append(args, vs...)
	}
	if f.State != "" {
		add(`state = ?`, string(f.State))
	}
	if f.RequestedBy != "" {
		add(`requested_by = ?`, f.RequestedBy)
	}
	if f.Tenant != "" {
		add(`tenant = ?`, f.Tenant)
	}
	switch f.Kind {
	case "":
	case approval.KindToolCall:
		add(`kind IN ('', 'tool_call')`)
	default:
		add(`kind = ?`, f.Kind)
	}
	if f.Target != "" {
		add(`target = ?`, f.Target)
	}
	if f.IDPrefix != "" {
		// The range lets the primary key index narrow the scan; substr
		// makes the match exact.
		add(`id >= ? AND substr(id, 1, length(?)) = ?`, f.IDPrefix, f.IDPrefix, f.IDPrefix)
	}
	if f.Cursor != "" {
		add(`id > ?`, f.Cursor)
	}
	q := `SELECT ` + columns + ` FROM requests`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY id LIMIT ?`
	args = append(args, limit+1)
	rows, err := db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", db.wrap("list requests", err)
	}
	defer rows.Close()
	var rs []approval.Request
	for rows.Next() {
		var w row
		if err := rows.Scan(w.Dest()...); err != nil {
			return nil, "", db.wrap("list requests", err)
		}
		r, err := w.Decode()
		if err != nil {
			return nil, "", fmt.Errorf("list requests: %w", err)
		}
		rs = append(rs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", db.wrap("list requests", err)
	}
	next := ""
	if len(rs) > limit {
		rs = rs[:limit]
		next = string(rs[limit-1].ID)
	}
	return rs, next, nil
}

// UpdateRequest runs fn on the stored request inside one IMMEDIATE
// transaction, stores the result and writes the events of
// store.ChangeEvents, then commits. If fn returns an error, nothing is
// written and that error is returned as is. fn may run more than once (the
// transaction is retried if the database stays locked). An unknown id
// returns an error wrapping store.ErrNotFound without calling fn.
func (db *DB) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	var (
		out   approval.Request
		fnErr error
	)
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		fnErr = nil
		old, err := getRow(ctx, tx, id)
		if err != nil {
			return err
		}
		before, err := old.Decode()
		if err != nil {
			return err
		}
		cur, err := old.Decode() // a second decode: fn cannot reach before's slices
		if err != nil {
			return err
		}
		if err := fn(&cur); err != nil {
			fnErr = err
			return err
		}
		if cur.ID != id {
			return fmt.Errorf("update changed the request id to %q", cur.ID)
		}
		w, err := toRow(cur)
		if err != nil {
			return err
		}
		if out, err = w.Decode(); err != nil {
			return err
		}
		if w == old {
			return nil
		}
		res, err := tx.ExecContext(ctx, `UPDATE requests SET (`+columns+`) = (`+placeholders(numColumns)+`)
			WHERE id = ? AND state = ?`, append(w.Args(), old.ID(), old.State())...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("row changed under an immediate transaction (%d rows updated)", n)
		}
		return insertEvents(ctx, tx, store.ChangeEvents(before, out, actor, db.now()))
	})
	switch {
	case fnErr != nil:
		return approval.Request{}, fnErr
	case errors.Is(err, store.ErrNotFound):
		return approval.Request{}, fmt.Errorf("update request %s: %w", id, err)
	case err != nil:
		return approval.Request{}, db.wrap("update request "+string(id), err)
	}
	return out, nil
}

func insertEvents(ctx context.Context, tx *sql.Tx, evs []approval.Event) error {
	for _, ev := range evs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (request_id, session_id, type, state, actor, at) VALUES (?, ?, ?, ?, ?, ?)`,
			nullString(string(ev.RequestID)), nullString(ev.SessionID), string(ev.Type), string(ev.State), ev.Actor, ev.At.UnixMilli()); err != nil {
			return fmt.Errorf("insert %s event: %w", ev.Type, err)
		}
	}
	return nil
}

// Due returns the ids of requests a sweeper must look at as of now, most
// overdue first, at most limit (0 means 100): pending ones with
// ExpiresAt <= now, and approved ones with ValidFor > 0 and
// DecidedAt+ValidFor <= now (approval.Request.ValidUntil).
func (db *DB) Due(ctx context.Context, now time.Time, limit int) ([]approval.ID, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	ms := now.UnixMilli()
	rows, err := db.sql.QueryContext(ctx, `SELECT id FROM (
			SELECT id, expires_at AS due FROM requests
			WHERE state = 'pending' AND expires_at <= ?
			UNION ALL
			SELECT id, decided_at + valid_for_ms AS due FROM requests
			WHERE state = 'approved' AND valid_for_ms > 0 AND decided_at + valid_for_ms <= ?
			UNION ALL
			SELECT id, lease_until AS due FROM requests
			WHERE state = 'consumed' AND dispatch_outcome = '' AND held_by != '' AND lease_until <= ?
		) ORDER BY due, id LIMIT ?`, ms, ms, ms, limit)
	if err != nil {
		return nil, db.wrap("list due requests", err)
	}
	defer rows.Close()
	var ids []approval.ID
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, db.wrap("list due requests", err)
		}
		ids = append(ids, approval.ID(id))
	}
	if err := rows.Err(); err != nil {
		return nil, db.wrap("list due requests", err)
	}
	return ids, nil
}

// CountPending counts pending requests, only those of requestedBy when it is
// not empty.
func (db *DB) CountPending(ctx context.Context, requestedBy string) (int, error) {
	q, args := `SELECT COUNT(*) FROM requests WHERE state = 'pending' AND kind IN ('', 'tool_call')`, []any{}
	if requestedBy != "" {
		q += ` AND requested_by = ?`
		args = append(args, requestedBy)
	}
	var n int
	if err := db.sql.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, db.wrap("count pending", err)
	}
	return n, nil
}

// Events returns at most limit (0 means 100) events with Seq > after, in Seq
// order. Seq order is commit order: SQLite has one writer at a time.
func (db *DB) Events(ctx context.Context, after int64, limit int) ([]approval.Event, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	rows, err := db.sql.QueryContext(ctx, `SELECT seq, COALESCE(request_id, ''), COALESCE(session_id, ''), type, state, actor, at FROM events
		WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, db.wrap("list events", err)
	}
	defer rows.Close()
	var evs []approval.Event
	for rows.Next() {
		var (
			ev approval.Event
			at int64
		)
		if err := rows.Scan(&ev.Seq, &ev.RequestID, &ev.SessionID, &ev.Type, &ev.State, &ev.Actor, &at); err != nil {
			return nil, db.wrap("list events", err)
		}
		ev.At = time.UnixMilli(at).UTC()
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, db.wrap("list events", err)
	}
	return evs, nil
}

// placeholders returns "?, ?, …" with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// OpenIdentical returns the pending, approved and unanswered denied requests
// of principal for (server, tool, argumentsHash), oldest first, at most 100.
func (db *DB) OpenIdentical(ctx context.Context, principal, server, tool, argumentsHash string) ([]approval.Request, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT `+columns+` FROM requests
		WHERE requested_by = ? AND arguments_hash = ? AND server = ? AND tool = ?
		AND (state IN ('pending', 'approved') OR (state = 'denied' AND answered_at IS NULL))
		ORDER BY id LIMIT 100`, principal, argumentsHash, server, tool)
	if err != nil {
		return nil, db.wrap("find identical requests", err)
	}
	defer rows.Close()
	var rs []approval.Request
	for rows.Next() {
		var w row
		if err := rows.Scan(w.Dest()...); err != nil {
			return nil, db.wrap("find identical requests", err)
		}
		r, err := w.Decode()
		if err != nil {
			return nil, fmt.Errorf("find identical requests: %w", err)
		}
		rs = append(rs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, db.wrap("find identical requests", err)
	}
	return rs, nil
}
