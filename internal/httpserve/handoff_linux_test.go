package httpserve

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestHandoffKeepsTheCapsCount (idle40): a kept-alive connection idle
// after a request its server answered is handed off once its client sent
// nothing for the grace: net/http lets go of it without closing it, and
// the capped listener still counts it open and idle (evictable) until the
// one it was handed to closes it.
func TestHandoffKeepsTheCapsCount(t *testing.T) {
	l, addr, handed := handoffServer(t, 0)

	c := dial(t, addr)
	defer func() { _ = c.Close() }()
	send(t, c, "/x")
	br := bufio.NewReader(c)
	readOK(t, br, "x")
	var hc net.Conn
	select {
	case hc = <-handed:
	case <-time.After(30 * time.Second):
		t.Fatal("the idle connection was not handed off")
	}
	// net/http let go of it: its Close and StateClosed were swallowed.
	for deadline := time.Now().Add(30 * time.Second); len(srvConns()) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("net/http still tracks the handed-off connection")
		}
	}
	if l.Open() != 1 || l.Idle() != 1 {
		t.Fatalf("handed off: open %d idle %d, want 1 and 1", l.Open(), l.Idle())
	}
	// Still open: a request written now is waiting in its socket.
	send(t, c, "/y")
	buf := make([]byte, 3)
	if _, err := io.ReadFull(hc, buf); err != nil || string(buf) != "GET" {
		t.Fatalf("read from the handed-off connection: %q %v", buf, err)
	}
	_ = hc.Close()
	if l.Open() != 0 {
		t.Fatalf("closed by its new owner: open %d, want 0", l.Open())
	}
}

// srvConns is the stacks of net/http's connection goroutines.
func srvConns() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "net/http.(*conn).serve") {
			out = append(out, g)
		}
	}
	return out
}

// TestHandoffNeverMidRequest (idle40): a request whose line came with the
// previous request (read whole into net/http's reader) and whose headers
// come later is not handed off while net/http reads it: a read of the
// reader's whole buffer then is not the idle peek (more than one read
// deadline since StateIdle). It is answered; the connection is handed
// off once idle after it.
func TestHandoffNeverMidRequest(t *testing.T) {
	_, addr, handed := handoffServer(t, 10*time.Millisecond)

	c := dial(t, addr)
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\nGET /y HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	readOK(t, br, "x")
	// The headers come well past the grace.
	time.Sleep(200 * time.Millisecond)
	if _, err := io.WriteString(c, "Host: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	readOK(t, br, "y")
	select {
	case hc := <-handed:
		_ = hc.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("the idle connection was not handed off after the second answer")
	}
	if len(handed) != 0 {
		t.Fatal("handed off twice")
	}
}

// handoffServer serves "ok <path>" on a capped listener (10 connections)
// on 127.0.0.1 whose hand-off takes every connection and sends it on
// handed; grace is the hand-off's grace (0: the default). The server is
// shut down at the test's end.
func handoffServer(t *testing.T, grace time.Duration) (*Listener, string, chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return handoffServerOn(t, ln, grace)
}

// handoffServerOn is handoffServer on the listener ln.
func handoffServerOn(t *testing.T, ln net.Listener, grace time.Duration) (*Listener, string, chan net.Conn) {
	t.Helper()
	l := Limit(ln, 10, nil)
	if grace > 0 {
		l.handoffGrace = grace
	}
	handed := make(chan net.Conn, 2)
	l.SetHandoff(func(c net.Conn) bool { handed <- c; return true })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok "+r.URL.Path[1:]) }),
		ConnState: l.ConnState, IdleTimeout: time.Minute, ReadHeaderTimeout: time.Minute}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()); <-served })
	return l, ln.Addr().String(), handed
}

// TestHandoffGraceByteNotPeekedAgain (httpcpu44): when the hand-off's
// grace wait sees the next request's first byte, Read takes the
// connection out of the idle list without waiting for that byte again:
// one wait on the socket (awaitByte: a peek, a system call) per
// kept-alive request, not two. The accepted connections count the waits
// on their descriptor (RawConn.Read); the grace is long, so the
// connection is never handed off.
func TestHandoffGraceByteNotPeekedAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	_, addr, handed := handoffServerOn(t, cl, 30*time.Second)

	c := dial(t, addr)
	br := bufio.NewReader(c)
	send(t, c, "/x")
	readOK(t, br, "x")
	// Waits are counted as they end: the one for the first request's
	// byte has; the grace's wait after its answer has not.
	if got := cl.waits.Load(); got != 1 {
		t.Fatalf("after the first request: %d waits ended, want 1", got)
	}
	send(t, c, "/y")
	readOK(t, br, "y")
	if got := cl.waits.Load() - 1; got != 1 {
		t.Errorf("the kept-alive request's first byte was waited for %d times on the socket, want 1 (the grace's wait)", got)
	}
	select {
	case <-handed:
		t.Fatal("handed off within the grace")
	default:
	}
}

// A countingListener's connections count the waits on their descriptor
// that ended (RawConn.Read calls that returned) in waits.
type countingListener struct {
	net.Listener
	waits atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, waits: &l.waits}, nil
}

type countingConn struct {
	net.Conn
	waits *atomic.Int64
}

func (c *countingConn) SyscallConn() (syscall.RawConn, error) {
	rc, err := c.Conn.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil, err
	}
	return &countingRawConn{RawConn: rc, waits: c.waits}, nil
}

type countingRawConn struct {
	syscall.RawConn
	waits *atomic.Int64
}

func (rc *countingRawConn) Read(f func(uintptr) bool) error {
	defer rc.waits.Add(1)
	return rc.RawConn.Read(f)
}
