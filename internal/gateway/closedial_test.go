package gateway

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// heldInitialize serves an SDK upstream and, once armed, holds the answer
// to the next initialize POST: the upstream has served it (its session
// exists, initialized) but the gateway has not read its answer yet. held
// is closed when that answer's first write waits; the write goes on when
// release is closed or the gateway gave up the POST (gone is closed then).
type heldInitialize struct {
	next    http.Handler
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
	gone    chan struct{}
}

func (h *heldInitialize) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && h.armed.Load() {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"method":"initialize"`)) && h.armed.CompareAndSwap(true, false) {
			w = &heldWriter{ResponseWriter: w, wait: func() {
				close(h.held)
				select {
				case <-h.release:
				case <-r.Context().Done():
					close(h.gone)
				}
			}}
		}
	}
	h.next.ServeHTTP(w, r)
}

// heldWriter runs wait once, before the first byte of its answer.
type heldWriter struct {
	http.ResponseWriter
	once sync.Once
	wait func()
}

func (w *heldWriter) WriteHeader(code int) {
	w.once.Do(w.wait)
	w.ResponseWriter.WriteHeader(code)
}

func (w *heldWriter) Write(b []byte) (int, error) {
	w.once.Do(w.wait)
	return w.ResponseWriter.Write(b)
}

func (w *heldWriter) Flush() {
	w.once.Do(w.wait)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *heldWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// msgHandler is a slog.Handler that closes seen when a record with message
// msg is logged.
type msgHandler struct {
	msg  string
	once *sync.Once
	seen chan struct{}
}

func (h msgHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h msgHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h msgHandler) WithGroup(string) slog.Handler            { return h }
func (h msgHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

// TestCloseEndsTheUpstreamSessionItWasOpening (branch flake50): Close
// begins while the upstream session for 2026-07-28 agents is being opened
// for a call, after the upstream served its initialize (the session exists
// there) and before its answer arrived. Close must not cut that connect
// (the gateway would never learn the session's id, and the session would
// stay open upstream: on 3eefbceb, for good on this SDK upstream without
// an idle timeout, its reader goroutine left behind, as in
// TestLeanParkedCallsApprovedDuringClose's rare failures); it lets the
// answer arrive and ends the session (DELETE) before it returns. The
// upstream has no session left once Close returned.
func TestCloseEndsTheUpstreamSessionItWasOpening(t *testing.T) {
	verifyNoLeaks(t)
	up := newUpstreamServer(newHooks())
	hi := &heldInitialize{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil),
		held: make(chan struct{}), release: make(chan struct{}), gone: make(chan struct{})}
	ts := httptest.NewServer(hi)
	t.Cleanup(ts.Close)
	waiting := msgHandler{msg: msgWaitModernDial, once: new(sync.Once), seen: make(chan struct{})}
	g := newGateway(t, []ServerConfig{{Name: "up", URL: ts.URL}}, allowAll(), &Options{Logger: slog.New(waiting)})
	base := serveHTTP(t, g, nil)
	if n := countSessions(up); n != 1 {
		t.Fatalf("the upstream has %d sessions before the call, want 1 (the shared one)", n)
	}

	hi.armed.Store(true)
	answered := make(chan int, 1)
	go func() {
		req, err := http.NewRequestWithContext(context.WithoutCancel(t.Context()), http.MethodPost, base+"/mcp",
			strings.NewReader(modernCallBody("1", "up__echo", `{}`, "")))
		if err != nil {
			answered <- -1
			return
		}
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", modernVersion)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "up__echo")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-hi.held // the upstream served initialize; its answer waits

	closed := make(chan error, 1)
	go func() { closed <- g.Close() }()
	select {
	case <-waiting.seen:
		// Close waits for the connect: the answer may go.
		close(hi.release)
	case <-hi.gone:
		t.Error("Close cut the connect of the upstream session after the upstream had served its initialize")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := countSessions(up); n != 0 {
		t.Errorf("the upstream has %d sessions once Close returned, want 0 (every session the gateway opened ended)", n)
	}
	if code := <-answered; code != http.StatusOK {
		t.Errorf("the call at Close: status %d, want 200 (an error result)", code)
	}
}

// countSessions counts s's open sessions.
func countSessions(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}
