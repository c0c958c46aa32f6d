package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// eventEnv is the admin API over a real gate and SQLite store, with the
// event routes on, and a Broadcast that the test notifies.
type eventEnv struct {
	db    *sqlstore.DB
	g     *gate.Gate
	admin *api.Server
	bc    *api.Broadcast
}

func newEventEnv(t *testing.T) *eventEnv {
	t.Helper()
	db := sqlitetest.Open(t)
	pol := &policy.Policy{Default: policy.Allow, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}}
	g := gate.New(db, pol, nil)
	bc := new(api.Broadcast)
	// A long poll: the stream test must see events through the broadcast.
	s := api.New(g, authenticate, &api.Options{Sessions: g, Events: db, EventsChanged: bc.Wait, EventPoll: time.Hour})
	return &eventEnv{db: db, g: g, admin: s, bc: bc}
}

// create stores a pending request of tenant with id n and returns its id.
func (e *eventEnv) create(t *testing.T, n int, tenant string) approval.ID {
	t.Helper()
	r := pending(fmt.Sprintf("01900000-0000-7000-8000-%012d", n))
	r.Tenant = tenant
	r.CreatedAt = time.Now().UTC()
	r.ExpiresAt = r.CreatedAt.Add(time.Hour)
	if err := e.db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// eventKeys lists "type approval_or_session" for each event.
func eventKeys(evs []api.Event) []string {
	var out []string
	for _, ev := range evs {
		subject := ev.ApprovalID
		if subject == "" {
			subject = "session"
		}
		if ev.ApprovalID != "" && (ev.Approval == nil || ev.Approval.ID != ev.ApprovalID) {
			subject += " (no approval attached)"
		}
		out = append(out, ev.Type+" "+subject)
	}
	return out
}

func TestEventsPageFiltersByTenantAndRole(t *testing.T) {
	e := newEventEnv(t)
	acme := e.create(t, 1, "acme")
	globex := e.create(t, 2, "globex")
	if _, err := e.g.Review(t.Context(), globex, approval.Principal{ID: "bob"}, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.g.CreateSession(t.Context(), approval.Principal{ID: "ci", Tenant: "acme"}, session.NewSession{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.g.CreateSession(t.Context(), approval.Principal{ID: "ci", Tenant: "globex"}, session.NewSession{}); err != nil {
		t.Fatal(err)
	}
	a1, g1 := string(acme), string(globex)
	tests := []struct {
		token string
		want  []string
	}{
		{"admin-tok", []string{"requested " + a1, "requested " + g1, "reviewed " + g1, "denied " + g1, "session_created session", "session_created session"}},
		{"viewer-tok", []string{"requested " + a1, "requested " + g1, "reviewed " + g1, "denied " + g1, "session_created session", "session_created session"}},
		{"acme-tok", []string{"requested " + a1, "session_created session"}},
	}
	for _, tc := range tests {
		t.Run(tc.token, func(t *testing.T) {
			a := send(t, e.admin, "GET", "/v1/events?since=0", tc.token, "")
			if a.status != http.StatusOK {
				t.Fatalf("status %d %s", a.status, a.body)
			}
			page := decodeAs[api.EventPage](t, a)
			if diff := cmp.Diff(tc.want, eventKeys(page.Events)); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
			if page.Next != "0.6" || page.More {
				t.Errorf("next %q, more %v; want 0.6 (the cursor of the last event read, visible or not), false", page.Next, page.More)
			}
			for _, ev := range page.Events {
				if want := "0." + strconv.FormatInt(ev.Seq, 10); ev.Cursor != want {
					t.Errorf("event %d: cursor %q, want %q (SQLite: transaction 0)", ev.Seq, ev.Cursor, want)
				}
			}
		})
	}
	// The denial's event carries the approval as it is now.
	page := decodeAs[api.EventPage](t, send(t, e.admin, "GET", "/v1/events?since=0.3&limit=1", "bob-tok", ""))
	if len(page.Events) != 1 || page.Events[0].Type != "denied" || page.Events[0].State != "denied" ||
		page.Events[0].Approval.Reason != "no" || page.Events[0].Actor != "bob" || page.Next != "0.4" || !page.More {
		t.Errorf("since=0.3&limit=1 = %+v", page)
	}
}

func TestEventsPageErrors(t *testing.T) {
	e := newEventEnv(t)
	tests := []struct {
		name, path, token string
		status            int
	}{
		{"no token", "/v1/events", "", 401},
		{"host role", "/v1/events", "host-tok", 403},
		{"negative since", "/v1/events?since=-1", "bob-tok", 422},
		{"since not a cursor", "/v1/events?since=x", "bob-tok", 422},
		{"since a plain seq", "/v1/events?since=3", "bob-tok", 422},
		{"since a negative seq in a cursor", "/v1/events?since=0.-1", "bob-tok", 422},
		{"limit 0", "/v1/events?limit=0", "bob-tok", 422},
		{"limit too large", "/v1/events?limit=1001", "bob-tok", 422},
		{"stream host role", "/v1/events/stream", "host-tok", 403},
		{"stream bad Last-Event-ID", "/v1/events/stream", "bob-tok", 422},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, e.admin, "GET", tc.path, tc.token, "", "Last-Event-ID", "seven")
			if tc.name != "stream bad Last-Event-ID" {
				a = send(t, e.admin, "GET", tc.path, tc.token, "")
			}
			if a.status != tc.status {
				t.Errorf("status %d %s, want %d", a.status, a.body, tc.status)
			}
		})
	}
	// Without an event log the routes are 404.
	bare := api.New(e.g, authenticate, nil)
	if a := send(t, bare, "GET", "/v1/events", "bob-tok", ""); a.status != 404 {
		t.Errorf("no event log: status %d, want 404", a.status)
	}
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	id, typ string
	data    api.Event
}

// sseReader reads SSE events (those with data) from a stream body.
type sseReader struct {
	t  *testing.T
	sc *bufio.Scanner
}

func (r *sseReader) next() (sseEvent, bool) {
	r.t.Helper()
	var ev sseEvent
	var data string
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if data == "" {
				continue // a comment block, or an id-only message
			}
			if err := json.Unmarshal([]byte(data), &ev.data); err != nil {
				r.t.Fatalf("event data %q: %v", data, err)
			}
			return ev, true
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return sseEvent{}, false
}

// openStream GETs the stream from srv as token with extra headers.
func openStream(t *testing.T, ctx context.Context, srv *httptest.Server, path, token string, header ...string) (*http.Response, *sseReader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %s %q %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	return resp, &sseReader{t: t, sc: bufio.NewScanner(resp.Body)}
}

func TestEventStream(t *testing.T) {
	e := newEventEnv(t)
	old := e.create(t, 1, "acme")
	srv := httptest.NewServer(e.admin)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	// Without a position the stream starts at the end: only new events.
	liveResp, live := openStream(t, ctx, srv, "/v1/events/stream", "acme-tok")
	defer liveResp.Body.Close()
	e.create(t, 2, "globex") // not acme's: never sent to acme
	fresh := e.create(t, 3, "acme")
	e.bc.Notify()
	ev, ok := live.next()
	if !ok || ev.typ != "requested" || ev.data.ApprovalID != string(fresh) || ev.id != "0."+strconv.FormatInt(ev.data.Seq, 10) || ev.id != ev.data.Cursor {
		t.Fatalf("first streamed event = %+v, %v; want the new acme request with id = its cursor", ev, ok)
	}
	if ev.data.Approval == nil || ev.data.Approval.Server != "pay" || ev.data.Approval.Tenant != "acme" {
		t.Errorf("streamed approval = %+v", ev.data.Approval)
	}

	// A reconnect with Last-Event-ID resumes after it.
	resumedResp, resumed := openStream(t, ctx, srv, "/v1/events/stream", "admin-tok", "Last-Event-ID", "0")
	defer resumedResp.Body.Close()
	var got []string
	for len(got) < 3 {
		ev, ok := resumed.next()
		if !ok {
			t.Fatalf("stream ended after %q", got)
		}
		got = append(got, ev.id+" "+ev.data.ApprovalID)
	}
	want := []string{"0.1 " + string(old), "0.2 01900000-0000-7000-8000-000000000002", "0.3 " + string(fresh)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resumed stream mismatch (-want +got):\n%s", diff)
	}

	// Resuming after an event's cursor sends the events after it only.
	midResp, mid := openStream(t, ctx, srv, "/v1/events/stream", "admin-tok", "Last-Event-ID", "0.2")
	defer midResp.Body.Close()
	if ev, ok := mid.next(); !ok || ev.id != "0.3" || ev.data.ApprovalID != string(fresh) {
		t.Errorf("stream after 0.2 began with %+v, %v; want event 0.3", ev, ok)
	}

	// A decision reaches the first stream.
	if _, err := e.g.Review(t.Context(), fresh, approval.Principal{ID: "bob"}, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	e.bc.Notify()
	var types []string
	for len(types) < 2 {
		ev, ok := live.next()
		if !ok {
			t.Fatal("stream ended")
		}
		types = append(types, ev.typ+" "+ev.data.State)
	}
	if diff := cmp.Diff([]string{"reviewed approved", "approved approved"}, types); diff != "" {
		t.Errorf("decision events mismatch (-want +got):\n%s", diff)
	}

	// EndStreams ends open streams (graceful shutdown does not wait for them).
	e.admin.EndStreams()
	if ev, ok := live.next(); ok {
		t.Errorf("after EndStreams the stream sent %+v", ev)
	}
}
