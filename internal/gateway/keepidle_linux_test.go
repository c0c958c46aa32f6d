//go:build linux

package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"toolgate/internal/httpserve"
)

// keepIdleFront serves f's gateway handler at /mcp and a /healthz that
// net/http answers itself, through httpserve.Serve with a cap of max
// connections and the gateway's KeepIdle as the idle hand-off (as toolgate
// serve's agent listener), and returns the address; cancel ends serving.
func keepIdleFront(t *testing.T, f *leanFixture, max int, idle time.Duration) (host string, cancel func()) {
	t.Helper()
	h, err := f.g.Handler(testAuth, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = httpserve.Serve(ctx, ln, mux, &httpserve.Options{MaxConns: max, IdleTimeout: idle,
			ReadHeaderTimeout: testWait, IdleHandoff: f.g.KeepIdle})
	}()
	cancel = func() {
		stop()
		<-served
	}
	t.Cleanup(cancel)
	return ln.Addr().String(), cancel
}

// healthzRequest is a kept-alive GET /healthz.
func healthzRequest(host string) string {
	return "GET /healthz HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
}

// readAnswer reads one response from br and returns its status code and
// body.
func readAnswer(t *testing.T, br *bufio.Reader) (int, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// connServers is the number of goroutines in a read of a connection of
// an httpserve listener (net/http's connection goroutines waiting for a
// request, the listener's server's and serveRest's).
func connServers() int { return len(parkedStacks(listenerRead)) }

const listenerRead = "toolgate/internal/httpserve.(*conn).Read"

// waitConnServers waits until at most want goroutines read the listener's
// connections.
func waitConnServers(t *testing.T, want int) {
	t.Helper()
	for deadline := time.Now().Add(testWait); connServers() > want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d net/http connection goroutines, want at most %d:\n%s", connServers(), want, strings.Join(parkedStacks(listenerRead), "\n\n"))
		}
	}
}

// TestKeptAliveHealthzIdlesWithoutGoroutine (idle40): kept-alive
// connections idle after a request net/http answered itself (/healthz, no
// token needed) are handed to the gateway's shared poller: no net/http
// connection goroutine waits on them (before, one each, with its 8 KiB
// stack and 4 KiB reader and writer). The next request on each is served
// with the answer it would have got: /healthz's, a 401 for /mcp without a
// token (the same handler, so the same authentication), a tool call's
// result with one; the connection is kept alive and handed off again.
func TestKeptAliveHealthzIdlesWithoutGoroutine(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	host, _ := keepIdleFront(t, f, 100, testWait)
	const n = 30
	conns := make([]net.Conn, n)
	brs := make([]*bufio.Reader, n)
	for i := range n {
		conns[i], _ = dialRaw(t, "http://"+host)
		brs[i] = bufio.NewReader(conns[i])
		if _, err := io.WriteString(conns[i], healthzRequest(host)); err != nil {
			t.Fatal(err)
		}
		if code, body := readAnswer(t, brs[i]); code != http.StatusOK || body != "ok" {
			t.Fatalf("healthz: %d %q", code, body)
		}
	}
	waitIdleWatches(t, f.g, n)
	waitConnServers(t, 0)
	for i := range n {
		var req string
		switch i % 3 {
		case 0:
			req = healthzRequest(host)
		case 1:
			req = "POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
		case 2:
			req = rawModernRequest(host, "7", "up__echo", `{"a":1}`)
		}
		if _, err := io.WriteString(conns[i], req); err != nil {
			t.Fatal(err)
		}
		code, body := readAnswer(t, brs[i])
		switch i % 3 {
		case 0:
			if code != http.StatusOK || body != "ok" {
				t.Fatalf("healthz after the hand-off: %d %q", code, body)
			}
		case 1:
			if code != http.StatusUnauthorized {
				t.Fatalf("/mcp without a token after the hand-off: %d %q, want 401", code, body)
			}
		case 2:
			if code != http.StatusOK || !strings.Contains(body, `"result"`) || !strings.Contains(body, `{\"a\":1}`) {
				t.Fatalf("tool call after the hand-off: %d %q", code, body)
			}
		}
	}
	// Idle again: handed off again.
	waitIdleWatches(t, f.g, n)
	waitConnServers(t, 0)
	closeWithin(t, f.g, "Close hangs with connections idle on the poller")
	for i := range n {
		readEnd(t, "an idle connection at the gateway's Close", conns[i], brs[i])
	}
}

