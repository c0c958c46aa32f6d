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
)

// TestStreamResumedPastPrunedEventsSaysSo: an event stream resumed
// (since= or Last-Event-ID) at a position whose following events
// retention pruned starts with an events_missed notice (its id the end of
// the pruned prefix, its after the position given), then the events
// kept. Before, the resume was accepted (attack16) and the stream went on
// with what was left: the client never learned it had missed events.
// Resuming at the end of the pruned prefix, or with since=0 (the log
// from its start), misses nothing and says nothing.
func TestStreamResumedPastPrunedEventsSaysSo(t *testing.T) {
	// Request 1 is denied (terminal): its events are pruned. Request 2
	// (kept) stays pending: its events are kept. The client saw request
	// 1's first event only.
	const kept = "01900000-0000-7000-8000-000000000002"
	db, g, seen, through := prunedPastSeen(t)
	s := api.New(g, authenticate, &api.Options{Events: db, EventPoll: time.Hour})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(s.EndStreams)

	// stream returns the events of a stream opened with query and
	// lastID, up to and with request 2's first event: "id type data".
	stream := func(query, lastID string) []string {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/events/stream"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer bob-tok")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %q %q: %d", query, lastID, resp.StatusCode)
		}
		var got []string
		var id, typ, data string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if typ != "" {
					got = append(got, id+" "+typ+" "+data)
					if strings.Contains(data, kept) {
						return got
					}
				}
				id, typ, data = "", "", ""
			case strings.HasPrefix(line, "id: "):
				id = line[len("id: "):]
			case strings.HasPrefix(line, "event: "):
				typ = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
		t.Fatalf("stream %q %q ended before request 2's event: %q (%v)", query, lastID, got, sc.Err())
		return nil
	}
	for _, c := range []struct{ query, lastID string }{{"?since=" + seen.String(), ""}, {"", seen.String()}} {
		got := stream(c.query, c.lastID)
		if len(got) < 2 || !strings.HasPrefix(got[0], through.String()+" "+api.EventsMissed+" ") {
			t.Errorf("resumed at %s (pruned through %s): events %q, want an %s notice first", seen, through, got, api.EventsMissed)
			continue
		}
		var ev api.Event
		if err := json.Unmarshal([]byte(strings.SplitN(got[0], " ", 3)[2]), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != api.EventsMissed || ev.After != seen.String() || ev.Cursor != through.String() {
			t.Errorf("notice %+v, want type %s, after %s, cursor %s", ev, api.EventsMissed, seen, through)
		}
		for _, e := range got[1:] {
			if strings.Contains(e, api.EventsMissed) {
				t.Errorf("a second notice: %q", got)
			}
		}
	}
	for _, c := range []struct{ query, lastID string }{{"?since=0", ""}, {"", through.String()}} {
		if got := stream(c.query, c.lastID); strings.Contains(strings.Join(got, "\n"), api.EventsMissed) {
			t.Errorf("stream %q %q missed nothing, got %q", c.query, c.lastID, got)
		}
	}
}
