package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"toolgate/internal/api"
)

// TestEventPageRefusesAForeignCursor: GET /v1/events (one page) refuses a
// since= that is no position in this gateway's event log with the same
// 422 and message as the stream (polish16; before, the page answered 200
// with no events and a next repeating the foreign cursor, so a poller
// never noticed it had switched stores). A cursor of this log, 0 and none
// still read a page.
func TestEventPageRefusesAForeignCursor(t *testing.T) {
	e := newEventEnv(t)
	e.create(t, 1, "acme")
	e.create(t, 2, "acme") // events 0.1 and 0.2
	srv := httptest.NewServer(e.admin)
	t.Cleanup(srv.Close)
	t.Cleanup(e.admin.EndStreams)

	for _, since := range []string{"0.3", "7312.2", "0.99"} {
		page := send(t, e.admin, "GET", "/v1/events?since="+since, "bob-tok", "")
		req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/events/stream?since="+since, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer bob-tok")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var stream bytes.Buffer
		_, _ = stream.ReadFrom(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("stream since=%s: %d %s, want 422", since, resp.StatusCode, stream.Bytes())
		}
		if page.status != http.StatusUnprocessableEntity {
			t.Errorf("page since=%s: %d %s, want 422 as the stream", since, page.status, page.body)
			continue
		}
		var pe, se api.ErrorBody
		if err := json.Unmarshal(page.body, &pe); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(stream.Bytes(), &se); err != nil {
			t.Fatal(err)
		}
		if pe != se {
			t.Errorf("page since=%s: %+v; want the stream's %+v", since, pe, se)
		}
	}
	for _, since := range []string{"", "0", "0.1", "0.2"} {
		if a := send(t, e.admin, "GET", "/v1/events?since="+since, "bob-tok", ""); a.status != http.StatusOK {
			t.Errorf("page since=%q (this log): %d %s, want 200", since, a.status, a.body)
		}
	}
}
