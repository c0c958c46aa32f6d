//go:build linux

package httpserve

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// The doubts review49b tried on front49's lazy read deadlines, each on a
// real loopback connection, waiting on events: a wait never runs under no
// deadline or an older, longer one than the last asked for.

// readEnds returns the error of f run on a goroutine, failing t when it
// has not returned within a generous bound (a wait never cut off).
func readEnds(t *testing.T, c *firstByteConn, f func() error, cut func()) error {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- f() }()
	waitReading(c)
	cut()
	select {
	case err := <-got:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("a wait in flight was not cut off")
		return nil
	}
}

// TestReviewRawWaitInFlightAborted: a deadline in the past set while a
// wait on the descriptor (awaitByte, RawConn.Read) is in flight reaches
// that wait at once, as it does a Read.
func TestReviewRawWaitInFlightAborted(t *testing.T) {
	_, server := tcpPair(t)
	c := startedConn(server)
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	err := readEnds(t, c, func() error { return awaitByte(c) }, func() {
		if err := c.SetReadDeadline(time.Unix(1, 0)); err != nil {
			t.Error(err)
		}
	})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("aborted wait on the descriptor = %v, want a timeout", err)
	}
}

// TestReviewSetDeadlineBoundsRead: SetDeadline's read half reaches the
// next read (it goes through the lazy SetReadDeadline, not the embedded
// connection's SetDeadline, which would leave the cached deadline stale).
func TestReviewSetDeadlineBoundsRead(t *testing.T) {
	_, server := tcpPair(t)
	under := &deadlineCounter{Conn: server}
	c := startedConn(under)
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 0)); err != nil {
		t.Fatal(err) // the zero deadline handed below
	}
	want := time.Now().Add(20 * time.Millisecond)
	if err := c.SetDeadline(want); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after SetDeadline = %v, want a timeout", err)
	}
	if _, last := under.count(); !last.Equal(want) {
		t.Fatalf("read deadline below %v, want SetDeadline's %v", last, want)
	}
}

// TestReviewCloseEndsWait: Close while a read waits (no deadline) ends it.
func TestReviewCloseEndsWait(t *testing.T) {
	_, server := tcpPair(t)
	c := startedConn(server)
	err := readEnds(t, c, func() error { _, err := c.Read(make([]byte, 1)); return err }, func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read ended by Close = %v, want net.ErrClosed", err)
	}
}

// TestReviewNestedAbortReachesInnerRead: a connection served on after a
// parked call's answer is AwaitFirstByte's firstByteConn over the agent
// listener's (started) one; a deadline in the past set on the outer while
// its read waits in the inner reaches that read, as net/http's abort of
// its background read needs. The outer's first byte unset, a deadline
// asked for is deferred to its wait, but one in the past is not.
func TestReviewNestedAbortReachesInnerRead(t *testing.T) {
	_, server := tcpPair(t)
	inner := startedConn(server)
	outer := AwaitFirstByte(inner, time.Hour).(*firstByteConn)
	if err := outer.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		t.Fatal(err) // deferred to the outer's wait: an hour
	}
	err := readEnds(t, inner, func() error { _, err := outer.Read(make([]byte, 1)); return err }, func() {
		waitReading(outer)
		if err := outer.SetReadDeadline(time.Unix(1, 0)); err != nil {
			t.Error(err)
		}
	})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("aborted nested read = %v, want a timeout", err)
	}
}

// TestReviewRawWaitBoundedAfterReadMovedDeadline: the deadline a Read's
// first byte moves (the read-header timeout from that byte) bounds the
// next wait on the descriptor too: a byte, then silence, is cut off.
func TestReviewRawWaitBoundedAfterReadMovedDeadline(t *testing.T) {
	client, server := tcpPair(t)
	c := AwaitFirstByte(server, time.Millisecond).(*firstByteConn)
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("first byte = %d %v", n, err)
	}
	got := make(chan error, 1)
	go func() { got <- awaitByte(c) }()
	select {
	case err := <-got:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("wait after the first byte = %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a wait after the first byte ran under no deadline")
	}
}
