package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"toolgate/internal/rawio"
)

// h1ConnTracker follows the connections of an httptest server.
type h1ConnTracker struct {
	mu      sync.Mutex
	state   map[net.Conn]http.ConnState
	seen    map[string]bool // the remote addresses of all connections so far
	streams map[string]bool // the remote addresses of connections that carried a GET
}

// wrap notes the connections that carry a GET (an event stream that
// stays open: a connection active for good) and serves h.
func (ct *h1ConnTracker) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ct.mu.Lock()
			if ct.streams == nil {
				ct.streams = map[string]bool{}
			}
			ct.streams[r.RemoteAddr] = true
			ct.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// settled reports whether h1's pool holds every connection the server
// has served a POST on: no POST is being served and each connection
// idle at the server is in the pool, none on its way back to it (an
// answer is read, and the connection released, a moment after the call's
// result is passed on).
func (ct *h1ConnTracker) settled(h1 *h1Transport) bool {
	h1.mu.Lock()
	pooled := map[string]bool{}
	for _, lc := range h1.idle {
		pooled[lc.c.LocalAddr().String()] = true
	}
	h1.mu.Unlock()
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for c, s := range ct.state {
		a := c.RemoteAddr().String()
		if ct.streams[a] {
			continue
		}
		if s != http.StateIdle || !pooled[a] {
			return false
		}
	}
	return len(pooled) > 0
}

func (ct *h1ConnTracker) hook(c net.Conn, s http.ConnState) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.state == nil {
		ct.state = map[net.Conn]http.ConnState{}
		ct.seen = map[string]bool{}
	}
	ct.seen[c.RemoteAddr().String()] = true
	if s == http.StateClosed || s == http.StateHijacked {
		delete(ct.state, c)
		return
	}
	ct.state[c] = s
}

// closeIdle closes the server's idle connections, as a keep-alive timeout
// would, and reports how many it closed.
func (ct *h1ConnTracker) closeIdle() int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	n := 0
	for c, s := range ct.state {
		if s == http.StateIdle {
			_ = c.Close()
			n++
		}
	}
	return n
}

// newH1Fixture is newRawHTTPFixture with the scripted upstream served by
// a server whose connections the test can close.
func newH1Fixture(t *testing.T, jsonAnswers bool) (*rawHTTPFixture, *h1ConnTracker) {
	t.Helper()
	up, _ := newScriptedUpstream(t, jsonAnswers)
	ct := &h1ConnTracker{}
	ts := httptest.NewUnstartedServer(ct.wrap(up))
	ts.Config.ConnState = ct.hook
	ts.Start()
	t.Cleanup(ts.Close)
	f := rawHTTPFixtureOf(t, ServerConfig{URL: ts.URL}, nil)
	f.up = up
	return f, ct
}

// h1Of is the h1Transport of g's upstream "up".
func h1Of(t *testing.T, g *Gateway) *h1Transport {
	t.Helper()
	h1, ok := g.ups["up"].http.Transport.(*captureRoundTripper).base.(*h1Transport)
	if !ok || h1.host == "" {
		t.Fatalf("upstream up has no lean HTTP/1.1 transport (%T)", g.ups["up"].http.Transport.(*captureRoundTripper).base)
	}
	return h1
}

// idleDead reports whether t has idle connections and none of them is
// still open as seen from this side.
func (t *h1Transport) idleDead() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, lc := range t.idle {
		if h1Alive(lc.rc) {
			return false
		}
	}
	return len(t.idle) > 0
}

// TestH1UpstreamClosedIdleConnection: an upstream that closes an idle
// connection between two calls (a keep-alive timeout) costs the next call
// nothing: the closed connection is seen before it is used, the call goes
// on a new one, and the upstream runs it once.
func TestH1UpstreamClosedIdleConnection(t *testing.T) {
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			f, ct := newH1Fixture(t, mode == "json")
			h1 := h1Of(t, f.g)
			if got := f.call(t, "c-1", "echo", `{"text":"one"}`); !strings.Contains(got, "one") {
				t.Fatalf("first call: %q", got)
			}
			f.up.takeCalls()
			// The first call's connection is idle once its answer was
			// read (JSON), or once its stream's end was drained (SSE).
			// Every connection is waited for: one still on its way back
			// to the pool, not closed below, was taken by the next call
			// (1 run in 30 under load).
			waitUntil(t, func() bool { return ct.settled(h1) })
			dials := h1.dials.Load()
			// Until every pooled connection has seen its FIN here (the
			// server marks a connection idle just after its answer).
			closed := 0
			waitUntil(t, func() bool {
				closed += ct.closeIdle()
				return h1.idleDead()
			})
			if closed == 0 {
				t.Fatal("the upstream closed no idle connection")
			}
			if got := f.call(t, "c-2", "echo", `{"text":"two"}`); !strings.Contains(got, "two") || strings.Contains(got, "unavailable") {
				t.Fatalf("call after the upstream closed its idle connection: %q", got)
			}
			if calls := f.up.takeCalls(); len(calls) != 1 {
				t.Errorf("the upstream got %d tools/call POSTs, want 1", len(calls))
			}
			if h1.dials.Load() == dials {
				t.Error("the call did not go on a new connection")
			}
		})
	}
}

