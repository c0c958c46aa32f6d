package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
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
// store is written here, in the transaction of the change it records. Their
// notifications to other instances (dialect.notices) go to t.notes, sent
// once t committed. It takes no lock: on
// Postgres, where transactions commit in any order, each row records its
// transaction's id (a column default) and Feed orders by it (see Feed). No
// events, nothing done.
func (t *tx) writeEvents(ctx context.Context, evs []event) error {
	if len(evs) == 0 {
		return nil
	}
	// One statement for all of them (a decision writes two: reviewed and
	// approved): one round trip on Postgres, one statement step on SQLite.
	stmt, args := eventsInsert(evs)
	if _, err := t.exec(ctx, stmt, args...); err != nil {
		return fmt.Errorf("insert %d events: %w", len(evs), err)
	}
	t.notes = append(t.notes, t.d.notices(evs)...)
	return nil
}

// eventsInsert is the INSERT of evs (? placeholders) and its arguments.
func eventsInsert(evs []event) (string, []any) {
	var q strings.Builder
	q.WriteString(`INSERT INTO events (request_id, session_id, policy_revision, grant_id, type, state, actor, at) VALUES `)
	args := make([]any, 0, 8*len(evs))
	for i, ev := range evs {
		if i > 0 {
			q.WriteString(`, `)
		}
		q.WriteString(`(?, ?, ?, ?, ?, ?, ?, ?)`)
		args = append(args, nullString(string(ev.RequestID)), nullString(ev.SessionID), sql.NullInt64{Int64: ev.PolicyRevision, Valid: ev.PolicyRevision != 0},
			nullString(ev.GrantID), string(ev.Type), string(ev.State), ev.Actor, ev.At.UnixMilli())
	}
	return q.String(), args
}

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

// eventColumns are the columns of an approval.Event, as eventScanner reads
// them. Policy events come with neither a request, a session nor a grant id.
const eventColumns = `seq, COALESCE(request_id, ''), COALESCE(session_id, ''), COALESCE(grant_id, ''), type, state, actor, at`

// An eventScanner scans rows of eventColumns (and, for the change feed,
// the event's transaction id after them) into fields it keeps, through
// destinations made once for all the rows of a read: an event and its
// destinations made for each row were ≈ 1.5 KB per approval in the
// audit trail's and the gate's feed reads on Postgres (pgalloc43).
type eventScanner struct {
	ev   approval.Event
	at   int64
	tx   string // the feed's transaction id (dialect.feedQuery), when read
	dest []any
}

// newEventScanner returns a scanner of eventColumns, followed by the
// feed's transaction id when feed is true.
func newEventScanner(feed bool) *eventScanner {
	s := new(eventScanner)
	s.dest = []any{&s.ev.Seq, &s.ev.RequestID, &s.ev.SessionID, &s.ev.GrantID, &s.ev.Type, &s.ev.State, &s.ev.Actor, &s.at}
	if feed {
		s.dest = append(s.dest, &s.tx)
	}
	return s
}

// scan reads the current row of rows and returns its event.
func (s *eventScanner) scan(rows *sql.Rows) (approval.Event, error) {
	s.ev, s.at, s.tx = approval.Event{}, 0, ""
	err := rows.Scan(s.dest...)
	ev := s.ev
	ev.At = time.UnixMilli(s.at).UTC()
	return ev, err
}

// pos returns the feed position of the event scan read last.
func (s *eventScanner) pos() (store.Cursor, error) {
	tx, err := strconv.ParseUint(s.tx, 10, 64)
	if err != nil {
		return store.Cursor{}, fmt.Errorf("event %d: transaction id %q: %w", s.ev.Seq, s.tx, err)
	}
	return store.Cursor{Seq: s.ev.Seq, Tx: tx}, nil
}

