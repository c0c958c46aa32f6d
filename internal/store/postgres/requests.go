package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// defaultLimit is the page size of ListRequests, Due and Events when the
// caller passes 0.
const defaultLimit = 100

// CreateRequest inserts r, which must be pending and have an id, CreatedAt
// and ExpiresAt, and in the same transaction writes its "requested" event
// and notifies Channel. Times are stored truncated to the millisecond. It
// returns an error wrapping store.ErrAlreadyExists if the id is taken.
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
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO requests (`+columns+`) VALUES (`+params(1, numColumns)+`)
			ON CONFLICT (id) DO NOTHING`, w.Args()...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrAlreadyExists
		}
		return writeEvents(ctx, tx, r.ID, r.State, []approval.Event{store.RequestedEvent(r)})
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
	w, err := getRow(ctx, db.pool, id, "")
	if errors.Is(err, store.ErrNotFound) {
		return approval.Request{}, fmt.Errorf("get request %s: %w", id, err)
	}
	if err != nil {
		return approval.Request{}, db.wrap("get request "+string(id), err)
	}
	r, err := w.Decode()
	if err != nil {
		return approval.Request{}, fmt.Errorf("get request %s: %w", id, err)
	}
	return r, nil
}

// querier is what *pgxpool.Pool and pgx.Tx have in common for reading.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// getRow reads one row; suffix is appended to the query (" FOR UPDATE").
func getRow(ctx context.Context, q querier, id approval.ID, suffix string) (row, error) {
	var w row
	err := q.QueryRow(ctx, `SELECT `+columns+` FROM requests WHERE id = $1`+suffix, string(id)).Scan(w.Dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, store.ErrNotFound
	}
	return w, err
}

// ListRequests returns one page of requests matching f, ordered by id
// (byte-wise), and the cursor of the next page ("" when this page is the
// last). The cursor is the id of the last request on the page.
func (db *DB) ListRequests(ctx context.Context, f store.Filter) ([]approval.Request, string, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if f.State != "" {
		add(`state = $?::text`, string(f.State))
	}
	if f.RequestedBy != "" {
		add(`requested_by = $?::text`, f.RequestedBy)
	}
	if f.Tenant != "" {
		add(`tenant = $?::text`, f.Tenant)
	}
	switch f.Kind {
	case "":
	case approval.KindToolCall:
		where = append(where, `kind IN ('', 'tool_call')`)
	default:
		add(`kind = $?`, f.Kind)
	}
	if f.Target != "" {
		add(`target = $?`, f.Target)
	}
	if f.IDPrefix != "" {
		// The range lets the primary key index narrow the scan; starts_with
		// makes the match exact.
		add(`id >= $?::text AND starts_with(id, $?::text)`, f.IDPrefix)
	}
	if f.Cursor != "" {
		add(`id > $?::text`, f.Cursor)
	}
	q := `SELECT ` + columns + ` FROM requests`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	args = append(args, limit+1)
	q += ` ORDER BY id LIMIT $` + strconv.Itoa(len(args))
	rows, err := db.pool.Query(ctx, q, args...)
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

// UpdateRequest runs fn on the stored request inside one transaction that
// holds its row (SELECT … FOR UPDATE), stores the result with an UPDATE
// conditional on the state read, writes the events of store.ChangeEvents
// and, when there are any, notifies Channel, then commits. An unchanged
// request writes nothing. If fn returns an error, nothing is written and
// that error is returned as is. fn may run more than once (the transaction
// is retried on a serialization failure or deadlock). An unknown id returns
// an error wrapping store.ErrNotFound without calling fn.
func (db *DB) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	var (
		out   approval.Request
		fnErr error
	)
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		fnErr = nil
		old, err := getRow(ctx, tx, id, ` FOR UPDATE`)
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
		n := numColumns
		tag, err := tx.Exec(ctx, `UPDATE requests SET (`+columns+`) = (`+params(1, n)+`)
			WHERE id = $`+strconv.Itoa(n+1)+` AND state = $`+strconv.Itoa(n+2),
			append(w.Args(), old.ID(), old.State())...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("row changed under its lock (%d rows updated)", tag.RowsAffected())
		}
		return writeEvents(ctx, tx, out.ID, out.State, store.ChangeEvents(before, out, actor, db.now()))
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

// writeEvents inserts evs and, if there are any, notifies Channel with
// "<id> <state>" (unless id is "", as for session events), inside tx. It first takes the events advisory lock, held
// until tx ends, so sequence numbers are assigned in commit order.
func writeEvents(ctx context.Context, tx pgx.Tx, id approval.ID, state approval.State, evs []approval.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, eventsLockID); err != nil {
		return fmt.Errorf("lock events: %w", err)
	}
	for _, ev := range evs {
		if _, err := tx.Exec(ctx, `INSERT INTO events (request_id, session_id, type, state, actor, at) VALUES ($1, $2, $3, $4, $5, $6)`,
			nullText(string(ev.RequestID)), nullText(ev.SessionID), string(ev.Type), string(ev.State), ev.Actor, ev.At.UnixMilli()); err != nil {
			return fmt.Errorf("insert %s event: %w", ev.Type, err)
		}
	}
	if id == "" {
		return nil // session events: no request changed, so no holder to wake
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, string(id)+" "+string(state)); err != nil {
		return fmt.Errorf("notify: %w", err)
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
	rows, err := db.pool.Query(ctx, `SELECT id FROM (
			SELECT id, expires_at AS due FROM requests
			WHERE state = 'pending' AND expires_at <= $1
			UNION ALL
			SELECT id, decided_at + valid_for_ms AS due FROM requests
			WHERE state = 'approved' AND valid_for_ms > 0 AND decided_at + valid_for_ms <= $1
			UNION ALL
			SELECT id, lease_until AS due FROM requests
			WHERE state = 'consumed' AND dispatch_outcome = '' AND held_by <> '' AND lease_until <= $1
		) AS d ORDER BY due, id LIMIT $2`, now.UnixMilli(), limit)
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

// CountPending counts pending tool-call requests, only those of requestedBy
// when it is not empty.
func (db *DB) CountPending(ctx context.Context, requestedBy string) (int, error) {
	q, args := `SELECT COUNT(*) FROM requests WHERE state = 'pending' AND kind IN ('', 'tool_call')`, []any{}
	if requestedBy != "" {
		q += ` AND requested_by = $1`
		args = append(args, requestedBy)
	}
	var n int64
	if err := db.pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, db.wrap("count pending", err)
	}
	return int(n), nil
}

// Events returns at most limit (0 means 100) events with Seq > after, in Seq
// order. Seq order is commit order: sequence numbers are taken under an
// advisory lock held until commit (see writeEvents).
func (db *DB) Events(ctx context.Context, after int64, limit int) ([]approval.Event, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	rows, err := db.pool.Query(ctx, `SELECT seq, COALESCE(request_id, ''), COALESCE(session_id, ''), type, state, actor, at FROM events
		WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
	if err != nil {
		return nil, db.wrap("list events", err)
	}
	defer rows.Close()
	var evs []approval.Event
	for rows.Next() {
		var (
			ev                        approval.Event
			reqID, sid, typ, st, actr string
			at                        int64
		)
		if err := rows.Scan(&ev.Seq, &reqID, &sid, &typ, &st, &actr, &at); err != nil {
			return nil, db.wrap("list events", err)
		}
		ev.RequestID, ev.SessionID, ev.Type, ev.State, ev.Actor = approval.ID(reqID), sid, approval.EventType(typ), approval.State(st), actr
		ev.At = time.UnixMilli(at).UTC()
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, db.wrap("list events", err)
	}
	return evs, nil
}

// OpenIdentical returns the pending, approved and unanswered denied requests
// of principal for (server, tool, argumentsHash), oldest first, at most 100.
func (db *DB) OpenIdentical(ctx context.Context, principal, server, tool, argumentsHash string) ([]approval.Request, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+columns+` FROM requests
		WHERE requested_by = $1 AND arguments_hash = $2 AND server = $3 AND tool = $4
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
