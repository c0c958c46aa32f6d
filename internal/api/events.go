package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// EventLog is what the event routes read: the store's change feed
// (store.Store.Feed), whose order is final, so a reader that resumes at a
// cursor misses no event that commits late (on Postgres an event with a
// lower seq can commit after one with a higher seq; paging by seq would
// skip it). *sqlstore.DB implements it. Methods must be safe for
// concurrent use.
type EventLog interface {
	// FeedEntries returns at most limit events after the cursor in feed
	// order, each with its own cursor (sqlstore.DB.FeedEntries).
	FeedEntries(ctx context.Context, after store.Cursor, limit int) ([]store.FeedEntry, error)
	// FeedEnd returns the cursor of the last event the feed can return
	// now (store.Store.FeedEnd).
	FeedEnd(ctx context.Context) (store.Cursor, error)
}

// Event is the JSON form of one event of the log, as GET /v1/events and
// the stream send it. Type is requested, reviewed, approved, denied,
// expired, cancelled, consumed, invalidated or dispatched for approvals;
// session_created, child_created, session_policy_changed or
// session_revoked for sessions; policy_changed for the deployment policy.
// State is the approval's state as that event committed it.
type Event struct {
	// Cursor is the event's position in the change feed, "<tx>.<seq>"
	// (store.Cursor): pass it as since= (or Last-Event-ID) to read the
	// events after this one. It is the stream's SSE id.
	Cursor     string    `json:"cursor"`
	Seq        int64     `json:"seq"`
	Type       string    `json:"type"`
	State      string    `json:"state,omitempty"`
	Actor      string    `json:"actor,omitempty"`
	At         time.Time `json:"at"`
	ApprovalID string    `json:"approval_id,omitempty"`
	SessionID  string    `json:"session_id,omitempty"`
	// GrantID names the grant of a grant event (grant_created, grant_used,
	// grant_revoked).
	GrantID string `json:"grant_id,omitempty"`
	// After is, on an events_missed notice (EventsMissed), the position
	// the stream resumed at: the events after it through Cursor were
	// pruned by retention before this stream read them.
	After string `json:"after,omitempty"`
	// Approval is the approval the event is about, as it is now (its state
	// may be newer than the event's); approval events only.
	Approval *Approval `json:"approval,omitempty"`
}

// EventPage is the body of GET /v1/events. Next is the cursor to pass as
// since= for the next page: the position of the last event read, which may
// be an event the caller may not see (since itself when nothing was read).
// More is true when the log may hold more events after Next (the page read
// as many as it could).
type EventPage struct {
	Events []Event `json:"events"`
	Next   string  `json:"next"`
	More   bool    `json:"more"`
	// Missed is set when retention pruned events after since before this
	// page read them: the same events_missed notice ([EventsMissed]) the
	// stream sends, its after since, its cursor the end of the pruned
	// prefix. The page's events are those kept after it. Absent when
	// nothing was missed, and for since 0 (the log from its start: what is
	// kept).
	Missed *Event `json:"missed,omitempty"`
}

// Defaults of the event routes.
const (
	defaultEventLimit     = 100
	defaultEventPoll      = 2 * time.Second
	defaultEventHeartbeat = 15 * time.Second
	// eventRetry is the reconnection delay the stream asks EventSource
	// clients to use (the SSE "retry:" field).
	eventRetry = 2 * time.Second
)

// A Broadcast wakes every waiter at once, without data: waiters re-read
// the event log. The zero value is ready to use; it is safe for concurrent
// use. cmd notifies it from the store's change feed and passes Wait as
// [Options.EventsChanged].
type Broadcast struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu: closed and replaced by Notify
}

