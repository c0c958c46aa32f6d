//go:build linux

package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/httpserve"
)

// servedFront serves f's gateway through httpserve.Serve (the listener
// chain toolgate runs: rawio, first byte, the cap) with the idle timeout
// and cap given.
func servedFront(t *testing.T, f *leanFixture, opts *HTTPOptions, maxConns int, idle time.Duration) (base string, parked *atomic.Int64) {
	t.Helper()
	parked = new(atomic.Int64)
	f.g.parkHook = func() { parked.Add(1) }
	h, err := f.g.Handler(testAuth, opts)
	f.g.parkHook = nil
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = httpserve.Serve(ctx, ln, h, &httpserve.Options{MaxConns: maxConns, IdleTimeout: idle, ReadHeaderTimeout: testWait})
	}()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return "http://" + ln.Addr().String(), parked
}

// TestAttack35IdleConnServedChain (attack35): the idle watch of an
// answered connection on the listener chain toolgate runs
// (httpserve.Serve: rawio, first byte, the cap): rounds of parked calls
// on one connection each run once; the connection idles on the poller
// between them and its idle timeout closes it.
func TestAttack35IdleConnServedChain(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	const idle = 400 * time.Millisecond
	base, parked := servedFront(t, f, &opts, 8, idle)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	c, host := dialRaw(t, base)
	wr := newWireReader(c)
	const rounds = 4
	for i := range rounds {
		req := rawSessionPOST(host, cs.ID(), cs.InitializeResult().ProtocolVersion, fmt.Sprintf("h-%d", i), "up__big", fmt.Sprintf(`{"n":%d}`, i+1), "")
		if i > 0 {
			time.Sleep(idle / 4) // idle on the poller a while
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
	start := time.Now()
	readEnd(t, "idle past the idle timeout", c, wr.br)
	if d := time.Since(start); d < idle/2 {
		t.Errorf("closed after %v, before the idle timeout %v", d, idle)
	}
	waitIdleWatches(t, f.g, 0)
}
