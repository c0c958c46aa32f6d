//go:build linux

package gateway

import (
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"
)

// tcpPair is a connected pair of loopback TCP connections: the server's
// end (as a parked call's) and the client's.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.Close()
		_ = server.Close()
	})
	return server, client
}

// waitGone waits until gone is closed, failing after testWait.
func waitGone(t *testing.T, gone <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(testWait):
		t.Fatalf("%s: the drop was not noticed", what)
	}
}

// TestConnPollerLoopFails: when the poller's set cannot be waited on
// (EpollWait fails), the drop of a connection watched before is still
// noticed (its watch is handed to a reader goroutine), a connection
// watched after it is watched on a goroutine (watchParked), and stop ends
// both.
func TestConnPollerLoopFails(t *testing.T) {
	verifyNoLeaks(t)
	p, err := newConnPoller(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	fail := make(chan struct{})
	p.epollWait = func(int, []syscall.EpollEvent, int) (int, error) {
		<-fail
		return 0, syscall.EBADF
	}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		p.run()
	}()
	before, bc := tcpPair(t)
	goneBefore := make(chan struct{})
	wb, ok := p.watch(before, func() { close(goneBefore) })
	if !ok {
		t.Fatal("the poller did not take the connection")
	}
	close(fail)
	<-ran
	g := &Gateway{parkPoll: p}
	after, ac := tcpPair(t)
	goneAfter := make(chan struct{})
	wa := g.watchParked(after, func() { close(goneAfter) })

	_ = bc.Close()
	waitGone(t, goneBefore, "watched before the failure")
	_ = ac.Close()
	waitGone(t, goneAfter, "watched after the failure")
	for _, w := range []dropWatch{wb, wa} {
		if got, more := w.stop(); more || len(got) != 0 {
			t.Fatalf("stop after a drop: %q, more %v", got, more)
		}
	}
}
