package gateway

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestAnsweredKeptAliveConnNoServeLoop (idle33): a kept-alive connection
// whose parked 2025-era call was answered is served on by a server of
// the gateway's own (serveRest). That server's Serve loop stayed, waiting
// in its one-connection listener's Accept until the connection ended:
// one goroutine per answered connection beside net/http's connection
// goroutine (10,000 of them at approve-all's peak, docs/performance.md,
// "peak33"). Now the loop ends once it handed the connection over: no
// goroutine is left in serveRest, the connections still serve their next
// requests, and the gateway's Close ends them all (verifyNoLeaks).
func TestAnsweredKeptAliveConnNoServeLoop(t *testing.T) {
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
		t.Cleanup(func() { _ = c.Close() })
		conns = append(conns, kept{c, wr, next})
	}
	if n := parked.Load(); n != k {
		t.Fatalf("%d calls parked, want %d", n, k)
	}
	// Each answered connection serves its next request, then idles.
	for i, kc := range conns {
		if _, err := io.WriteString(kc.c, kc.next); err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		kc.wr.response(t, func(l string) { body.WriteString(l) })
		if !strings.Contains(body.String(), `"id":"a-1","result":{}`) {
			t.Fatalf("connection %d: the request after the answer got %q", i, body.String())
		}
	}
	// No goroutine waits in serveRest (its server's Serve loop); the
	// answering goroutines return once they handed their connections over.
	var left []string
	for deadline := time.Now().Add(testWait); ; time.Sleep(5 * time.Millisecond) {
		left = parkedStacks("gateway.(*httpFront).serveRest")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in serveRest with %d answered connections kept alive, want none:\n%s", len(left), k, left[0])
		}
	}
	// And they are still served: a second request on each.
	for i, kc := range conns {
		if _, err := io.WriteString(kc.c, kc.next); err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		kc.wr.response(t, func(l string) { body.WriteString(l) })
		if !strings.Contains(body.String(), `"id":"a-1","result":{}`) {
			t.Fatalf("connection %d: the second request after the answer got %q", i, body.String())
		}
	}
	// The gateway's Close closes the idle connections it serves.
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	for i, kc := range conns {
		_ = kc.c.SetReadDeadline(time.Now().Add(testWait))
		if n, err := kc.wr.br.Read(make([]byte, 1)); err == nil {
			t.Fatalf("connection %d: read %d bytes after Close, want its end", i, n)
		}
	}
}
