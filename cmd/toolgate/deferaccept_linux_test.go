package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestDeferAcceptHandsOverConnectionsWithData: on the agent listener's
// socket options a connection that has sent nothing is not accepted, one
// that sent its first bytes is (with the bytes there), and the silent one
// is accepted as soon as it sends, or closes.
func TestDeferAcceptHandsOverConnectionsWithData(t *testing.T) {
	lc := net.ListenConfig{KeepAlive: -1, Control: deferAccept}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	tl := ln.(*net.TCPListener)

	silent := dial(t, ln.Addr())
	speaker := dial(t, ln.Addr())
	if _, err := speaker.Write([]byte("P")); err != nil {
		t.Fatal(err)
	}
	got := accept(t, tl, time.Time{})
	if got.RemoteAddr().String() != speaker.LocalAddr().String() {
		t.Fatalf("accepted %v first, want the connection that sent a byte (%v); the silent one is %v",
			got.RemoteAddr(), speaker.LocalAddr(), silent.LocalAddr())
	}
	readByte(t, got, 'P')

	// The silent connection stays with the kernel (the kernel's first
	// timer is 1 s away; it is accepted all the same only about 7 s after
	// its handshake): Accept's deadline passes.
	if err := tl.SetDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if c, err := tl.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("Accept with only a silent connection waiting: %v, want the deadline", err)
	}

	if _, err := silent.Write([]byte("Q")); err != nil {
		t.Fatal(err)
	}
	got = accept(t, tl, time.Time{})
	if got.RemoteAddr().String() != silent.LocalAddr().String() {
		t.Fatalf("accepted %v, want the silent connection %v once it sent", got.RemoteAddr(), silent.LocalAddr())
	}
	readByte(t, got, 'Q')

	// A client that closes without a byte is accepted too (its FIN), so
	// the server sees the end at once.
	quitter := dial(t, ln.Addr())
	_ = quitter.Close()
	got = accept(t, tl, time.Time{})
	if n, err := got.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read from a connection closed before sending: %d, %v; want EOF", n, err)
	}
}

func dial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func accept(t *testing.T, ln *net.TCPListener, deadline time.Time) net.Conn {
	t.Helper()
	if err := ln.SetDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func readByte(t *testing.T, c net.Conn, want byte) {
	t.Helper()
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != want {
		t.Fatalf("read %q, %v; want %q", b, err, want)
	}
}

// TestDeferAcceptRefusedStillListens (attack36): where the kernel refuses
// TCP_DEFER_ACCEPT (here a Unix socket, which has no TCP options; a
// sandbox's or emulation layer's TCP may too), the listener opens all the
// same, accepting at the handshake as outside Linux: deferral saves memory,
// it is not a reason for serve not to start.
func TestDeferAcceptRefusedStillListens(t *testing.T) {
	lc := net.ListenConfig{Control: deferAccept}
	ln, err := lc.Listen(context.Background(), "unix", t.TempDir()+"/s.sock")
	if err != nil {
		t.Fatalf("listen with deferAccept where the option is refused: %v", err)
	}
	_ = ln.Close()
}
