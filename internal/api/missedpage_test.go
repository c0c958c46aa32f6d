package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
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

// TestEventPagePastPrunedEventsSaysSo is polish18's item 4: GET
// /v1/events?since= at a position whose following events retention
// pruned answered the kept events and said nothing; the page now carries
// the stream's events_missed notice in "missed" (after the since given,
// cursor the end of the pruned prefix). since at the end of the pruned
// prefix, or 0, misses nothing and has no "missed". A page whose every
// event after since was pruned moves next past the pruned prefix, so the
// next page does not report the same miss again.
func TestEventPagePastPrunedEventsSaysSo(t *testing.T) {
	db, g, seen, through := prunedPastSeen(t)
	h := api.New(g, authenticate, &api.Options{Events: db})
	page := func(since string) api.EventPage {
		t.Helper()
		a := send(t, h, "GET", "/v1/events?since="+since, "bob-tok", "")
		if a.status != http.StatusOK {
			t.Fatalf("GET /v1/events?since=%s = %d %s", since, a.status, a.body)
		}
		return decodeAs[api.EventPage](t, a)
	}
	p := page(seen.String())
	if p.Missed == nil {
		t.Fatalf("page after %s (pruned through %s): no missed notice: %+v", seen, through, p)
	}
	if m := p.Missed; m.Type != api.EventsMissed || m.After != seen.String() || m.Cursor != through.String() || m.Actor == "" {
		t.Errorf("missed %+v, want type %s, after %s, cursor %s", m, api.EventsMissed, seen, through)
	}
	if len(p.Events) == 0 || !through.Before(mustCursor(t, p.Events[0].Cursor)) {
		t.Errorf("events %+v, want the kept ones after %s", p.Events, through)
	}
	for _, since := range []string{through.String(), "0"} {
		if p := page(since); p.Missed != nil {
			t.Errorf("page after %s: missed %+v, want none", since, p.Missed)
		}
	}
	// Prune what is left, keeping nothing after seen: the page reads no
	// event, says what was missed, and next moves past it.
	pruneAll(t, db, g)
	through2, err := db.PrunedThrough(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p = page(seen.String())
	if p.Missed == nil || p.Missed.Cursor != through2.String() || p.Next != through2.String() {
		t.Fatalf("page after %s with everything pruned through %s: %+v (missed %+v)", seen, through2, p, p.Missed)
	}
	if p := page(p.Next); p.Missed != nil {
		t.Errorf("the page after next %s reports the miss again: %+v", p.Next, p.Missed)
	}
}

// TestStreamBehindPrunedEventsSaysSo: a stream checked for pruned events
// only where it started; one that fell behind while retention pruned the
// events it had not read yet went on with what was left, silently. It now
// sends an events_missed notice (after its position, cursor the end of the
// pruned prefix) before the kept events.
func TestStreamBehindPrunedEventsSaysSo(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	ids := []approval.ID{"01900000-0000-7000-8000-000000000011", "01900000-0000-7000-8000-000000000012", "01900000-0000-7000-8000-000000000013"}
	addRequest(t, db, g, ids[0], true) // denied: prunable
	es, err := db.FeedEntries(t.Context(), store.Cursor{}, 10)
	if err != nil || len(es) < 2 {
		t.Fatalf("events %+v (%v)", es, err)
	}
	last := es[len(es)-1].Cursor // the stream reads up to here first
	var wake api.Broadcast
	s := api.New(g, authenticate, &api.Options{Events: db, EventsChanged: wake.Wait, EventPoll: time.Hour, Heartbeat: time.Hour})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(s.EndStreams)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/events/stream?since="+es[0].Cursor.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer bob-tok")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	// next returns the stream's next event as "id type", and its data.
	next := func() (string, string) {
		t.Helper()
		var id, typ, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && typ != "":
				return id + " " + typ, data
			case line == "":
				id = ""
			case strings.HasPrefix(line, "id: "):
				id = line[len("id: "):]
			case strings.HasPrefix(line, "event: "):
				typ = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
		t.Fatalf("the stream ended: %v", sc.Err())
		return "", ""
	}
	// The stream's first read sends request 1's events after since; once
	// the last arrived, that read is over and the stream waits for a wake.
	for {
		if ev, _ := next(); strings.HasPrefix(ev, last.String()+" ") {
			break
		}
	}
	// Behind its back: request 2 ends (prunable), request 3 stays pending
	// (kept), and retention prunes everything before request 3.
	addRequest(t, db, g, ids[1], true)
	addRequest(t, db, g, ids[2], false)
	if _, err := db.Prune(t.Context(), store.Retention{Events: time.Millisecond}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	through, err := db.PrunedThrough(t.Context())
	if err != nil || !last.Before(through) {
		t.Fatalf("pruned through %s (%v), want past %s", through, err, last)
	}
	wake.Notify()
	ev, data := next()
	if ev != through.String()+" "+api.EventsMissed {
		t.Fatalf("after the prune the stream sent %q %s, want an %s notice with id %s", ev, data, api.EventsMissed, through)
	}
	var notice api.Event
	if err := json.Unmarshal([]byte(data), &notice); err != nil {
		t.Fatal(err)
	}
	if notice.After != last.String() || notice.Cursor != through.String() {
		t.Errorf("notice %+v, want after %s, cursor %s", notice, last, through)
	}
	if ev, data := next(); !strings.Contains(data, string(ids[2])) || strings.Contains(ev, api.EventsMissed) {
		t.Errorf("after the notice: %q %s, want request 3's event", ev, data)
	}
}

// addRequest writes a pending request of tenant acme (its requested
// event) and, when deny, bob's denial (its terminal events).
func addRequest(t *testing.T, db *sqlstore.DB, g *gate.Gate, id approval.ID, deny bool) {
	t.Helper()
	r := pending(string(id))
	r.Tenant = "acme"
	r.CreatedAt = time.Now().UTC()
	r.ExpiresAt = r.CreatedAt.Add(time.Hour)
	if err := db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if deny {
		if _, err := g.Review(t.Context(), id, approval.Principal{ID: "bob", Kind: "human"}, approval.VerdictDeny, "no", ""); err != nil {
			t.Fatal(err)
		}
	}
}

// prunedPastSeen opens a SQLite store with deniedThenPending's requests
// (through a gate that allows everything) and prunes the events of the
// denied request 1. It returns the cursor of request 1's first event (the
// position a client saw) and the end of the pruned prefix, which lies
// past it.
func prunedPastSeen(t *testing.T) (db *sqlstore.DB, g *gate.Gate, seen, through store.Cursor) {
	t.Helper()
	db = sqlitetest.Open(t)
	g = gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	seen = deniedThenPending(t, db, g)[0].Cursor
	if _, err := db.Prune(t.Context(), store.Retention{Events: time.Millisecond}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	through, err := db.PrunedThrough(t.Context())
	if err != nil || !seen.Before(through) {
		t.Fatalf("pruned through %s (%v), want past %s", through, err, seen)
	}
	return db, g, seen, through
}

// pruneAll denies request 2 of deniedThenPending and prunes every event.
func pruneAll(t *testing.T, db *sqlstore.DB, g *gate.Gate) {
	t.Helper()
	if _, err := g.Review(t.Context(), "01900000-0000-7000-8000-000000000002", approval.Principal{ID: "bob", Kind: "human"}, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Prune(t.Context(), store.Retention{Events: time.Millisecond}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}

func mustCursor(t *testing.T, s string) store.Cursor {
	t.Helper()
	c, err := store.ParseCursor(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
