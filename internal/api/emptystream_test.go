package api_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// endHook is the real SQLite store whose FeedEnd runs then once the end
// was read: what happens between a stream's start and its first read.
type endHook struct {
	*sqlstore.DB
	then func()
}

func (h *endHook) FeedEnd(ctx context.Context) (store.Cursor, error) {
	c, err := h.DB.FeedEnd(ctx)
	if h.then != nil {
		h.then()
		h.then = nil
	}
	return c, err
}

// TestStreamFromEmptyLogReportsPrunedEvents is polish19's item 3: a
// stream started without a position on an empty log sits at the zero
// cursor, which the missed-events check took for "the log from its
// start" (what is kept, missing nothing): events written and pruned
// before it read them were skipped without a word. It now sends the
// events_missed notice (after 0.0, cursor the end of the pruned prefix)
// before the kept events, as a stream at any other position does; and a
// stream started on a log that retention emptied starts past the pruned
// prefix, with no notice for what was pruned before it.
func TestStreamFromEmptyLogReportsPrunedEvents(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	log := &endHook{DB: db}
	var wake api.Broadcast
	s := api.New(g, authenticate, &api.Options{Events: log, EventsChanged: wake.Wait, EventPoll: time.Hour, Heartbeat: time.Hour})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(s.EndStreams)
	ids := []approval.ID{"01900000-0000-7000-8000-000000000021", "01900000-0000-7000-8000-000000000022"}
	// After the stream read the (empty) end: request 1 ends (prunable),
	// request 2 stays pending (kept), retention prunes request 1's events.
	log.then = func() {
		addRequest(t, db, g, ids[0], true)
		addRequest(t, db, g, ids[1], false)
		if _, err := db.Prune(t.Context(), store.Retention{Events: time.Millisecond}, time.Now().Add(time.Hour)); err != nil {
			t.Error(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	liveResp, live := openStream(t, ctx, srv, "/v1/events/stream", "admin-tok")
	defer liveResp.Body.Close()
	through, err := db.PrunedThrough(t.Context())
	if err != nil || through == (store.Cursor{}) {
		t.Fatalf("pruned through %s (%v), want past 0", through, err)
	}
	ev, ok := live.next()
	if !ok || ev.typ != api.EventsMissed || ev.id != through.String() || ev.data.After != "0.0" {
		t.Fatalf("first streamed event = %+v, %v; want an %s notice after 0.0 with id %s", ev, ok, api.EventsMissed, through)
	}
	if ev, ok := live.next(); !ok || ev.data.ApprovalID != string(ids[1]) {
		t.Fatalf("after the notice: %+v, %v; want request 2's event", ev, ok)
	}

	// Retention empties the log; a stream started now starts past what
	// was pruned: its first event is the next new one, no notice.
	if _, err := g.Review(t.Context(), ids[1], approval.Principal{ID: "bob", Kind: "human"}, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Prune(t.Context(), store.Retention{Events: time.Millisecond}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if end, err := db.FeedEnd(t.Context()); err != nil || end != (store.Cursor{}) {
		t.Fatalf("feed end after pruning everything = %s (%v), want an empty log", end, err)
	}
	lateResp, late := openStream(t, ctx, srv, "/v1/events/stream", "admin-tok")
	defer lateResp.Body.Close()
	fresh := approval.ID("01900000-0000-7000-8000-000000000023")
	addRequest(t, db, g, fresh, false)
	wake.Notify()
	if ev, ok := late.next(); !ok || ev.data.ApprovalID != string(fresh) || strings.Contains(ev.typ, api.EventsMissed) {
		t.Fatalf("stream started on an emptied log sent %+v, %v first; want request 3's event", ev, ok)
	}
}
