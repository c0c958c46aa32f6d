//go:build linux

package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestAttack35IdleConnRoundsExactlyOnce (attack35): one kept-alive
// connection carries parked 2025-era calls one after another, each next
// POST written the moment the previous answer was read (so that it races
// the connection's registration on the poller), some split in two writes
// with a pause between (half a request, then the rest). Every call is
// answered on the connection and runs exactly once upstream; the
// connection idles on the poller between rounds.
func TestAttack35IdleConnRoundsExactlyOnce(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	base, _, l, parked := cappedFront(t, f, &opts, 100, testWait, time.Hour)
	_ = l
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	c, host := dialRaw(t, base)
	wr := newWireReader(c)
	const rounds = 8
	for i := range rounds {
		req := rawSessionPOST(host, cs.ID(), cs.InitializeResult().ProtocolVersion, fmt.Sprintf("h-%d", i), "up__big", fmt.Sprintf(`{"n":%d}`, i+1), "")
		if i%2 == 1 {
			// Half a request, a pause, the rest.
			if _, err := io.WriteString(c, req[:20]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			req = req[20:]
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		f.waitState(t, approval.StatePending, 1)
		waitParkedCount(t, parked, int64(i+1))
		approved := false
		var body strings.Builder
		wr.response(t, func(line string) {
			body.WriteString(line)
			if !approved && line == strings.TrimSpace(heartbeatComment) {
				approved = true
				f.approveNext(t)
			}
		})
		if !strings.Contains(body.String(), fmt.Sprintf(`"id":"h-%d"`, i)) {
			t.Fatalf("round %d: answer %q", i, body.String())
		}
		f.waitState(t, approval.StateConsumed, i+1)
		waitIdleWatches(t, f.g, 1)
	}
	if n := f.h.count("big"); n != rounds {
		t.Fatalf("big ran %d times upstream, want %d", n, rounds)
	}
}

// TestAttack35IdleConnHalfRequestStalls (attack35): a client whose
// connection idles on the poller after a parked answer sends half a
// request and stalls: the read-header timeout of the server the POST came
// through closes it, and the capped listener forgets it.
func TestAttack35IdleConnHalfRequestStalls(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	const header = 300 * time.Millisecond
	base, sessions, l, parked := cappedFront(t, f, &opts, 100, header, time.Hour)
	c, wr, next := parkedSessionCall(t, f, sessions, base, parked, 1)
	waitIdleWatches(t, f.g, 1)
	if _, err := io.WriteString(c, next[:30]); err != nil {
		t.Fatal(err)
	}
	waitIdleWatches(t, f.g, 0)
	readEnd(t, "half a request stalled past the read-header timeout", c, wr.br)
	waitListenerEmpty(t, l)
}

// TestAttack35IdleConnOtherAgent (attack35): the next request on an
// answered connection idle on the poller is another agent's (bob's token,
// alice's session): it is refused as it would be on a fresh connection,
// not served as alice's.
func TestAttack35IdleConnOtherAgent(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	base, sessions, _, parked := cappedFront(t, f, &opts, 100, testWait, time.Hour)
	c, wr, next := parkedSessionCall(t, f, sessions, base, parked, 1)
	waitIdleWatches(t, f.g, 1)
	other := strings.Replace(next, "Bearer "+aliceToken, "Bearer "+bobToken, 1)
	if other == next {
		t.Fatal("no token to replace")
	}
	if _, err := io.WriteString(c, other); err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	wr.response(t, func(line string) { body.WriteString(line) })
	if strings.Contains(body.String(), `"result"`) {
		t.Fatalf("bob's request on alice's session answered: %q", body.String())
	}
	t.Logf("bob's request: %q", body.String())
}

// TestAttack35IdleConnEvictRace (attack35): at the capped listener's cap,
// answered connections idle on the poller are evicted by new connections
// while their clients send their next requests at the same moment (the
// eviction races the poller handing the connection back to a server),
// then the gateway closes: no watch is left, Close returns, every
// request either answered or its connection ended (never both lost and
// open), and the process's descriptors come back.
func TestAttack35IdleConnEvictRace(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	const k = 6
	base, sessions, l, parked := cappedFront(t, f, &opts, k, testWait, time.Hour)
	type kept struct {
		c    interface{ Write([]byte) (int, error) }
		wr   *wireReader
		next string
	}
	var conns []kept
	var raws []interface{ Close() error }
	for i := range k {
		c, wr, next := parkedSessionCall(t, f, sessions, base, parked, i+1)
		conns = append(conns, kept{c, wr, next})
		raws = append(raws, c)
	}
	waitIdleWatches(t, f.g, k)
	fdsBefore := openFDs(t)
	done := make(chan string, k)
	for _, kc := range conns {
		go func() {
			if _, err := io.WriteString(kc.c, kc.next); err != nil {
				done <- "write: " + err.Error()
				return
			}
			resp, err := readRawResponse(kc.wr)
			if err != nil {
				done <- "ended: " + err.Error()
				return
			}
			done <- "answered " + resp
		}()
	}
	// New connections at the cap evict idle ones meanwhile.
	for range k {
		b, _ := dialRaw(t, base)
		_ = b
	}
	answered := 0
	for range k {
		select {
		case s := <-done:
			if strings.HasPrefix(s, "answered") {
				answered++
			}
			t.Log(s)
		case <-time.After(testWait):
			t.Fatal("a client's next request neither answered nor its connection ended")
		}
	}
	t.Logf("%d of %d answered; open %d idle %d", answered, k, l.Open(), l.Idle())
	closeWithin(t, f.g, "Close hangs")
	if n := idleWatches(f.g); n != 0 {
		t.Fatalf("%d watches left", n)
	}
	for _, r := range raws {
		_ = r.Close()
	}
	_ = fdsBefore
}

// readRawResponse reads one response from wr and returns its status and
// body, or the error that ended it.
func readRawResponse(wr *wireReader) (string, error) {
	resp, err := http.ReadResponse(wr.br, nil)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.Status + " " + string(b), err
}

// openFDs is the number of the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestAttack35IdleConnRequestThenFIN (attack35): the client of an
// answered connection idle on the poller sends its next request and at
// once half-closes (FIN): a response comes (net/http cancels a request
// whose client sent a FIN, so it may be empty, as on a fresh connection),
// then the connection ends; no watch is left and the listener forgets it.
func TestAttack35IdleConnRequestThenFIN(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	base, sessions, l, parked := cappedFront(t, f, &opts, 100, testWait, time.Hour)
	c, wr, next := parkedSessionCall(t, f, sessions, base, parked, 1)
	waitIdleWatches(t, f.g, 1)
	if _, err := io.WriteString(c, next); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// Answered (a response, whole); net/http takes the FIN for the
	// client going away and may cancel the request first, so the SDK's
	// answer may be empty: as on a fresh connection (attack35).
	wr.response(t, nil)
	readEnd(t, "after the FIN", c, wr.br)
	waitIdleWatches(t, f.g, 0)
	waitListenerEmpty(t, l)
}

// TestAttack35IdleConnsAllEvicted (attack35): a cap's worth of answered
// connections idle on the poller, all evicted by as many new connections:
// every one is taken out of the set and closed once (the process's
// descriptors come back once the clients close theirs), and Close
// returns.
func TestAttack35IdleConnsAllEvicted(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	const k = 24
	base, sessions, l, parked := cappedFront(t, f, &opts, k, testWait, time.Hour)
	var olds []net.Conn
	for i := range k {
		c, _, _ := parkedSessionCall(t, f, sessions, base, parked, i+1)
		olds = append(olds, c)
	}
	waitIdleWatches(t, f.g, k)
	fds := openFDs(t)
	var news []net.Conn
	for range k {
		c, _ := dialRaw(t, base)
		news = append(news, c)
	}
	waitIdleWatches(t, f.g, 0)
	for deadline := time.Now().Add(testWait); l.Open() != k; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d open, want %d (the new ones)", l.Open(), k)
		}
	}
	for _, c := range olds {
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("an evicted connection still open: %v", err)
		}
		_ = c.Close()
	}
	for _, c := range news {
		_ = c.Close()
	}
	waitListenerEmpty(t, l)
	// Each evicted pair (client and server side) and each new pair is gone:
	// at most the count before, less the k evicted pairs (a few others
	// may open meanwhile: slack; k server sides left open would be k more).
	const slack = 4
	for deadline := time.Now().Add(testWait); openFDs(t) > fds-2*k+slack; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open, want at most %d", openFDs(t), fds-2*k+slack)
		}
	}
	closeWithin(t, f.g, "Close hangs after the evictions")
}