// Wait returns a channel closed at the next Notify. Take it before reading
// what it guards, so no change between the read and the wait is missed.
func (b *Broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Notify wakes every waiter.
func (b *Broadcast) Notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// routeEvents mounts the event routes.
func (s *Server) routeEvents() {
	s.mux.Handle("GET /v1/events", s.handle(s.require(readRoles, s.listEvents)))
	s.mux.Handle("GET /v1/events/stream", s.handle(s.require(readRoles, func(w http.ResponseWriter, r *http.Request, c caller) error {
		return s.streamEvents(w, r, Caller{Principal: c.principal, Roles: c.roles})
	})))
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, c caller) error {
	q := r.URL.Query()
	// The page checks since as the stream does (resumeCursor): a cursor
	// from another store, or past the end of this log, is 422 rather than
	// an empty page whose next repeats it (or the whole log replayed).
	var since store.Cursor
	var err error
	if s.events != nil {
		since, err = s.resumeCursor(r.Context(), q.Get("since"), "since")
	} else {
		since, err = parseCursor(q.Get("since"), "since") // EventPage answers 404
	}
	if err != nil {
		return err
	}
	limit := defaultEventLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return invalid("limit %q: want a number from 1 to %d", v, maxLimit)
		}
		limit = n
	}
	page, err := s.EventPage(r.Context(), Caller{Principal: c.principal, Roles: c.roles}, since, limit)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, page)
	return nil
}

// parseCursor parses a position in the change feed: "<tx>.<seq>" as an
// event's cursor or a page's next reads it, or "" or "0" for the start of
// the log. A plain sequence number above 0 is refused: in feed order "the
// events after seq N" is not well-defined (on Postgres an event with a
// lower seq can commit after N), so it would skip or repeat events.
func parseCursor(v, what string) (store.Cursor, error) {
	if v == "" || v == "0" {
		return store.Cursor{}, nil
	}
	c, err := store.ParseCursor(v)
	if err != nil {
		if n, nerr := strconv.ParseInt(v, 10, 64); nerr == nil && n > 0 {
			return store.Cursor{}, invalid("%s %q: a plain sequence number cannot say where to resume (on Postgres an event with a lower seq can commit later); pass an event's cursor or a page's next (\"<tx>.<seq>\"), or 0 for the start of the log", what, v)
		}
		return store.Cursor{}, invalid("%s %q: want a change-feed cursor \"<tx>.<seq>\" (an event's cursor or a page's next), or 0 for the start of the log", what, v)
	}
	return c, nil
}

// prunedLog is the optional part of an EventLog that says where the
// prefix of the log retention deleted ends (sqlstore.DB.PrunedThrough).
type prunedLog interface {
	PrunedThrough(ctx context.Context) (store.Cursor, error)
}

// resumeCursor parses v (parseCursor) and checks that it is a position in
// this store's change feed: the zero cursor, a cursor naming an event of
// the log, or one at or before the end of the prefix retention pruned (or
// before the oldest event kept): its event was pruned, and the reader
// resumes at the oldest kept. A cursor past the end
// of the log, one naming no event where the log has them, or one of the
// other kind of store (SQLite's cursors all have transaction 0,
// Postgres's none) is 422: it comes from another store (or a log that was
// reset), and resuming there would silently skip or replay events
// (newuser4).
func (s *Server) resumeCursor(ctx context.Context, v, what string) (store.Cursor, error) {
	c, err := parseCursor(v, what)
	if err != nil || c == (store.Cursor{}) {
		return c, err
	}
	end, err := s.events.FeedEnd(ctx)
	if err != nil {
		return c, fmt.Errorf("read the end of the change feed: %w", err)
	}
	var pruned store.Cursor
	if p, ok := s.events.(prunedLog); ok {
		if pruned, err = p.PrunedThrough(ctx); err != nil {
			return c, fmt.Errorf("read the pruned prefix of the change feed: %w", err)
		}
	}
	if end.Before(pruned) {
		end = pruned // every event was pruned: the log ended there
	}
	foreign := func(why string) error {
		return invalid("%s %q is not a position in this gateway's event log (%s; the log ends at %s): it comes from another store, or the log was reset; pass 0 to read the log from its start, or leave it out for new events only", what, v, why, end)
	}
	switch {
	case end.Before(c):
		return c, foreign("it is past the end of the log")
	case (c.Tx == 0) != (end.Tx == 0):
		return c, foreign("it is a cursor of the other kind of store, SQLite or Postgres")
	case !pruned.Before(c):
		return c, nil // its event was pruned by retention
	}
	first, err := s.events.FeedEntries(ctx, store.Cursor{}, 1)
	if err != nil {
		return c, fmt.Errorf("read the start of the change feed: %w", err)
	}
	if len(first) == 0 || c.Before(first[0].Cursor) {
		// Before the oldest event kept: pruned since (retention).
		return c, nil
	}
	if c.Seq > 0 {
		at, err := s.events.FeedEntries(ctx, store.Cursor{Tx: c.Tx, Seq: c.Seq - 1}, 1)
		if err != nil {
			return c, fmt.Errorf("read the change feed at %s: %w", c, err)
		}
		if len(at) == 1 && at[0].Cursor == c {
			return c, nil
		}
	}
	if p, ok := s.events.(prunedLog); ok {
		// Retention may have pruned c's event since the reads above (it
		// was kept when first was read): at or before the pruned prefix
		// now, c is a cursor this log gave out (attack16).
		now, err := p.PrunedThrough(ctx)
		if err != nil {
			return c, fmt.Errorf("read the pruned prefix of the change feed: %w", err)
		}
		if !now.Before(c) {
			return c, nil
		}
	}
	return c, foreign("no event of the log has it")
}

