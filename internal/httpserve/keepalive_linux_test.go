package httpserve

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// keepAliveOf reads c's keep-alive from its socket: on, idle, interval
// (seconds) and count.
func keepAliveOf(t *testing.T, c net.Conn) (on bool, idle, intvl, cnt int) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var errs [4]error
	var en int
	if err := rc.Control(func(fd uintptr) {
		en, errs[0] = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		idle, errs[1] = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
		intvl, errs[2] = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL)
		cnt, errs[3] = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT)
	}); err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return en != 0, idle, intvl, cnt
}

// TestSpreadKeepAliveOutOfStep: the connections a SpreadKeepAlive
// listener accepts have keep-alive on, each with an idle time of its own
// in [15 s, 30 s), probes again every 15 s and 9 of them; connections
// accepted together do not all get the same idle time (net's default
// gives each 15 s: in step). 64 connections all drawing the same of 15
// values: 15⁻⁶³.
func TestSpreadKeepAliveOutOfStep(t *testing.T) {
	lc := net.ListenConfig{KeepAlive: -1}
	inner, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := SpreadKeepAlive(inner, 15*time.Second)
	t.Cleanup(func() { _ = ln.Close() })
	const n = 64
	idles := map[int]int{}
	for range n {
		d, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		on, idle, intvl, cnt := keepAliveOf(t, c)
		if !on || idle < 15 || idle >= 30 || intvl != 15 || cnt != 9 {
			t.Fatalf("accepted connection's keep-alive: on %v, idle %d s, interval %d s, count %d; want on, [15, 30), 15, 9", on, idle, intvl, cnt)
		}
		idles[idle]++
	}
	if len(idles) < 2 {
		t.Fatalf("%d connections accepted in a burst share one keep-alive idle time %v: in step", n, idles)
	}
}

// TestSpreadKeepAliveDraw: the idle time is base plus the draw in whole
// seconds, below 2·base; a base under 2 s is not spread.
func TestSpreadKeepAliveDraw(t *testing.T) {
	for _, c := range []struct {
		base, draw, idle time.Duration
	}{
		{15 * time.Second, 0, 15 * time.Second},
		{15 * time.Second, 15*time.Second - 1, 29 * time.Second},
		{15 * time.Second, 7500 * time.Millisecond, 22 * time.Second},
		{time.Second, 999 * time.Millisecond, time.Second},
	} {
		got := spreadKeepAlive(c.base, func(n time.Duration) time.Duration {
			if n != c.base {
				t.Errorf("drew from [0, %v), want [0, %v)", n, c.base)
			}
			return c.draw
		})
		want := net.KeepAliveConfig{Enable: true, Idle: c.idle, Interval: c.base, Count: 9}
		if got != want {
			t.Errorf("base %v, draw %v: %+v, want %+v", c.base, c.draw, got, want)
		}
	}
}
