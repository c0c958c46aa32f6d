package gateway

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// serveTLSParked serves g's handler (and, at /tls, whether a request came
// with r.TLS) over TLS, HTTP/1.1 only, with a certificate of the test's
// own; the returned counter counts the calls parked.
func serveTLSParked(t *testing.T, g *Gateway, opts *HTTPOptions) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	g.parkHook = func() { n.Add(1) }
	h, err := g.Handler(testAuth, opts)
	g.parkHook = nil
	if err != nil {
		t.Fatalf("Handler: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.HandleFunc("/tls", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "tls=%t", r.TLS != nil && r.TLS.HandshakeComplete)
	})
	ts := httptest.NewUnstartedServer(mux)
	ts.EnableHTTP2 = false
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, &n
}

// dialTLS opens a TLS connection to ts.
func dialTLS(t *testing.T, ts *httptest.Server) (*tls.Conn, string) {
	t.Helper()
	host := strings.TrimPrefix(ts.URL, "https://")
	cfg := ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	c, err := tls.Dial("tcp", host, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, host
}

// TestLeanParkedTLS (issue 13): held 2026-07-28 calls that came over TLS
// are parked as plain ones are: no goroutine per call (the gate's events,
// the shared poller on the TCP socket under the TLS layer, no reader per
// connection), a client that closes its connection, or sends only a
// close_notify, has its call cancelled at once (DropGrace is an hour),
// and the approved calls are answered, encrypted, each run once.
func TestLeanParkedTLS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the shared poller of parked connections is Linux's (epoll)")
	}
	verifyNoLeaks(t)
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixtureWith(t, nil, opts)
	ts, parked := serveTLSParked(t, f.g, opts)
	// A first allowed call starts the gateway's upstream and poller.
	c0, host := dialTLS(t, ts)
	if _, err := io.WriteString(c0, rawModernRequest(host, "0", "up__echo", `{}`)); err != nil {
		t.Fatal(err)
	}
	if resp, b := readRaw(t, bufio.NewReader(c0)); resp.StatusCode != http.StatusOK {
		t.Fatalf("allowed call: %d %s", resp.StatusCode, b)
	}
	<-f.h.args

	const k = 12
	before := runtime.NumGoroutine()
	existing := goroutineIDs(parkedStacks("goroutine "))
	conns := make([]*tls.Conn, 0, k)
	for i := range k {
		c, _ := dialTLS(t, ts)
		if _, err := io.WriteString(c, rawModernRequest(host, fmt.Sprint(10+i), "up__big", fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	f.waitState(t, approval.StatePending, k)
	waitParkedCount(t, parked, k)
	const stray = k / 2
	for deadline := time.Now().Add(testWait); ; time.Sleep(5 * time.Millisecond) {
		d := runtime.NumGoroutine() - before
		if d <= stray {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d more goroutines with %d TLS calls parked, want at most %d strays; the new ones:\n%s",
				d, k, stray, newGoroutines(existing, "no frame"))
		}
	}
	if r := parkedStacks("(*connWatch).read"); len(r) != 0 {
		t.Errorf("%d reader goroutines for %d parked TLS calls, want none (the shared poller watches them)", len(r), k)
	}

	// The client going away: the connection's end, then a close_notify
	// alone (the TCP connection stays open), each noticed at once.
	_ = conns[0].Close()
	f.waitState(t, approval.StateCancelled, 1)
	if err := conns[1].CloseWrite(); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, approval.StateCancelled, 2)
	if r := parkedStacks("(*connWatch).read"); len(r) != 0 {
		t.Errorf("%d reader goroutines left after the drops, want none", len(r))
	}

	for _, r := range f.waitState(t, approval.StatePending, k-2) {
		if _, err := f.gt.Review(t.Context(), r.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns[2:] {
		resp, b := readRaw(t, bufio.NewReader(c))
		if resp.StatusCode != http.StatusOK || !resp.Close || bytes.Contains(b, []byte(`"isError":true`)) ||
			!bytes.Contains(b, []byte(fmt.Sprintf(`"id":%d,`, 12+i))) {
			t.Fatalf("approved call %d: %d close=%t %s", 12+i, resp.StatusCode, resp.Close, b)
		}
	}
	if n := f.h.count("big"); n != k-2 {
		t.Fatalf("the approved calls ran %d times, want %d", n, k-2)
	}
}

// TestLeanParkedTLSPipelined: what a TLS client sends after its held
// call's request (here in the same TLS record, so decrypted into the TLS
// layer's buffer before the call is parked) is served after the answer,
// on the same connection, with r.TLS as net/http would have set it.
func TestLeanParkedTLSPipelined(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixtureWith(t, nil, opts)
	ts, parked := serveTLSParked(t, f.g, opts)
	c, host := dialTLS(t, ts)
	req := rawModernRequest(host, "1", "up__big", `{"n":3}`) + "GET /tls HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, approval.StatePending, 1)
	waitParkedCount(t, parked, 1)
	f.approveNext(t)
	br := bufio.NewReader(c)
	resp, b := readRaw(t, br)
	if resp.StatusCode != http.StatusOK || resp.Close || !bytes.Contains(b, []byte(`"id":1,"result"`)) {
		t.Fatalf("held call: %d close=%t %s", resp.StatusCode, resp.Close, b)
	}
	resp, b = readRaw(t, br)
	if resp.StatusCode != http.StatusOK || string(b) != "tls=true" {
		t.Fatalf("the request after it: %d %q, want tls=true", resp.StatusCode, b)
	}
	if n := f.h.count("big"); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// TestLeanParkedTLSClients: the Go SDK's client (a 2025-era session, its
// held call streamed) and Go's net/http client (a 2026-07-28 call), each
// over TLS, get their held call parked and its answer once approved.
func TestLeanParkedTLSClients(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixtureWith(t, nil, opts)
	ts, parked := serveTLSParked(t, f.g, opts)
	tr := ts.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)

	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: aliceToken, next: tr}}}, era2025)
	if err != nil {
		t.Fatalf("connect agent: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	waitInitialized(t, f.g, cs.ID())
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__big", Arguments: map[string]any{"n": 4}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	f.waitState(t, approval.StatePending, 1)
	waitParkedCount(t, parked, 1)
	f.approveNext(t)
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("SDK call over TLS: %+v", res)
	}

	body := modernCallBody(`"m-1"`, "up__big", `{"n":5}`, "")
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + aliceToken, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": modernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "up__big"} {
		req.Header.Set(k, v)
	}
	ex, b := f.doApproving(t, &http.Client{Transport: tr}, req)
	if ex.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":"m-1","result"`)) || bytes.Contains(b, []byte(`"isError":true`)) {
		t.Fatalf("net/http call over TLS: %d %s", ex.StatusCode, b)
	}
	if n := parked.Load(); n != 2 {
		t.Errorf("%d calls parked, want 2", n)
	}
	if n := f.h.count("big"); n != 2 {
		t.Fatalf("ran %d times, want 2", n)
	}
}