// TestH1NeverRunsACallTwice: an upstream that reads a call on a reused
// connection and then drops the connection without an answer may have
// run it; the call fails (transport error, "may have run") and is not
// sent again; the next call works.
func TestH1NeverRunsACallTwice(t *testing.T) {
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			f, ct := newH1Fixture(t, mode == "json")
			h1 := h1Of(t, f.g)
			var (
				drops atomic.Int32
				mu    sync.Mutex
				hit   string // the connection of the dropped call
				fresh bool   // it was opened after the first call's answer
			)
			answer := answerSSE(`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"one"}]}}`)
			if mode == "json" {
				answer = answerJSON(`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"one"}]}}`)
			}
			f.up.set("vendor", answer)
			var before map[string]bool
			f.up.set("hang", func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
				drops.Add(1)
				mu.Lock()
				hit, fresh = r.RemoteAddr, !before[r.RemoteAddr]
				mu.Unlock()
				c, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = c.Close()
				}
			})
			if got := f.call(t, "c-1", "vendor", `{}`); !strings.Contains(got, "one") {
				t.Fatalf("first call: %q", got)
			}
			waitUntil(t, func() bool {
				h1.mu.Lock()
				defer h1.mu.Unlock()
				return len(h1.idle) > 0
			})
			mu.Lock()
			ct.mu.Lock()
			before = maps.Clone(ct.seen)
			ct.mu.Unlock()
			mu.Unlock()
			got := f.call(t, "c-2", "hang", `{}`)
			if !strings.Contains(got, "the call may have run") {
				t.Errorf("dropped call answered %q, want a transport error that says it may have run", got)
			}
			if n := drops.Load(); n != 1 {
				t.Errorf("the upstream got the dropped call %d times, want 1", n)
			}
			mu.Lock()
			if fresh || hit == "" {
				t.Errorf("the dropped call came on a new connection %q, not a reused one (the test proves nothing)", hit)
			}
			mu.Unlock()
			if got := f.call(t, "c-3", "echo", `{"text":"three"}`); !strings.Contains(got, "three") {
				t.Errorf("call after the drop: %q", got)
			}
		})
	}
}

// h1Bare is an h1Transport to a bare net/http server that counts the
// POSTs it got and answers each with its body.
func h1Bare(t *testing.T, h http.HandlerFunc) (*h1Transport, string, *atomic.Int32) {
	t.Helper()
	var posts atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}))
	t.Cleanup(ts.Close)
	fb := &h1RecordingRT{}
	h1 := newH1Transport(fb, nil, ts.URL, 4)
	t.Cleanup(h1.CloseIdleConnections)
	if h1.host == "" {
		t.Fatal("not lean")
	}
	return h1, ts.URL, &posts
}

// h1RecordingRT is a fallback that counts what reached it.
type h1RecordingRT struct{ n atomic.Int32 }

func (r *h1RecordingRT) RoundTrip(*http.Request) (*http.Response, error) {
	r.n.Add(1)
	return nil, errors.New("fallback")
}

func h1Post(t *testing.T, ctx context.Context, rt http.RoundTripper, u, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return rt.RoundTrip(req)
}

func h1ReadAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return string(b)
}

// TestH1ReusesOneConnection: answers read to their end give their
// connection back: sequential POSTs go on one connection; a body closed
// before its end closes its connection, which is not used again.
func TestH1ReusesOneConnection(t *testing.T) {
	h1, u, posts := h1Bare(t, nil)
	for i := range 5 {
		resp, err := h1Post(t, t.Context(), h1, u, "body-"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		if got := h1ReadAll(t, resp); got != "body-"+string(rune('a'+i)) {
			t.Fatalf("answer %q", got)
		}
	}
	if d := h1.dials.Load(); d != 1 {
		t.Errorf("%d connections for 5 sequential POSTs, want 1", d)
	}
	resp, err := h1Post(t, t.Context(), h1, u, "early")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // before its end
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Error("read after Close succeeded")
	}
	resp, err = h1Post(t, t.Context(), h1, u, "after")
	if err != nil {
		t.Fatal(err)
	}
	if got := h1ReadAll(t, resp); got != "after" {
		t.Errorf("answer %q", got)
	}
	if d := h1.dials.Load(); d != 2 {
		t.Errorf("%d connections, want 2 (the early-closed one not reused)", d)
	}
	if n := posts.Load(); n != 7 {
		t.Errorf("server got %d POSTs, want 7", n)
	}
}