// Events returns at most limit (0 means 100) events with Seq > after, in Seq
// order, as committed so far. On Postgres a later commit may still add an
// event with a lower Seq than one returned: follow the log with Feed.
func (db *DB) Events(ctx context.Context, after int64, limit int) ([]approval.Event, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	rows, err := db.query(ctx, `SELECT `+eventColumns+` FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	evs, err := collect(rows, err, newEventScanner(false).scan)
	if err != nil {
		return nil, db.wrap("list events", err)
	}
	return evs, nil
}

// Feed returns at most limit (0 means 100) events after the cursor in feed
// order and the cursor of the last one: see store.Store.Feed. The dialect
// says what is safe to return (dialect.feedQuery).
func (db *DB) Feed(ctx context.Context, after store.Cursor, limit int) ([]approval.Event, store.Cursor, error) {
	q, args := db.d.feedQuery(eventColumns, after, feedLimit(limit))
	rows, err := db.query(ctx, q, args...)
	// The events themselves, not feedEvents copied out of collectFeed's.
	s := newEventScanner(true)
	end := after
	evs, err := collect(rows, err, func(rows *sql.Rows) (approval.Event, error) {
		ev, err := s.scan(rows)
		if err == nil {
			end, err = s.pos()
		}
		return ev, err
	})
	if err != nil {
		return nil, after, db.wrap("read change feed", err)
	}
	return evs, end, nil
}

// FeedEntries is Feed with the position of each event: at most limit (0
// means 100) events after the cursor in feed order, each with the cursor a
// reader passes back to resume after it. The live event stream reads it,
// so every event it sends carries its own resumable position.
func (db *DB) FeedEntries(ctx context.Context, after store.Cursor, limit int) ([]store.FeedEntry, error) {
	q, args := db.d.feedQuery(eventColumns, after, feedLimit(limit))
	rows, err := db.query(ctx, q, args...)
	fevs, err := collectFeed(rows, err)
	if err != nil {
		return nil, db.wrap("read change feed", err)
	}
	out := make([]store.FeedEntry, len(fevs))
	for i, fe := range fevs {
		out[i] = store.FeedEntry{Event: fe.Event, Cursor: fe.pos}
	}
	return out, nil
}

// A feedEvent is an event of the change feed with its position.
type feedEvent struct {
	approval.Event
	pos store.Cursor
}

func feedLimit(limit int) int {
	if limit <= 0 {
		return defaultLimit
	}
	return limit
}

// collectFeed scans the rows of a dialect.feedQuery.
func collectFeed(rows *sql.Rows, err error) ([]feedEvent, error) {
	s := newEventScanner(true)
	return collect(rows, err, func(rows *sql.Rows) (feedEvent, error) {
		ev, err := s.scan(rows)
		if err != nil {
			return feedEvent{}, err
		}
		pos, err := s.pos()
		return feedEvent{Event: ev, pos: pos}, err
	})
}

// feedEvents returns the events of fevs.
func feedEvents(fevs []feedEvent) []approval.Event {
	evs := make([]approval.Event, len(fevs))
	for i, fe := range fevs {
		evs[i] = fe.Event
	}
	return evs
}

// feedEnd returns the position of the last of fevs, or after when empty.
func feedEnd(fevs []feedEvent, after store.Cursor) store.Cursor {
	if len(fevs) == 0 {
		return after
	}
	return fevs[len(fevs)-1].pos
}

// FeedEnd returns the cursor of the last event Feed can return now: a
// reader starting there sees every event that commits from now on, and
// none that Feed could already return. On Postgres an event becomes
// returnable only once every older transaction of the cluster (any
// database) has ended (feedSafe), so while one is open, events that
// committed just before FeedEnd may still come after it: a reader may see
// a few events from just before its start, never miss one after it.
func (db *DB) FeedEnd(ctx context.Context) (store.Cursor, error) {
	var (
		tx string
		c  store.Cursor
	)
	err := db.queryRow(ctx, db.d.feedEndQuery()).Scan(&tx, &c.Seq)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.Cursor{}, nil
	case err != nil:
		return store.Cursor{}, db.wrap("read change feed end", err)
	}
	if c.Tx, err = strconv.ParseUint(tx, 10, 64); err != nil {
		return store.Cursor{}, fmt.Errorf("read change feed end: transaction id %q: %w", tx, err)
	}
	return c, nil
}