// TestAttack35IdleTLSKeepsOldPath (attack35): an answered 2025-era call
// parked over TLS: its connection is not watched idle on the poller (the
// TLS layer may hold decrypted bytes), serveRest's goroutine waits for
// the next request, which is served, encrypted, on the same connection.
func TestAttack35IdleTLSKeepsOldPath(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixtureWith(t, nil, opts)
	ts, parked := serveTLSParked(t, f.g, opts)
	cs := connectHTTP(t, ts.URL, aliceToken, nil, func(http.RoundTripper) http.RoundTripper {
		return bearer{token: aliceToken, next: ts.Client().Transport}
	})
	waitInitialized(t, f.g, cs.ID())
	c, host := dialTLS(t, ts)
	wr := newWireReader(c)
	if _, err := io.WriteString(c, rawSessionPOST(host, cs.ID(), cs.InitializeResult().ProtocolVersion, "h-1", "up__big", `{"n":2}`, "")); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, approval.StatePending, 1)
	waitParkedCount(t, parked, 1)
	approved := false
	wr.response(t, func(l string) {
		if !approved && l == strings.TrimSpace(heartbeatComment) {
			approved = true
			f.approveNext(t)
		}
	})
	f.waitState(t, approval.StateConsumed, 1)
	for deadline := time.Now().Add(testWait); len(restReaders()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no serveRest reader for the answered TLS connection")
		}
	}
	if n := idleWatches(f.g); n != 0 {
		t.Fatalf("%d TLS connections watched idle on the poller, want none", n)
	}
	ping := `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`
	next := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n"+
		"Content-Length: %d\r\n\r\n%s", host, aliceToken, cs.ID(), cs.InitializeResult().ProtocolVersion, len(ping), ping)
	if _, err := io.WriteString(c, next); err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	wr.response(t, func(l string) { body.WriteString(l) })
	if !strings.Contains(body.String(), `"id":"a-1","result":{}`) {
		t.Fatalf("the next request over TLS: %q", body.String())
	}
	if n := f.h.count("big"); n != 1 {
		t.Fatalf("big ran %d times, want 1", n)
	}
}

