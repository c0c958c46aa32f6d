package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/httpserve"
)

// TestParkedStreamRestAsTheListener (attack20): after a parked 2025-era
// held call is answered, the client's next requests on the same
// connection are served as the listener serves them (serveRest): its
// whole handler, not /mcp alone (toolgate serve mounts the agents'
// session API, /v1/, beside /mcp), and its bound on a request's header.
// The same requests after a call held on the connection's goroutine are
// the reference.
func TestParkedStreamRestAsTheListener(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	listener := func(noPark bool) (string, *atomic.Int64) {
		var n atomic.Int64
		f.g.parkHook = func() { n.Add(1) }
		f.g.noPark = noPark
		mcpH, err := f.g.Handler(testAuth, &opts)
		f.g.parkHook, f.g.noPark = nil, false
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/", mcpH)
		mux.HandleFunc("/v1/", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "agent sessions")
		})
		ts := httptest.NewUnstartedServer(mux)
		ts.Config.MaxHeaderBytes = 4 << 10
		ts.Start()
		t.Cleanup(ts.Close)
		return ts.URL, &n
	}
	parkedBase, parked := listener(false)
	onConnBase, _ := listener(true)
	var got [2]string
	for i, b := range []string{parkedBase, onConnBase} {
		count := parked
		if i == 1 {
			count = nil
		}
		c, wr, _ := parkedSessionCall(t, f, b, b, count, i+1)
		host := strings.TrimPrefix(b, "http://")
		var out strings.Builder
		// The agents' session API beside /mcp, then a header over the
		// listener's bound.
		for _, req := range []string{
			"GET /v1/sessions HTTP/1.1\r\nHost: " + host + "\r\n\r\n",
			"GET /v1/sessions HTTP/1.1\r\nHost: " + host + "\r\nX-Big: " + strings.Repeat("b", 32<<10) + "\r\n\r\n",
		} {
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(wr.br, nil)
			if err != nil {
				t.Fatalf("front %d: %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			out.WriteString(resp.Status + " " + strings.TrimSpace(string(body)) + "\n")
		}
		got[i] = out.String()
		_ = c.Close()
	}
	if n := parked.Load(); n != 1 {
		t.Errorf("%d calls parked, want 1", n)
	}
	if got[0] != got[1] {
		t.Errorf("after a parked call:\n%s\nafter a call held on the connection's goroutine:\n%s", got[0], got[1])
	}
}

// parkedSessionCall opens a 2025-era session through sessions (a server
// of the same handler) and sends one held tools/call on a raw connection
// to base; once it is pending (and parked, when parked counts the calls
// parked) it is approved at its first heartbeat, and its response read,
// the n-th call consumed. It returns the connection, what reads it, and a
// ping on the session to send next.
func parkedSessionCall(t *testing.T, f *leanFixture, sessions, base string, parked *atomic.Int64, n int) (net.Conn, *wireReader, string) {
	t.Helper()
	cs := connectHTTP(t, sessions, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	c, host := dialRaw(t, base)
	wr := newWireReader(c)
	if _, err := io.WriteString(c, rawSessionPOST(host, cs.ID(), cs.InitializeResult().ProtocolVersion, "h-1", "up__big", `{"n":2}`, "")); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, approval.StatePending, 1)
	if parked != nil {
		waitParkedCount(t, parked, 1)
	}
	approved := false
	wr.response(t, func(l string) {
		if !approved && l == strings.TrimSpace(heartbeatComment) {
			approved = true
			f.approveNext(t)
		}
	})
	f.waitState(t, approval.StateConsumed, n)
	ping := `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`
	next := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n"+
		"Content-Length: %d\r\n\r\n%s", host, aliceToken, cs.ID(), cs.InitializeResult().ProtocolVersion, len(ping), ping)
	return c, wr, next
}

// cappedFront serves f's gateway on a listener capped at max connections
// (httpserve.Limit) with the read-header and idle timeouts given, and on
// an uncapped one for the sessions' own requests; it returns both bases,
// the capped listener and the count of parked calls.
func cappedFront(t *testing.T, f *leanFixture, opts *HTTPOptions, max int, readHeader, idle time.Duration) (capped, sessions string, l *httpserve.Listener, parked *atomic.Int64) {
	t.Helper()
	parked = new(atomic.Int64)
	f.g.parkHook = func() { parked.Add(1) }
	h, err := f.g.Handler(testAuth, opts)
	f.g.parkHook = nil
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l = httpserve.Limit(ln, max, nil)
	srv := &http.Server{Handler: h, ConnState: l.ConnState, ReadHeaderTimeout: readHeader, IdleTimeout: idle}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})
	return "http://" + ln.Addr().String(), ts.URL, l, parked
}

// TestParkedStreamIdleAfterAnswerIsEvictable (attack20): once a parked
// 2025-era held call is answered and its client sent nothing more, its
// connection is idle for a listener that caps connections, as net/http's
// is after a response: at the cap a new connection evicts it. Before, the
// listener counted it as carrying a request (hijacked) until serveRest's
// read-header timeout closed it, and refused new connections meanwhile.
func TestParkedStreamIdleAfterAnswerIsEvictable(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	base, sessions, l, parked := cappedFront(t, f, &opts, 2, testWait, time.Hour)
	a, wr, _ := parkedSessionCall(t, f, sessions, base, parked, 1)
	b := waitEvicted(t, l, base, a, wr.br)
	_ = b.Close()
}

// waitEvicted waits until a, the one connection open to base's capped
// listener l, is idle for l, opens a second one (b, returned) and a third,
// which l, at its cap of two, makes room for by evicting the longest idle:
// a, read through br, must be closed.
func waitEvicted(t *testing.T, l *httpserve.Listener, base string, a net.Conn, br *bufio.Reader) net.Conn {
	t.Helper()
	for deadline := time.Now().Add(testWait); l.Idle() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the connection answered after a parked call is not idle for the listener (open %d, idle %d)", l.Open(), l.Idle())
		}
	}
	b, _ := dialRaw(t, base)
	for deadline := time.Now().Add(testWait); l.Open() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want 2", l.Open())
		}
	}
	_, _ = dialRaw(t, base) // at the cap: evicts the longest idle
	_ = a.SetReadDeadline(time.Now().Add(testWait))
	if n, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the idle connection answered after a parked call was not evicted (read %v, %v)", n, err)
	}
	return b
}

// TestParkedStreamNextRequestAfterIdle (attack20): a client may send its
// next request on the connection of an answered parked 2025-era call
// after a pause longer than the listener's read-header timeout (up to its
// idle timeout), as after any response of net/http's: the read-header
// timeout runs from the request's first byte. The pause is a sleep: time
// past a timeout is what is tested (it cannot fail with the fix; without
// it the connection is closed before the request).
func TestParkedStreamNextRequestAfterIdle(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	const readHeader = 20 * time.Millisecond
	base, sessions, _, parked := cappedFront(t, f, &opts, 100, readHeader, time.Hour)
	c, wr, next := parkedSessionCall(t, f, sessions, base, parked, 1)
	time.Sleep(10 * readHeader)
	if _, err := io.WriteString(c, next); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(wr.br, nil)
	if err != nil {
		t.Fatalf("the next request after a pause: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `"id":"a-1","result":{}`) {
		t.Errorf("the next request after a pause: %s %s", resp.Status, body)
	}
}