// TestH1RetriesOnlyWhatWasNotWritten: when a reused connection takes no
// byte of a request (its write side is shut, and the liveness peek is
// made to miss it), the request goes once on a new connection; the
// server gets it once.
func TestH1RetriesOnlyWhatWasNotWritten(t *testing.T) {
	h1, u, posts := h1Bare(t, nil)
	h1.alive = func(syscall.RawConn) bool { return true }
	resp, err := h1Post(t, t.Context(), h1, u, "one")
	if err != nil {
		t.Fatal(err)
	}
	h1ReadAll(t, resp)
	h1.mu.Lock()
	if len(h1.idle) != 1 {
		h1.mu.Unlock()
		t.Fatalf("%d idle connections, want 1", len(h1.idle))
	}
	// Still open for reading (the peek finds it alive), refuses writes.
	if err := h1.idle[0].c.(*rawio.Conn).Conn.(*net.TCPConn).CloseWrite(); err != nil {
		h1.mu.Unlock()
		t.Fatal(err)
	}
	h1.mu.Unlock()
	resp, err = h1Post(t, t.Context(), h1, u, "two")
	if err != nil {
		t.Fatalf("POST after the write side closed: %v", err)
	}
	if got := h1ReadAll(t, resp); got != "two" {
		t.Errorf("answer %q", got)
	}
	if n := posts.Load(); n != 2 {
		t.Errorf("server got %d POSTs, want 2", n)
	}
	if d := h1.dials.Load(); d != 2 {
		t.Errorf("%d connections, want 2", d)
	}
}

// TestH1CancelWhileWaiting: a request whose context ends while it waits
// for the answer returns at once with the context's error, and its
// connection is closed, not pooled.
func TestH1CancelWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	h1, u, _ := h1Bare(t, func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
	})
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		resp, err := h1Post(t, ctx, h1, u, "wait")
		if err == nil {
			_ = resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errH1Sent) {
		t.Errorf("error %v, want the context's, marked as sent", err)
	}
	h1.mu.Lock()
	defer h1.mu.Unlock()
	if len(h1.idle) != 0 {
		t.Errorf("%d idle connections after a cancelled exchange, want 0", len(h1.idle))
	}
}

// TestH1WhatIsNotLean: TLS, a proxy, and requests other than a POST with
// a body of known length go to the net/http Transport.
func TestH1WhatIsNotLean(t *testing.T) {
	proxy := func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.invalid:3128") }
	for _, c := range []struct {
		url   string
		proxy func(*http.Request) (*url.URL, error)
	}{
		{"https://up.example/mcp", nil},
		{"http://up.example/mcp", proxy},
		{"http://[fe80::1%25eth0]:8080/mcp", nil}, // a zone: Request.Write drops it
		{"http://bücher.example/mcp", nil},        // not ASCII: Request.Write encodes it
	} {
		if h1 := newH1Transport(&h1RecordingRT{}, c.proxy, c.url, 4); h1.host != "" {
			t.Errorf("%s (proxy %v): lean", c.url, c.proxy != nil)
		}
	}
	fb := &h1RecordingRT{}
	h1 := newH1Transport(fb, nil, "http://127.0.0.1:1/mcp", 4)
	get, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/mcp", nil)
	chunked, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", io.NopCloser(strings.NewReader("x")))
	chunked.ContentLength = -1
	other, _ := http.NewRequest(http.MethodPost, "http://other.invalid/mcp", strings.NewReader("x"))
	expect, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader("x"))
	expect.Header.Set("Expect", "100-continue")
	closing, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader("x"))
	closing.Close = true
	otherHost, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader("x"))
	otherHost.Host = "virtual.example"
	reqs := []*http.Request{get, chunked, other, expect, closing, otherHost}
	for _, req := range reqs {
		if resp, err := h1.RoundTrip(req); err == nil {
			_ = resp.Body.Close()
		}
	}
	if n := int(fb.n.Load()); n != len(reqs) {
		t.Errorf("%d of %d requests went to the fallback", n, len(reqs))
	}
}