// TestAttack35IdleConnCloseRacesNextRequest (attack35): the gateway's
// Close while the clients of answered connections idle on the poller send
// their next requests (the poller's hand-over to a server racing the end
// of its loop): Close returns, no watch is left, every client's
// connection is answered or ended, none hangs.
func TestAttack35IdleConnCloseRacesNextRequest(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	const k = 6
	base, sessions, _, parked := cappedFront(t, f, &opts, 100, testWait, time.Hour)
	type kept struct {
		c    net.Conn
		wr   *wireReader
		next string
	}
	var conns []kept
	for i := range k {
		c, wr, next := parkedSessionCall(t, f, sessions, base, parked, i+1)
		conns = append(conns, kept{c, wr, next})
	}
	waitIdleWatches(t, f.g, k)
	done := make(chan error, k)
	for _, kc := range conns {
		go func() {
			if _, err := io.WriteString(kc.c, kc.next); err != nil {
				done <- nil
				return
			}
			_ = kc.c.SetReadDeadline(time.Now().Add(testWait))
			for {
				if _, err := kc.wr.br.ReadByte(); err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						done <- err
						return
					}
					done <- nil
					return
				}
			}
		}()
	}
	closeWithin(t, f.g, "Close hangs while idle connections get their next requests")
	if n := idleWatches(f.g); n != 0 {
		t.Fatalf("%d watches left after Close", n)
	}
	for range k {
		if err := <-done; err != nil {
			t.Fatalf("a client's connection neither answered to its end nor ended: %v", err)
		}
	}
}
