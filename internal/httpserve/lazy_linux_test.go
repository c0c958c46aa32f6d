//go:build linux

package httpserve

import (
	"errors"
	"os"
	"testing"
	"time"

	"toolgate/internal/rawio"
)

// BenchmarkKeptAliveDeadlines is the read deadlines of one kept-alive
// request on the agent listener, through a started firstByteConn over
// loopback TCP read raw (as rawListener's), in net/http's and the cap's order: the idle wait's, the
// hand-off's grace wait on the descriptor (awaitByte) and back, the
// request's read (its byte is in the socket), the read-header deadline
// and its clearing, the body's read timeout, the background read started
// and its clearing, the abort of that read (a deadline in the past,
// waited for) and the clearing after it. Each op also writes the
// client's byte, as in both trees.
func BenchmarkKeptAliveDeadlines(b *testing.B) {
	client, server := tcpPair(b)
	c := &firstByteConn{Conn: rawio.WrapConn(server), started: true}
	start, done := make(chan struct{}), make(chan error)
	go func() {
		one := make([]byte, 1)
		for range start {
			_, err := c.Read(one)
			done <- err
		}
	}()
	defer close(start)
	one := []byte("x")
	got := make([]byte, 1)
	for b.Loop() {
		if _, err := client.Write(one); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		_ = c.SetReadDeadline(now.Add(time.Minute))
		_ = c.SetReadDeadline(now.Add(100 * time.Millisecond))
		if err := awaitByte(c); err != nil {
			b.Fatal(err)
		}
		_ = c.SetReadDeadline(now.Add(time.Minute))
		if _, err := c.Read(got); err != nil {
			b.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_ = c.SetReadDeadline(time.Time{})
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		start <- struct{}{}
		_ = c.SetReadDeadline(time.Time{})
		_ = c.SetReadDeadline(time.Unix(1, 0))
		if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
			b.Fatalf("aborted read = %v, want a timeout", err)
		}
		_ = c.SetReadDeadline(time.Time{})
	}
}

// TestReadDeadlineBoundsRawWait: a wait on the descriptor (awaitByte, the
// hand-off's grace wait) runs under the read deadline asked for before
// it, as a Read does.
func TestReadDeadlineBoundsRawWait(t *testing.T) {
	_, server := tcpPair(t)
	c := startedConn(server)
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- awaitByte(c) }()
	select {
	case err := <-got:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a wait for a byte that never comes = %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a wait on the descriptor did not end at the read deadline asked for")
	}
}