// TestH1StreamAnswerNeedsNoDrain: the end of a raw call's event stream is
// read by the next request on its connection: no goroutine per call
// reads it (each call started one before), and sequential calls keep
// using the pooled connections.
func TestH1StreamAnswerNeedsNoDrain(t *testing.T) {
	f, _ := newH1Fixture(t, false)
	h1 := h1Of(t, f.g)
	u := f.g.ups["up"]
	f.call(t, "first", "echo", `{}`)
	u.drains.Wait()
	dials, started := h1.dials.Load(), u.drainsStarted.Load()
	const calls = 20
	for i := range calls {
		if got := f.call(t, "c-"+string(rune('a'+i)), "echo", `{"i":1}`); !strings.Contains(got, `{\"i\":1}`) {
			t.Fatalf("call %d: %q", i, got)
		}
	}
	if n := u.drainsStarted.Load() - started; n != 0 {
		t.Errorf("%d background drains for %d event-stream answers, want none", n, calls)
	}
	// A few more at most: a call passes over a connection whose end is
	// still on its way (h1Transport.get), so a slow upstream (or -race)
	// may leave two or three in turn.
	if n := h1.dials.Load() - dials; n > 3 {
		t.Errorf("%d new connections for %d sequential calls, want the pooled ones reused", n, calls)
	}
	if calls := f.up.takeCalls(); len(calls) != 21 {
		t.Errorf("the upstream got %d tools/call POSTs, want 21", len(calls))
	}
}

// TestH1StreamKeptOpenAfterTheAnswer: an upstream that keeps a call's
// event stream open after the answer: the next request passes that
// connection over and goes on another one; once it has owed the end for
// h1OwedWait (made so here by ageing it), the next request that finds
// it, or the next release that finds it least recently used, closes it.
// Each call runs once.
func TestH1StreamKeptOpenAfterTheAnswer(t *testing.T) {
	f, _ := newH1Fixture(t, false)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	gone := make(chan struct{}, 1)
	send := answerSSE(`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"kept open"}]}}`)
	f.up.set("hang", func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		send(w, r, id)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done(): // the connection was closed
			gone <- struct{}{}
		case <-release:
		}
	})
	if got := f.call(t, "h-1", "hang", `{}`); !strings.Contains(got, "kept open") {
		t.Fatalf("answer %q", got)
	}
	if got := f.call(t, "h-2", "echo", `{"after":1}`); !strings.Contains(got, `{\"after\":1}`) {
		t.Fatalf("call after the open stream: %q", got)
	}
	h1 := h1Of(t, f.g)
	h1.mu.Lock()
	owing := 0
	for _, lc := range h1.idle {
		if lc.owed != nil {
			lc.since = lc.since.Add(-h1OwedWait)
			owing++
		}
	}
	h1.mu.Unlock()
	if owing == 0 {
		t.Fatal("no pooled connection owes the open stream's end")
	}
	if got := f.call(t, "h-3", "echo", `{"after":3}`); !strings.Contains(got, `{\"after\":3}`) {
		t.Fatalf("third call: %q", got)
	}
	<-gone // toolgate closed the connection of the open stream
	calls := f.up.takeCalls()
	if len(calls) != 3 || calls[0].tool != "hang" || calls[1].tool != "echo" || calls[2].tool != "echo" {
		t.Errorf("tools/call POSTs %+v, want hang, echo, echo, once each", calls)
	}
}

// TestH1PeekAllocatesNothing: the liveness peek before each reuse of a
// connection tells an open, quiet connection from one with bytes to read
// and from one the other side closed, without an allocation per peek.
func TestH1PeekAllocatesNothing(t *testing.T) {
	if !h1Supported {
		t.Skip("no lean HTTP/1.1 exchange on this system")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	lc := newH1Conn(c)
	defer lc.close()
	if st := lc.peek(); st != h1Quiet {
		t.Fatalf("open connection: peek %v, want quiet", st)
	}
	if !raceEnabled {
		if n := testing.AllocsPerRun(100, func() { _ = lc.peek() }); n != 0 {
			t.Errorf("peek: %.1f allocations, want 0", n)
		}
	}
	if _, err := srv.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	for lc.peek() == h1Quiet { // the byte arrives: waited for, not slept on
		runtime.Gosched()
	}
	if st := lc.peek(); st != h1Readable {
		t.Fatalf("after a byte: peek %v, want readable", st)
	}
	_, _ = lc.br.ReadByte()
	_ = srv.Close()
	for lc.peek() == h1Quiet {
		runtime.Gosched()
	}
	if st := lc.peek(); st != h1Gone {
		t.Fatalf("after the other side closed: peek %v, want gone", st)
	}
}