// EventPage reads up to limit events of the change feed after since and
// returns those c may see (see the package doc, "Events"). It reads the
// log whatever c may see, so Next always advances past what was read.
func (s *Server) EventPage(ctx context.Context, c Caller, since store.Cursor, limit int) (EventPage, error) {
	if !c.CanRead() {
		return EventPage{}, forbidden(readRoles)
	}
	if s.events == nil {
		return EventPage{}, &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: "this server keeps no event log"}
	}
	return s.eventPage(ctx, c, since, limit, true)
}

// eventPage is EventPage. fromStart says that a zero since is the log
// from its start (what is kept, which misses nothing), as GET /v1/events
// and a stream asked for since 0 read it first; otherwise a zero since is
// a position like any other (a stream that started at the end of an
// empty log): events pruned after it were missed.
func (s *Server) eventPage(ctx context.Context, c Caller, since store.Cursor, limit int, fromStart bool) (EventPage, error) {
	es, err := s.events.FeedEntries(ctx, since, limit)
	if err != nil {
		return EventPage{}, fmt.Errorf("read events after %s: %w", since, err)
	}
	page := EventPage{Events: []Event{}, Next: since.String(), More: len(es) == limit}
	through, err := s.missedBefore(ctx, since, es, fromStart)
	if err != nil {
		return EventPage{}, err
	}
	if through != (store.Cursor{}) {
		page.Missed = s.missedNotice(since, through)
		page.Next = through.String() // nothing read: resume past the pruned prefix
	}
	f := eventFilter{s: s, c: c.inner(), approvals: map[approval.ID]*Approval{}, sessions: map[string]bool{}, grants: map[string]bool{}}
	for _, e := range es {
		page.Next = e.Cursor.String()
		out, ok, err := f.visible(ctx, e.Event)
		if err != nil {
			return EventPage{}, err
		}
		if ok {
			out.Cursor = page.Next
			page.Events = append(page.Events, out)
		}
	}
	return page, nil
}

// eventFilter decides which events one caller may see, remembering the
// approvals and sessions it looked up.
type eventFilter struct {
	s         *Server
	c         caller
	approvals map[approval.ID]*Approval // nil: not visible
	sessions  map[string]bool
	grants    map[string]bool
}