// TestDrainTLS: drainTLS returns what the TLS layer decrypted and did not
// hand out yet (net/http's background read takes one byte of a record),
// without reading the socket (a read deadline in the past fails before
// any read), and leaves the connection readable.
func TestDrainTLS(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.StartTLS()
	t.Cleanup(ts.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	cfg := ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "example.com"
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	tc := tls.Client(client, cfg)
	raw, ok := <-accepted
	if !ok {
		t.Fatal("no connection accepted")
	}
	sc := tls.Server(raw, ts.TLS)
	t.Cleanup(func() { _ = sc.Close() })
	errc := make(chan error, 1)
	go func() { errc <- tc.Handshake() }()
	if err := sc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	if got, err := drainTLS(sc); len(got) != 0 || err != nil {
		t.Fatalf("drain of nothing: %q, %v", got, err)
	}
	if _, err := io.WriteString(tc, "GET /next HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	var one [1]byte
	if _, err := io.ReadFull(sc, one[:]); err != nil || one[0] != 'G' {
		t.Fatalf("first byte: %q, %v", one, err)
	}
	if got, err := drainTLS(sc); string(got) != "ET /next HTTP/1.1\r\n" || err != nil {
		t.Fatalf("drain: %q, %v; want the rest of the record", got, err)
	}
	// What is in the socket, not the TLS layer, is left to the drop
	// watch: the drain does not read the socket.
	if _, err := io.WriteString(tc, "more"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // not a wait for an event: the bytes must stay unread
	if got, err := drainTLS(sc); len(got) != 0 || err != nil {
		t.Fatalf("drain with bytes in the socket only: %q, %v", got, err)
	}
	if _, err := io.ReadFull(sc, one[:]); err != nil || one[0] != 'm' {
		t.Fatalf("after the drain, the socket's bytes: %q, %v", one, err)
	}
}
