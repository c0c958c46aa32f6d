package httpserve

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// capServer serves on a TCP loopback listener capped at maxConns. Requests
// to /hold block until release is closed; each hold announces itself on
// held first. It returns the address and the shed events.
func capServer(t *testing.T, maxConns int) (addr string, held chan string, release chan struct{}, shed *shedLog) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held = make(chan string, 16)
	release = make(chan struct{})
	shed = &shedLog{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held <- r.URL.Query().Get("who")
			<-release
		}
		_, _ = io.WriteString(w, "ok "+r.URL.Query().Get("who"))
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, h, &Options{Name: "test", MaxConns: maxConns, OnShed: shed.add})
	}()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return ln.Addr().String(), held, release, shed
}

type shedLog struct {
	mu  sync.Mutex
	how []string
}

func (s *shedLog) add(how string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.how = append(s.how, how)
}

func (s *shedLog) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.how...)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func send(t *testing.T, c net.Conn, path string) {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
}

// TestCapWithServer: behind an http.Server at the cap, a new connection
// closes one that never sent a request, never one with a request in
// flight; when all carry requests, the new one gets 503 and the held
// requests finish.
func TestCapWithServer(t *testing.T) {
	addr, held, release, shed := capServer(t, 2)

	silent := dial(t, addr)
	active := dial(t, addr)
	send(t, active, "/hold?who=active")
	if who := <-held; who != "active" {
		t.Fatalf("held %q", who)
	}
	c3 := dial(t, addr)
	send(t, c3, "/hold?who=c3")
	if who := <-held; who != "c3" {
		t.Fatalf("held %q", who)
	}
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Fatal("the silent connection was not closed to make room")
	}
	c4 := dial(t, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c4), nil)
	if err != nil {
		t.Fatalf("refused connection: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("refused connection got %d %v, want 503 with Retry-After", resp.StatusCode, resp.Header)
	}
	close(release)
	readOK(t, bufio.NewReader(active), "active")
	readOK(t, bufio.NewReader(c3), "c3")
	if got := strings.Join(shed.get(), ","); got != "evicted,refused" {
		t.Errorf("shed = %s, want evicted,refused", got)
	}
}

// TestLimitOrder drives a Listener by hand (the ConnState calls an
// http.Server would make): it evicts the connection that has waited
// longest without a request, skips active and hijacked ones, frees a
// place when a connection closes, and refuses when nothing can go.
func TestLimitOrder(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shed := &shedLog{}
	l := Limit(inner, 3, &LimitOptions{OnShed: shed.add})
	defer l.Close()
	type pair struct{ client, server net.Conn }
	open := func() pair {
		t.Helper()
		c := dial(t, inner.Addr().String())
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		l.ConnState(s, http.StateNew)
		return pair{c, s}
	}
	closedByServer := func(p pair) bool {
		t.Helper()
		_, err := p.client.Read(make([]byte, 1))
		return err != nil
	}
	a := open()                             // new: waits from now
	b := open()                             // new
	c := open()                             // new
	l.ConnState(a.server, http.StateActive) // a carries a request
	l.ConnState(b.server, http.StateActive)
	l.ConnState(b.server, http.StateIdle) // b idle again: waits from now
	d := open()                           // evicts c (waiting since before b went idle)
	if !closedByServer(c) {
		t.Fatal("c was not evicted")
	}
	e := open() // evicts b
	if !closedByServer(b) {
		t.Fatal("b was not evicted")
	}
	l.ConnState(d.server, http.StateHijacked)
	l.ConnState(e.server, http.StateActive)
	if got := l.Open(); got != 3 {
		t.Errorf("Open = %d, want 3", got)
	}
	// a active, d hijacked, e active: nothing may go.
	f := dial(t, inner.Addr().String())
	// Accept answers f itself and goes on waiting for one it can keep.
	acceptErr := make(chan error, 1)
	var g net.Conn
	go func() {
		s, err := l.Accept()
		g = s
		acceptErr <- err
	}()
	resp, err := http.ReadResponse(bufio.NewReader(f), nil)
	if err != nil {
		t.Fatalf("f: %v, want 503", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("f: %d, want 503", resp.StatusCode)
	}
	// Closing a frees a place: the next connection is accepted.
	if err := a.server.Close(); err != nil {
		t.Fatal(err)
	}
	dial(t, inner.Addr().String())
	if err := <-acceptErr; err != nil {
		t.Fatal(err)
	}
	if g == nil {
		t.Fatal("no connection accepted after a place was freed")
	}
	if got := strings.Join(shed.get(), ","); got != "evicted,evicted,refused" {
		t.Errorf("shed = %s", got)
	}
	if got := l.Open(); got != 3 {
		t.Errorf("Open = %d, want 3", got)
	}
}

func readOK(t *testing.T, r *bufio.Reader, who string) {
	t.Helper()
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("%s: read response: %v", who, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok "+who {
		t.Fatalf("%s: got %d %q", who, resp.StatusCode, b)
	}
}

// A connection the Listener accepts reaches its descriptor
// (syscall.Conn), so that one taken from net/http can still be watched
// with epoll (the gateway's parked calls); without it the gateway falls
// back to a reader goroutine per parked call.
func TestLimitConnKeepsItsDescriptor(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Limit(inner, 3, nil)
	defer l.Close()
	c := dial(t, inner.Addr().String())
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sc, ok := s.(syscall.Conn)
	if !ok {
		t.Fatalf("%T is not a syscall.Conn", s)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := rc.Control(func(f uintptr) { fd = f }); err != nil || fd == 0 {
		t.Fatalf("descriptor %d, %v", fd, err)
	}
}

// TestLimitOnEvictBeforeClose (idle35): a connection's OnEvict hook runs
// when the Listener evicts it, while its descriptor is still open (the
// gateway takes it out of an epoll set there), and once only; a hook
// cleared with nil does not run.
func TestLimitOnEvictBeforeClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Limit(ln, 1, nil)
	t.Cleanup(func() { _ = l.Close() })
	accept := func() net.Conn {
		t.Helper()
		c := dial(t, ln.Addr().String())
		t.Cleanup(func() { _ = c.Close() })
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sc.Close() })
		return sc
	}
	a := accept()
	calls := 0
	var ctlErr error
	a.(interface{ OnEvict(func()) }).OnEvict(func() {
		calls++
		rc, err := a.(syscall.Conn).SyscallConn()
		if err == nil {
			err = rc.Control(func(uintptr) {})
		}
		ctlErr = err
	})
	b := accept() // evicts a, the one idle connection
	if calls != 1 || ctlErr != nil {
		t.Fatalf("OnEvict ran %d times (want 1), its descriptor then: %v (want open)", calls, ctlErr)
	}
	b.(interface{ OnEvict(func()) }).OnEvict(func() { t.Error("a cleared hook ran") })
	b.(interface{ OnEvict(func()) }).OnEvict(nil)
	_ = accept() // evicts b
	if l.Open() != 1 {
		t.Fatalf("%d connections open, want 1", l.Open())
	}
}