// visible returns the wire form of ev and whether f's caller may see it:
// an approval event when it may see the approval (its tenant); a session
// event when it may see the session (its tenant; a caller without a
// tenant sees every session); a grant event when it may see the grant
// (its tenant, as GET /v1/grants; a grant that is gone, or a server
// without grants, shows a caller with a tenant nothing); a policy event
// always (the deployment policy is readable by every reader).
func (f *eventFilter) visible(ctx context.Context, ev approval.Event) (Event, bool, error) {
	out := Event{Seq: ev.Seq, Type: string(ev.Type), State: string(ev.State), Actor: ev.Actor, At: utc(ev.At),
		ApprovalID: string(ev.RequestID), SessionID: ev.SessionID, GrantID: ev.GrantID}
	switch {
	case ev.GrantID != "":
		ok, seen := f.grants[ev.GrantID]
		if !seen {
			var err error
			if ok, err = f.grantVisible(ctx, ev.GrantID); err != nil {
				return Event{}, false, err
			}
			f.grants[ev.GrantID] = ok
		}
		return out, ok, nil
	case ev.RequestID != "":
		a, seen := f.approvals[ev.RequestID]
		if !seen {
			r, err := f.s.approvals.Get(ctx, ev.RequestID)
			switch {
			case err == nil && visible(f.c, r):
				w := fromRequest(r)
				a = &w
			case err == nil:
			case errors.Is(err, store.ErrNotFound):
			default:
				return Event{}, false, fmt.Errorf("read approval %s of event %d: %w", ev.RequestID, ev.Seq, err)
			}
			f.approvals[ev.RequestID] = a
		}
		out.Approval = a
		return out, a != nil, nil
	case ev.SessionID != "":
		ok, seen := f.sessions[ev.SessionID]
		if !seen {
			var err error
			if ok, err = f.sessionVisible(ctx, session.ID(ev.SessionID)); err != nil {
				return Event{}, false, err
			}
			f.sessions[ev.SessionID] = ok
		}
		return out, ok, nil
	}
	return out, true, nil
}

func (f *eventFilter) grantVisible(ctx context.Context, id string) (bool, error) {
	if f.c.principal.Tenant == "" {
		return true, nil
	}
	if f.s.grants == nil {
		return false, nil
	}
	g, err := f.s.grants.GetGrant(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("read grant %s: %w", id, err)
	}
	return grantVisible(f.c, g), nil
}

func (f *eventFilter) sessionVisible(ctx context.Context, id session.ID) (bool, error) {
	if f.c.principal.Tenant == "" {
		return true, nil
	}
	if f.s.sessions == nil {
		return false, nil
	}
	ch, err := f.s.sessions.SessionChain(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("read session %s: %w", id, err)
	}
	return len(ch) > 0 && ch[0].Tenant == f.c.principal.Tenant, nil
}

// streamEvents serves the event stream to c as server-sent events until
// the client goes away or the server ends its streams (EndStreams). It
// reads the change feed: it starts after the Last-Event-ID header, else
// after ?since= (both a cursor, see parseCursor), else at the end of the
// feed (new events only). Each visible event is one SSE event: "id:" its
// cursor, "event:" its type, "data:" its JSON ([Event]) on one line.
// A comment line is sent every heartbeat so that proxies keep the
// connection open.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, c Caller) error {
	return s.ServeEventStream(w, r, c)
}

// ServeEventStream is GET /v1/events/stream for a caller authenticated by
// other means (the web inbox). It answers errors itself through the
// returned error only before the stream started (the caller writes them);
// once streaming it returns nil when the stream ends.
func (s *Server) ServeEventStream(w http.ResponseWriter, r *http.Request, c Caller) error {
	if !c.CanRead() {
		return forbidden(readRoles)
	}
	if s.events == nil {
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: "this server keeps no event log"}
	}
	ctx := r.Context()
	var cursor, missed store.Cursor
	// fromStart: the cursor is the zero one the client asked for (the
	// log from its start), until the first read.
	fromStart := false
	switch last, since := strings.TrimSpace(r.Header.Get("Last-Event-ID")), r.URL.Query().Get("since"); {
	case last != "":
		c, err := s.resumeCursor(ctx, last, "Last-Event-ID")
		if err != nil {
			return err
		}
		if cursor, missed, err = s.prunedPast(ctx, c); err != nil {
			return err
		}
		fromStart = cursor == store.Cursor{}
	case since != "":
		c, err := s.resumeCursor(ctx, since, "since")
		if err != nil {
			return err
		}
		if cursor, missed, err = s.prunedPast(ctx, c); err != nil {
			return err
		}
		fromStart = cursor == store.Cursor{}
	default:
		c, err := s.feedEnd(ctx)
		if err != nil {
			return err
		}
		cursor = c
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	//nolint:gosec // G705: numbers into a text/event-stream answer, no HTML
	if _, err := fmt.Fprintf(w, "retry: %d\n: stream after %s\n\n", eventRetry.Milliseconds(), cursor); err != nil {
		return nil
	}
	if missed != (store.Cursor{}) {
		if err := s.writeMissed(w, cursor, missed); err != nil {
			return nil
		}
		cursor = missed
	}
	if err := rc.Flush(); err != nil {
		return nil
	}
	poll := time.NewTicker(s.eventPoll)
	defer poll.Stop()
	beat := time.NewTicker(s.heartbeat)
	defer beat.Stop()
	for {
		var changed <-chan struct{}
		if s.eventsChanged != nil {
			changed = s.eventsChanged() // before reading: no change is missed
		}
		next, err := s.sendEvents(ctx, w, c, cursor, fromStart)
		switch {
		case err == nil:
			cursor, fromStart = next, false
		case ctx.Err() != nil, errors.Is(err, errWrite):
			return nil
		default:
			// The store may be unreachable: keep the stream, read again on
			// the next tick.
			s.log.WarnContext(ctx, "event stream: cannot read events; retrying", keyErr, err)
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.streamsDone:
			return nil
		case <-changed:
		case <-poll.C:
		case <-beat.C:
			if _, err := io.WriteString(w, ": hb\n\n"); err != nil {
				return nil
			}
		}
	}
}

