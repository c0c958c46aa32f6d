package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// A writeFailConn is a real TCP connection whose writes fail, having
// written nothing, once failing is set.
type writeFailConn struct {
	net.Conn
	failing *atomic.Bool
}

func (c *writeFailConn) Write(p []byte) (int, error) {
	if c.failing.Load() {
		return 0, errors.New("attack15: write refused")
	}
	return c.Conn.Write(p)
}

// TestH1FallbackRetryAfterNothingWrittenIsNotReached: net/http's
// Transport sends a POST again on a new connection when nothing of it was
// written on a reused one, rewinding the body with GetBody. When that new
// connection is refused, nothing reached the upstream: the failure is not
// marked as one that may have (httpreached.go), so the call says "nothing
// was run". (No defect on 7e8d83f: the Transport flushes the head of a
// request whose body it does not know to be in memory before it reads
// the body, so a retried request's body was never read whole; the test
// keeps it so.)
func TestH1FallbackRetryAfterNothingWrittenIsNotReached(t *testing.T) {
	verifyNoLeaks(t)
	var posts atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		posts.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(ts.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	_ = l.Close()
	var failing atomic.Bool
	var dials atomic.Int32
	base := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		if dials.Add(1) > 1 {
			return d.DialContext(ctx, network, refused) // the upstream is gone
		}
		c, err := d.DialContext(ctx, network, ts.Listener.Addr().String())
		if err != nil {
			return nil, err
		}
		return &writeFailConn{Conn: c, failing: &failing}, nil
	}}
	t.Cleanup(base.CloseIdleConnections)
	h1 := &h1Transport{fallback: base} // no lean host: everything goes to the fallback
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`
	resp, err := h1Post(t, t.Context(), h1, ts.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	if got := h1ReadAll(t, resp); got != "ok" {
		t.Fatalf("first POST: %q", got)
	}
	failing.Store(true)
	resp, err = h1Post(t, t.Context(), h1, ts.URL, body)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("second POST: no error, want the refused connection's")
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d dials, want 2 (net/http's retry on a new connection): %v", n, err)
	}
	if reached(err) {
		t.Errorf("POST written nowhere and then refused a connection: error %v marked as may have reached the upstream", err)
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("the upstream got %d POSTs, want 1", n)
	}
}
