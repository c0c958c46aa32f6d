package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"toolgate/internal/store"
)

// EventsMissed is the type of the notice an event stream sends first when
// it resumes (since= or Last-Event-ID) at a position whose following
// events retention pruned before the stream read them: the client learns
// that it missed events (attack17; before, the stream went on with what
// was left, and nothing told the client). The notice's cursor (its SSE
// id) is the end of the pruned prefix, where the stream goes on; its
// after is the position the client gave. It is sent whether or not the
// pruned events were ones the caller could see (they are gone: the
// stream cannot tell).
const EventsMissed = "events_missed"

// prunedPast returns where a stream resumed at c starts, and the end of
// the pruned prefix when retention pruned events after c (else the zero
// cursor): it starts at c itself either way; the notice moves it on.
// The zero cursor (0: the log from its start, what is kept) misses
// nothing.
func (s *Server) prunedPast(ctx context.Context, c store.Cursor) (store.Cursor, store.Cursor, error) {
	p, ok := s.events.(prunedLog)
	if !ok || c == (store.Cursor{}) {
		// 0 asks for the log from its start: what is kept.
		return c, store.Cursor{}, nil
	}
	through, err := p.PrunedThrough(ctx)
	if err != nil {
		return c, store.Cursor{}, fmt.Errorf("read the pruned prefix of the change feed: %w", err)
	}
	if !c.Before(through) {
		return c, store.Cursor{}, nil
	}
	return c, through, nil
}

// missedBefore returns the end of the pruned prefix when a read of the
// change feed after since that returned es missed events retention pruned
// (else the zero cursor): since lies before the pruned prefix's end, and
// the read returned no event at or before it. The prefix is read after
// es, so a prune that came after the read (es then holds events at or
// before it) is not taken for a miss; one that came before is. This is
// what GET /v1/events reports as its page's missed, and what a stream
// that fell behind while retention ran (polish18; before, only a
// resumed stream's start was checked) sends as an events_missed notice
// between its events. The zero since misses nothing when fromStart (the
// log from its start: what is kept); otherwise (a stream that started at
// the end of an empty log) it is checked as any other.
func (s *Server) missedBefore(ctx context.Context, since store.Cursor, es []store.FeedEntry, fromStart bool) (store.Cursor, error) {
	p, ok := s.events.(prunedLog)
	if !ok || (fromStart && since == (store.Cursor{})) {
		return store.Cursor{}, nil
	}
	through, err := p.PrunedThrough(ctx)
	if err != nil {
		return store.Cursor{}, fmt.Errorf("read the pruned prefix of the change feed: %w", err)
	}
	if !since.Before(through) || (len(es) > 0 && !through.Before(es[0].Cursor)) {
		return store.Cursor{}, nil
	}
	return through, nil
}

// missedNotice is the EventsMissed notice of a read after after whose
// events through were pruned.
func (s *Server) missedNotice(after, through store.Cursor) *Event {
	return &Event{Cursor: through.String(), Type: EventsMissed, Actor: store.GatewayActor, At: s.now().UTC(), After: after.String()}
}

// writeMissed writes the EventsMissed notice of a stream resumed at after
// whose events through were pruned.
func (s *Server) writeMissed(w http.ResponseWriter, after, through store.Cursor) error {
	return writeNotice(w, s.missedNotice(after, through))
}

// writeNotice writes an EventsMissed notice as one SSE event.
func writeNotice(w io.Writer, ev *Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	//nolint:gosec // G705: a cursor and JSON into a text/event-stream answer, no HTML
	_, err = fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", ev.Cursor, EventsMissed, EscapeJSON(data))
	return err
}

// feedEnd returns where a stream without a position starts: the end of
// the change feed, or, when the log is empty because retention pruned
// all of it, the end of the pruned prefix (events pruned before the
// stream started were not missed by it). The pruned prefix is read first:
// a prune between the two reads then errs towards a notice, never
// towards silence. When both are zero the stream starts at the zero
// cursor, and events pruned after it are reported (polish19: a stream
// started on an empty log never checked).
func (s *Server) feedEnd(ctx context.Context) (store.Cursor, error) {
	var through store.Cursor
	if p, ok := s.events.(prunedLog); ok {
		var err error
		if through, err = p.PrunedThrough(ctx); err != nil {
			return store.Cursor{}, fmt.Errorf("read the pruned prefix of the change feed: %w", err)
		}
	}
	end, err := s.events.FeedEnd(ctx)
	if err != nil {
		return store.Cursor{}, fmt.Errorf("read the end of the change feed: %w", err)
	}
	if end.Before(through) {
		return through, nil
	}
	return end, nil
}
