//go:build linux

package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// installPoller gives g, before any call parks, a shared poller changed by
// set (its epoll seams), started as startParkPoller starts one.
func installPoller(t *testing.T, g *Gateway, set func(*connPoller)) {
	t.Helper()
	p, err := newConnPoller(g.log)
	if err != nil {
		t.Fatal(err)
	}
	set(p)
	g.closeMux.Lock()
	defer g.closeMux.Unlock()
	if g.parkPoll.Load() != nil {
		t.Fatal("the gateway runs a poller already")
	}
	g.parkPoll.Store(p)
	stop := context.AfterFunc(g.root, p.stopLoop)
	g.wg.Go(func() {
		defer stop()
		p.run()
	})
}

// waitRestReaders waits until want goroutines read connections served
// after a parked answer (restReaders).
func waitRestReaders(t *testing.T, want int) {
	t.Helper()
	for deadline := time.Now().Add(testWait); len(restReaders()) != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines read answered connections, want %d", len(restReaders()), want)
		}
	}
}

// servedOnce sends next, a ping with id "a-1", then the same ping with
// id "a-2", on c and reads one answer to each, in order: a connection
// served twice (two goroutines reading it) or not at all fails.
func servedOnce(t *testing.T, what string, c net.Conn, wr *wireReader, next string) {
	t.Helper()
	for _, id := range []string{"a-1", "a-2"} {
		req := strings.Replace(next, `"id":"a-1"`, `"id":"`+id+`"`, 1)
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		wr.response(t, func(l string) { body.WriteString(l) })
		if !strings.Contains(body.String(), `"id":"`+id+`","result":{}`) {
			t.Fatalf("%s: request %s after the answer: got %q", what, id, body.String())
		}
	}
}

// TestAnsweredIdleConnAddFails (fixes36): when the shared poller does not
// take an answered kept-alive connection (its epoll_ctl ADD fails),
// serveIdle leaves it to serveRest's goroutine, which serves the client's
// next requests on it, each once, and closes it when the client ends it
// (the capped listener forgets it); no watch or goroutine is left.
func TestAnsweredIdleConnAddFails(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	var failed atomic.Int64
	installPoller(t, f.g, func(p *connPoller) {
		p.epollCtl = func(epfd, op, fd int, ev *syscall.EpollEvent) error {
			if op == syscall.EPOLL_CTL_ADD {
				failed.Add(1)
				return syscall.ENOMEM
			}
			return syscall.EpollCtl(epfd, op, fd, ev)
		}
	})
	base, sessions, l, parked := cappedFront(t, f, &opts, 100, testWait, time.Hour)
	c, wr, next := parkedSessionCall(t, f, sessions, base, parked, 1)
	// The parked call's watch and the answered connection's: both refused.
	waitRestReaders(t, 1)
	if n := failed.Load(); n != 2 {
		t.Fatalf("%d watches refused, want 2 (the parked call's, the idle connection's)", n)
	}
	if n := idleWatches(f.g); n != 0 {
		t.Fatalf("%d connections idle on the poller, want none (it refused them)", n)
	}
	servedOnce(t, "refused by the poller", c, wr, next)
	dropConn(c, false)
	waitListenerEmpty(t, l)
	waitRestReaders(t, 0)
}

// TestAnsweredIdleConnLoopFails (fixes36): when the shared poller's set
// cannot be waited on any more (epoll_wait fails), an answered connection
// idle on it is handed to serveRest's goroutine, and one answered after
// the failure goes there at once (the poller has stopped); each is served
// its client's next requests, once each, and closed when the client ends
// it; the gateway's Close leaves nothing behind.
func TestAnsweredIdleConnLoopFails(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	fail := make(chan struct{})
	installPoller(t, f.g, func(p *connPoller) {
		p.epollWait = func(epfd int, events []syscall.EpollEvent, _ int) (int, error) {
			for {
				select {
				case <-fail:
					return 0, syscall.EBADF
				default:
				}
				// Short waits, so that closing fail is seen.
				if n, err := syscall.EpollWait(epfd, events, 5); n != 0 || err != nil {
					return n, err
				}
			}
		}
	})
	base, sessions, l, parked := cappedFront(t, f, &opts, 100, testWait, time.Hour)
	a, wa, next := parkedSessionCall(t, f, sessions, base, parked, 1)
	waitIdleWatches(t, f.g, 1)
	close(fail)
	waitIdleWatches(t, f.g, 0)
	waitRestReaders(t, 1)
	b, wb, nextB := parkedSessionCall(t, f, sessions, base, nil, 2)
	waitRestReaders(t, 2)
	servedOnce(t, "idle on the poller when it failed", a, wa, next)
	servedOnce(t, "answered after the poller failed", b, wb, nextB)
	dropConn(a, false)
	waitRestReaders(t, 1)
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	readEnd(t, "after Close", b, bufio.NewReader(wb.br))
	waitListenerEmpty(t, l)
}