// TestKeptAliveIdlePipelinedBytes (idle40): bytes of the client's next
// request that net/http read already with the previous one (a pipelined
// request, or its first bytes only, the rest sent later) are never lost
// to a hand-off: the connection stays on net/http until they make a
// request, which is answered, and idles on the poller after.
func TestKeptAliveIdlePipelinedBytes(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	host, _ := keepIdleFront(t, f, 100, testWait)
	for _, split := range []int{1, 3, 4, 10, len("GET /healthz HTTP/1.1\r\n")} {
		c, _ := dialRaw(t, "http://"+host)
		br := bufio.NewReader(c)
		next := healthzRequest(host)
		if _, err := io.WriteString(c, healthzRequest(host)+next[:split]); err != nil {
			t.Fatal(err)
		}
		if code, body := readAnswer(t, br); code != http.StatusOK || body != "ok" {
			t.Fatalf("split %d: first: %d %q", split, code, body)
		}
		// Longer than the hand-off's grace: the rest comes late.
		time.Sleep(300 * time.Millisecond)
		if _, err := io.WriteString(c, next[split:]); err != nil {
			t.Fatal(err)
		}
		if code, body := readAnswer(t, br); code != http.StatusOK || body != "ok" {
			t.Fatalf("split %d: the request whose first bytes came early: %d %q", split, code, body)
		}
		waitIdleWatches(t, f.g, 1)
		// A request that asks to close is answered and the connection ends.
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if code, body := readAnswer(t, br); code != http.StatusOK || body != "ok" {
			t.Fatalf("split %d: Connection: close: %d %q", split, code, body)
		}
		readEnd(t, "after Connection: close", c, br)
		waitIdleWatches(t, f.g, 0)
	}
}

// TestKeptAliveIdleEvictedAndTimedOut (idle40): a kept-alive connection
// handed to the poller stays idle under the listener's cap: at the cap a
// new connection evicts it (its client reads the end), and the idle
// timeout of the listener's server closes the others.
func TestKeptAliveIdleEvictedAndTimedOut(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	const k = 3
	host, _ := keepIdleFront(t, f, k, 3*time.Second)
	conns := make([]net.Conn, k)
	brs := make([]*bufio.Reader, k)
	for i := range k {
		conns[i], _ = dialRaw(t, "http://"+host)
		brs[i] = bufio.NewReader(conns[i])
		if _, err := io.WriteString(conns[i], healthzRequest(host)); err != nil {
			t.Fatal(err)
		}
		readAnswer(t, brs[i])
	}
	waitIdleWatches(t, f.g, k)
	// At the cap: the new connection's request is served, the oldest idle
	// one evicted.
	c, _ := dialRaw(t, "http://"+host)
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, healthzRequest(host)); err != nil {
		t.Fatal(err)
	}
	if code, _ := readAnswer(t, br); code != http.StatusOK {
		t.Fatalf("the connection past the cap: %d", code)
	}
	readEnd(t, "the idle connection evicted at the cap", conns[0], brs[0])
	// The idle timeout closes the rest (the new one included).
	for i := 1; i < k; i++ {
		readEnd(t, "an idle connection past its idle timeout", conns[i], brs[i])
	}
	readEnd(t, "the new connection past its idle timeout", c, br)
	waitIdleWatches(t, f.g, 0)
}

// TestKeptAliveIdleShutdown (idle40): when serving ends (the listener's
// shutdown, the gateway's Close), a connection idle on the poller is
// closed, as net/http's Shutdown closes its idle ones.
func TestKeptAliveIdleShutdown(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	host, cancel := keepIdleFront(t, f, 10, testWait)
	c, _ := dialRaw(t, "http://"+host)
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, healthzRequest(host)); err != nil {
		t.Fatal(err)
	}
	readAnswer(t, br)
	waitIdleWatches(t, f.g, 1)
	cancel()
	closeWithin(t, f.g, "Close hangs")
	readEnd(t, "an idle connection at shutdown", c, br)
	if _, err := io.WriteString(c, healthzRequest(host)); err == nil {
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && err == nil {
			t.Fatal("served after shutdown")
		}
	}
}
