//go:build linux

package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"toolgate/internal/httpserve"
)

// idleWatches is the number of answered connections idle on g's shared
// poller (leanparkidle.go).
func idleWatches(g *Gateway) int {
	p := g.parkPoll.Load()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, w := range p.watches {
		if w.ready != nil {
			n++
		}
	}
	return n
}

// waitIdleWatches waits until g has want answered connections idle on its
// poller.
func waitIdleWatches(t *testing.T, g *Gateway, want int) {
	t.Helper()
	for deadline := time.Now().Add(testWait); idleWatches(g) != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d answered connections idle on the poller, want %d", idleWatches(g), want)
		}
	}
}

// closeWithin closes g and fails with msg unless Close returns within
// testWait (a watch or a queued answer it still waits for).
func closeWithin(t *testing.T, g *Gateway, msg string) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		_ = g.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(testWait):
		t.Fatal(msg)
	}
}

// restReaders is the goroutines waiting in a read of a connection served
// after a parked answer (serveRest's net/http connection goroutines, which
// read through a prefixConn).
func restReaders() []string { return parkedStacks("gateway.(*prefixConn).Read") }

// readEnd reads br until the end of its connection and fails unless that
// comes within testWait.
func readEnd(t *testing.T, what string, c net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(testWait))
	if n, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: read %v, %v, want the connection's end", what, n, err)
	}
}

// TestAnsweredIdleConnHasNoGoroutine (idle35): a kept-alive connection
// whose parked 2025-era call was answered, and whose client sent nothing
// more, waits for its next request on the gateway's shared poller: no
// goroutine reads it (before, net/http's connection goroutine of
// serveRest's server did, one per connection: ≈ 10,000 at approve-all's
// peak). The next request is served on the same connection, and the one
// after it; the gateway's Close ends a connection still idle there.
func TestAnsweredIdleConnHasNoGoroutine(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	base, parked := parkedFront(t, f, &opts)
	const k = 6
	type kept struct {
		c    net.Conn
		wr   *wireReader
		next string
	}
	conns := make([]kept, 0, k)
	for i := range k {
		c, wr, next := parkedSessionCall(t, f, base, base, nil, i+1)
		conns = append(conns, kept{c, wr, next})
	}
	if n := parked.Load(); n != k {
		t.Fatalf("%d calls parked, want %d", n, k)
	}
	waitIdleWatches(t, f.g, k)
	if left := restReaders(); len(left) != 0 {
		t.Fatalf("%d goroutines read %d answered idle connections, want none:\n%s", len(left), k, left[0])
	}
	// The next request on each, then another: both served on the
	// connection (the first after the poller handed it back to a server).
	for round := range 2 {
		for i, kc := range conns[:k-1] {
			if _, err := io.WriteString(kc.c, kc.next); err != nil {
				t.Fatal(err)
			}
			var body strings.Builder
			kc.wr.response(t, func(l string) { body.WriteString(l) })
			if !strings.Contains(body.String(), `"id":"a-1","result":{}`) {
				t.Fatalf("connection %d, request %d after the answer: got %q", i, round+1, body.String())
			}
		}
	}
	// Served by net/http now, not watched; the last one still is.
	waitIdleWatches(t, f.g, 1)
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	if n := idleWatches(f.g); n != 0 {
		t.Errorf("%d connections watched after Close, want none", n)
	}
	for i, kc := range conns {
		readEnd(t, "after Close, connection "+string(rune('0'+i)), kc.c, kc.wr.br)
	}
}

// TestAnsweredIdleConnIdleTimeout (idle35): an answered connection idle
// on the poller is closed after the idle timeout of the server the POST
// came through, and the capped listener forgets it.
func TestAnsweredIdleConnIdleTimeout(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	const idle = 200 * time.Millisecond
	base, sessions, l, parked := cappedFront(t, f, &opts, 100, testWait, idle)
	// Taken before the connection exists, so a test goroutine that runs
	// late under load cannot shorten what it measures: the connection is
	// idle at the earliest once its answer was written, after start.
	start := time.Now()
	c, wr, _ := parkedSessionCall(t, f, sessions, base, parked, 1)
	waitIdleWatches(t, f.g, 1)
	readEnd(t, "an answered connection idle past the idle timeout", c, wr.br)
	if d := time.Since(start); d < idle {
		t.Errorf("closed %v after the call began, before the idle timeout of %v", d, idle)
	}
	waitIdleWatches(t, f.g, 0)
	waitListenerEmpty(t, l)
}

// TestAnsweredIdleConnEvicted (idle35): the capped listener's eviction
// reaches an answered connection idle on the poller: it is taken out of
// the set before it is closed (a closed descriptor leaves the set without
// an event), and the gateway's WaitGroup no longer counts it (Close
// returns).
func TestAnsweredIdleConnEvicted(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	base, sessions, l, parked := cappedFront(t, f, &opts, 2, testWait, time.Hour)
	a, wr, _ := parkedSessionCall(t, f, sessions, base, parked, 1)
	waitIdleWatches(t, f.g, 1)
	b := waitEvicted(t, l, base, a, wr.br)
	_ = b.Close()
	if n := idleWatches(f.g); n != 0 {
		t.Fatalf("%d connections watched after the eviction, want none", n)
	}
	closeWithin(t, f.g, "the gateway's Close still waits after the idle connection was evicted")
}

// TestAnsweredIdleConnClientCloses (idle35): the client ending an
// answered connection idle on the poller (closed, or reset) closes it on
// the gateway's side (the capped listener forgets it) and ends its watch.
func TestAnsweredIdleConnClientCloses(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	base, sessions, l, parked := cappedFront(t, f, &opts, 100, testWait, time.Hour)
	a, _, _ := parkedSessionCall(t, f, sessions, base, parked, 1)
	b, _, _ := parkedSessionCall(t, f, sessions, base, nil, 2)
	waitIdleWatches(t, f.g, 2)
	dropConn(a, false)
	dropConn(b, true)
	waitIdleWatches(t, f.g, 0)
	waitListenerEmpty(t, l)
}

// waitListenerEmpty waits until the capped listener l counts no open
// connection (each closed connection forgotten), failing after testWait.
func waitListenerEmpty(t *testing.T, l *httpserve.Listener) {
	t.Helper()
	for deadline := time.Now().Add(testWait); l.Open() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the capped listener counts %d connections open, want none", l.Open())
		}
	}
}
