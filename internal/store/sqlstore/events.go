package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"toolgate/internal/approval"
)

// An event is one row of the event log: an approval.Event (its subject a
// request, a session or a grant), or, with PolicyRevision set, the
// policy_changed event of a deployment policy revision. Exactly one of
// RequestID, SessionID, GrantID and PolicyRevision is set (a CHECK
// constraint holds it).
type event struct {
	approval.Event
	PolicyRevision int64
}

// eventRows wraps approval events (of requests or sessions) as events.
func eventRows(evs ...approval.Event) []event {
	out := make([]event, len(evs))
	for i, ev := range evs {
		out[i] = event{Event: ev}
	}
	return out
}

// writeEvents appends evs to the event log inside t; every event of the
// store is written here, in the transaction of the change it records. On
// Postgres it first takes the events lock, held until t ends, so sequence
// numbers are assigned in commit order and a reader paging with Events
// never skips an event committed late (SQLite has one writer at a time);
// after inserting it notifies other instances (dialect.notify). No events,
// nothing done.
func (t *tx) writeEvents(ctx context.Context, evs []event) error {
	if len(evs) == 0 {
		return nil
	}
	if err := t.lock(ctx, lockEvents); err != nil {
		return err
	}
	for _, ev := range evs {
		if _, err := t.exec(ctx, `INSERT INTO events (request_id, session_id, policy_revision, grant_id, type, state, actor, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			nullString(string(ev.RequestID)), nullString(ev.SessionID), sql.NullInt64{Int64: ev.PolicyRevision, Valid: ev.PolicyRevision != 0},
			nullString(ev.GrantID), string(ev.Type), string(ev.State), ev.Actor, ev.At.UnixMilli()); err != nil {
			return fmt.Errorf("insert %s event: %w", ev.Type, err)
		}
	}
	return t.d.notify(ctx, t, evs)
}

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

// Events returns at most limit (0 means 100) events with Seq > after, in Seq
// order. Seq order is commit order (see writeEvents). Policy events come
// with neither a request, a session nor a grant id.
func (db *DB) Events(ctx context.Context, after int64, limit int) ([]approval.Event, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	rows, err := db.query(ctx, `SELECT seq, COALESCE(request_id, ''), COALESCE(session_id, ''), COALESCE(grant_id, ''), type, state, actor, at FROM events
		WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	evs, err := collect(rows, err, func(rows *sql.Rows) (approval.Event, error) {
		var (
			ev approval.Event
			at int64
		)
		err := rows.Scan(&ev.Seq, &ev.RequestID, &ev.SessionID, &ev.GrantID, &ev.Type, &ev.State, &ev.Actor, &at)
		ev.At = time.UnixMilli(at).UTC()
		return ev, err
	})
	if err != nil {
		return nil, db.wrap("list events", err)
	}
	return evs, nil
}
