package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/cli"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// lines is an io.Writer that hands each complete line to a channel.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line) // keep the partial line
			return len(p), nil
		}
		l.ch <- strings.TrimSuffix(line, "\n")
	}
}

func (l *lines) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-l.ch:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no line within 30s")
		return ""
	}
}

// dropFirstStream ends the first event stream right after it sent a
// "requested" event, as a dropped connection would.
type dropFirstStream struct {
	h       http.Handler
	streams atomic.Int32
	lastIDs chan string // Last-Event-ID of each stream request
}

func (d *dropFirstStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/events/stream" {
		d.h.ServeHTTP(w, r)
		return
	}
	d.lastIDs <- r.Header.Get("Last-Event-ID")
	if d.streams.Add(1) > 1 {
		d.h.ServeHTTP(w, r)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	d.h.ServeHTTP(&cutAfter{ResponseWriter: w, marker: "event: requested", cut: cancel}, r.WithContext(ctx))
}

type cutAfter struct {
	http.ResponseWriter
	marker string
	cut    func()
}

func (c *cutAfter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	if bytes.Contains(p, []byte(c.marker)) {
		c.cut()
	}
	return n, err
}

func (c *cutAfter) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

func TestWatchReconnectsWhereItStopped(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	bc := new(api.Broadcast)
	d := &dropFirstStream{h: api.New(g, authenticate, &api.Options{Events: db, EventsChanged: bc.Wait}), lastIDs: make(chan string, 10)}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	create := func(n int) string {
		r := request(fmt.Sprintf("01900000-0000-7000-8000-%012d", n))
		r.CreatedAt = time.Now().UTC()
		r.ExpiresAt = r.CreatedAt.Add(time.Hour)
		if err := db.CreateRequest(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		bc.Notify()
		return string(r.ID)
	}
	create(1) // before watch starts: not printed

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &lines{ch: make(chan string, 100)}
	status := &lines{ch: make(chan string, 100)}
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"watch"}, out, status, func(k string) string {
			return map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: "viewer-tok"}[k]
		})
	}()
	if s := status.next(t); !strings.Contains(s, "watching approvals at") {
		t.Fatalf("status %q", s)
	}
	if id := <-d.lastIDs; id != "" {
		t.Errorf("first stream sent Last-Event-ID %q, want none", id)
	}
	second := create(2)
	if l := out.next(t); !strings.Contains(l, "requested") || !strings.Contains(l, second) || !strings.Contains(l, "pay · transfer") {
		t.Fatalf("watch printed %q, want the second request", l)
	}
	// The server dropped the stream after that event: watch reconnects after it.
	if s := status.next(t); !strings.Contains(s, "reconnecting") {
		t.Fatalf("status %q, want a reconnect note", s)
	}
	if id := <-d.lastIDs; id != "0.2" {
		t.Errorf("the reconnect sent Last-Event-ID %q, want 0.2 (the cursor of the event it printed)", id)
	}
	if s := status.next(t); !strings.Contains(s, "resuming after event 0.2") {
		t.Fatalf("status %q", s)
	}
	third := create(3)
	if l := out.next(t); !strings.Contains(l, third) {
		t.Fatalf("after the reconnect watch printed %q, want the third request (and the second not again)", l)
	}
	cancel()
	if code := <-done; code != cli.ExitOK {
		t.Errorf("watch ended with %d on interrupt, want 0", code)
	}
	select {
	case l := <-out.ch:
		t.Errorf("unexpected output %q", l)
	default:
	}
}

func TestWatchFailures(t *testing.T) {
	e := newEnv(t) // an API without an event log: 404
	tests := []struct {
		name  string
		token string
		args  []string
		code  int
		want  string
	}{
		{"bad token", "nope", []string{"watch"}, 1, "401 unauthorized"},
		{"no event log", tokAlic, []string{"watch"}, 1, "404 not_found"},
		{"negative since", tokAlic, []string{"watch", "--since", "-1"}, 2, "want an event's cursor"},
		{"since a plain seq", tokAlic, []string{"watch", "--since", "5"}, 2, "want an event's cursor"},
		{"positional argument", tokAlic, []string{"watch", "x"}, 2, "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.vars[cli.EnvToken] = tt.token
			code, _, errs := e.run(t, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, tt.code, tt.want)
			}
		})
	}
}

