package httpserve

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection, closed at the
// test's end.
func tcpPair(tb testing.TB) (client, server net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		_ = client.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}

// deadlineCounter counts the read deadlines set on its connection and
// keeps the last one.
type deadlineCounter struct {
	net.Conn
	mu   sync.Mutex
	sets int
	last time.Time
}

func (c *deadlineCounter) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.sets++
	c.last = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineCounter) count() (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sets, c.last
}

// startedConn is a firstByteConn over under whose first byte counts as
// read already (a kept-alive connection's later requests).
func startedConn(under net.Conn) *firstByteConn {
	return &firstByteConn{Conn: under, started: true}
}

// waitReading returns once c has a read in flight.
func waitReading(c *firstByteConn) {
	for {
		c.mu.Lock()
		n := c.reading
		c.mu.Unlock()
		if n > 0 {
			return
		}
		runtime.Gosched()
	}
}

// TestReadDeadlineSetOnlyWhenAReadWaits: the read deadlines net/http and
// the cap set around a kept-alive request while no read waits reach the
// connection below only as the last of them, when a read starts; that
// read waits under it (a deadline in the past fails it at once, with the
// client's byte in the socket), and the one after under the next.
func TestReadDeadlineSetOnlyWhenAReadWaits(t *testing.T) {
	client, server := tcpPair(t)
	under := &deadlineCounter{Conn: server}
	c := startedConn(under)
	now := time.Now()
	for _, d := range []time.Time{now.Add(time.Minute), now.Add(100 * time.Millisecond), now.Add(time.Minute),
		now.Add(10 * time.Second), {}, now.Add(20 * time.Second), {}, time.Unix(1, 0)} {
		if err := c.SetReadDeadline(d); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := under.count(); n != 0 {
		t.Fatalf("%d read deadlines set below with no read, want 0", n)
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := c.Read(b); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read under a deadline in the past = %v, want a timeout", err)
	}
	if n, last := under.count(); n != 1 || !last.Equal(time.Unix(1, 0)) {
		t.Fatalf("%d read deadlines set below (last %v), want 1, the last asked for", n, last)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(b); err != nil || n != 1 || b[0] != 'x' {
		t.Fatalf("read with no deadline = %d %q %v, want the client's byte", n, b[:n], err)
	}
	if n, last := under.count(); n != 2 || !last.IsZero() {
		t.Fatalf("%d read deadlines set below (last %v), want 2, the last none", n, last)
	}
}

// TestReadDeadlineReachesReadInFlight: a deadline set while a read waits
// reaches that read at once (net/http's abort of its background read,
// the parked call's watch stopping: connWatch.stop).
func TestReadDeadlineReachesReadInFlight(t *testing.T) {
	_, server := tcpPair(t)
	c := startedConn(server)
	got := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		got <- err
	}()
	waitReading(c)
	if err := c.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("aborted read = %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a read in flight did not end at a deadline in the past")
	}
}

// TestLaterRequestStalledHeadersCut: on a kept-alive connection the
// second request's headers, started and then stalled, are cut at the
// read-header timeout from their first byte, and a second request's
// stalled body at the read timeout, with the deadlines asked for while
// no read waited.
func TestLaterRequestStalledHeadersCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		readErr := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			if r.URL.Path == "/slow" {
				readErr <- err
			}
			_, _ = io.WriteString(w, "ok")
		})
		ln := serveInBubble(t, h, &Options{ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, MaxConns: 4})

		post := "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
		c := ln.dial(t)
		br := bufio.NewReader(c)
		go func() { _, _ = io.WriteString(c, post) }()
		readAnswer(t, br)
		time.Sleep(time.Second)
		go func() { _, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\n") }() // no end of headers
		start := time.Now()
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("a connection whose second request's headers stalled got data")
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("the second request's stalled headers cut after %v, want the read-header timeout 2s", got)
		}

		c = ln.dial(t)
		br = bufio.NewReader(c)
		go func() { _, _ = io.WriteString(c, post) }()
		readAnswer(t, br)
		go func() {
			_, _ = io.WriteString(c, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello")
		}()
		start = time.Now()
		err := <-readErr
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read of the second request's stalled body = %v, want a timeout", err)
		}
		if got := time.Since(start); got != 5*time.Second {
			t.Errorf("the second request's body read failed after %v, want the read timeout 5s", got)
		}
	})
}

// readAnswer reads one "ok" answer from br.
func readAnswer(t *testing.T, br *bufio.Reader) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("answer %d %q, want 200 ok", resp.StatusCode, body)
	}
}