// errWrite marks a failed write to the stream's client.
var errWrite = errors.New("write to the event stream failed")

// sendEvents writes every event after cursor that c may see and returns the
// new cursor (the position of the last event read). fromStart is
// eventPage's, for the first page.
func (s *Server) sendEvents(ctx context.Context, w http.ResponseWriter, c Caller, cursor store.Cursor, fromStart bool) (store.Cursor, error) {
	for {
		page, err := s.eventPage(ctx, c, cursor, defaultEventLimit, fromStart)
		if err != nil {
			return cursor, err
		}
		fromStart = false
		if page.Missed != nil {
			// Retention pruned events after cursor while this stream was
			// behind: say so, as a resumed stream does at its start.
			if err := writeNotice(w, page.Missed); err != nil {
				return cursor, errWrite
			}
		}
		var buf bytes.Buffer
		for _, ev := range page.Events {
			buf.Reset()
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(ev); err != nil {
				return cursor, fmt.Errorf("encode event %d: %w", ev.Seq, err)
			}
			data := EscapeJSON(bytes.TrimRight(buf.Bytes(), "\n"))
			if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", ev.Cursor, ev.Type, data); err != nil {
				return cursor, errWrite
			}
		}
		next, err := store.ParseCursor(page.Next)
		if err != nil {
			return cursor, err
		}
		var lastID string // the id the client saw last from this page
		switch {
		case len(page.Events) > 0:
			lastID = page.Events[len(page.Events)-1].Cursor
		case page.Missed != nil:
			lastID = page.Missed.Cursor
		}
		if next != cursor && lastID != page.Next {
			// Events the caller may not see were read last: move the
			// client's Last-Event-ID past them without an event.
			if _, err := fmt.Fprintf(w, "id: %s\n\n", page.Next); err != nil {
				return cursor, errWrite
			}
		}
		cursor = next
		if !page.More {
			return cursor, nil
		}
	}
}

// EndStreams ends every event stream this server is serving, and any
// started later: an HTTP server's graceful shutdown waits for handlers,
// and a stream never ends by itself. Call it when shutting down (e.g.
// from http.Server.RegisterOnShutdown). It is safe to call more than once.
func (s *Server) EndStreams() {
	s.endOnce.Do(func() { close(s.streamsDone) })
}

// EventsEnd returns the end of the change feed as a cursor string
// (store.Cursor; "" when the server keeps no event log): a page that reads
// it before its data can ask the stream for the events after it (?since=)
// and miss none.
func (s *Server) EventsEnd(ctx context.Context) (string, error) {
	if s.events == nil {
		return "", nil
	}
	c, err := s.events.FeedEnd(ctx)
	if err != nil {
		return "", err
	}
	return c.String(), nil
}