func TestWatchPrintsDecisions(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	srv := httptest.NewServer(api.New(g, authenticate, &api.Options{Events: db}))
	t.Cleanup(srv.Close)
	r := request("01900000-0000-7000-8000-000000000001")
	r.CreatedAt = time.Now().UTC()
	r.ExpiresAt = r.CreatedAt.Add(time.Hour)
	r.Arguments = []byte("{\"to\":\"acct\u202e-1\",\"amount\":5}") // a raw bidi override
	if err := db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Review(t.Context(), r.ID, approval.Principal{ID: "bob"}, approval.VerdictDeny, "no: too much", ""); err != nil {
		t.Fatal(err)
	}
	out := watchFromStart(t, srv.URL)
	want := [][]string{
		{"requested", string(r.ID), "pay · transfer", "by desktop for carol", `rule "payments"`, `\u202E`},
		{"reviewed", "deny by bob: no: too much"},
		{"denied", "by bob: no: too much"},
	}
	for _, w := range want {
		l := out.next(t)
		for _, part := range w {
			if !strings.Contains(l, part) {
				t.Errorf("line %q, want it to contain %q", l, part)
			}
		}
		if strings.ContainsRune(l, '\u202e') {
			t.Errorf("line %q holds a raw bidi override", l)
		}
	}
}

// TestWatchReplayShowsTheRequestsTimeout: a "requested" event replayed
// with --since says how long the request had when it was made, not
// "expires in 0s" because its deadline has passed since.
func TestWatchReplayShowsTheRequestsTimeout(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	srv := httptest.NewServer(api.New(g, authenticate, &api.Options{Events: db}))
	t.Cleanup(srv.Close)
	r := request("01900000-0000-7000-8000-000000000002")
	r.CreatedAt = time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Second)
	r.ExpiresAt = r.CreatedAt.Add(30 * time.Minute)
	if err := db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	out := watchFromStart(t, srv.URL)
	if l := out.next(t); !strings.Contains(l, "requested") || !strings.Contains(l, "expires in 30m0s") {
		t.Errorf("line %q, want a requested line saying %q", l, "expires in 30m0s")
	}
}

// TestWatchNamesTheGrant: a grant event's line names its grant (the line
// said only "by bob", so a watcher could not tell which grant was made,
// used or revoked).
func TestWatchNamesTheGrant(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	srv := httptest.NewServer(api.New(g, authenticate, &api.Options{Events: db, Grants: g}))
	t.Cleanup(srv.Close)
	r := request("01900000-0000-7000-8000-000000000001")
	r.CreatedAt = time.Now().UTC()
	r.ExpiresAt = r.CreatedAt.Add(time.Hour)
	if err := db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	_, gr, err := g.ApproveWithGrant(t.Context(), r.ID, approval.Principal{ID: "bob"}, "fine", "", approval.GrantTerms{TTL: time.Hour})
	if err != nil || gr == nil {
		t.Fatalf("grant: %v, %v", gr, err)
	}
	out := watchFromStart(t, srv.URL)
	for {
		l := out.next(t)
		if !strings.Contains(l, "grant_created") {
			continue
		}
		if !strings.Contains(l, "grant "+gr.ID) || !strings.Contains(l, "by bob") {
			t.Errorf("line %q, want it to name grant %s and bob", l, gr.ID)
		}
		return
	}
}

// TestWatchReplayCountsApprovalsAsOfEachReview: replayed with --since, the
// first of two approving reviews says "1 of 2", not the count the request
// has now (each event carries the approval as it is when read).
func TestWatchReplayCountsApprovalsAsOfEachReview(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	srv := httptest.NewServer(api.New(g, authenticate, &api.Options{Events: db}))
	t.Cleanup(srv.Close)
	r := request("01900000-0000-7000-8000-000000000003")
	r.CreatedAt = time.Now().UTC()
	r.ExpiresAt = r.CreatedAt.Add(time.Hour)
	r.RequiredApprovals = 2
	if err := db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"alice", "bob"} {
		if _, err := g.Review(t.Context(), r.ID, approval.Principal{ID: who}, approval.VerdictApprove, "ok by "+who, ""); err != nil {
			t.Fatal(err)
		}
	}
	out := watchFromStart(t, srv.URL)
	want := [][]string{
		{"requested", "2 approval(s) needed"},
		{"reviewed", "approve by alice: ok by alice (1 of 2 approvals)"},
		{"reviewed", "approve by bob: ok by bob (2 of 2 approvals)"},
		{"approved", "by bob"},
	}
	for _, w := range want {
		l := out.next(t)
		for _, part := range w {
			if !strings.Contains(l, part) {
				t.Errorf("line %q, want it to contain %q", l, part)
			}
		}
	}
}

// watchFromStart runs "approvals watch --since 0" against the API at url
// as bob until the test ends, and returns its output's lines.
func watchFromStart(t *testing.T, url string) *lines {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	out := &lines{ch: make(chan string, 100)}
	go cli.Run(ctx, []string{"watch", "--since", "0"}, out, &lines{ch: make(chan string, 100)}, func(k string) string {
		return map[string]string{cli.EnvAddr: url, cli.EnvToken: "bob-tok"}[k]
	})
	return out
}
