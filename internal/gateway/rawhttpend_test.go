package gateway

import (
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
)

// owingConn returns a lean connection (the client's side) that owes the
// end of a chunked answer whose one chunk was read, and the server's side
// of it.
func owingConn(t *testing.T) (*h1Conn, net.Conn) {
	t.Helper()
	if !h1Supported {
		t.Skip("no lean HTTP/1.1 exchange on this system")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	lc := newH1Conn(c)
	t.Cleanup(lc.close)
	if _, err := srv.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := lc.readHead(&http.Request{Method: http.MethodPost})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, b); err != nil || string(b) != "hello" {
		t.Fatalf("the chunk: %q, %v", b, err)
	}
	lc.owed = resp.Body
	return lc, srv
}

// arrived waits until lc has something to read (or its end): waited for,
// not slept on.
func arrived(lc *h1Conn) {
	for lc.peek() == h1Quiet {
		runtime.Gosched()
	}
}

// TestH1TakeEnd: the end a pooled connection owes is taken by one
// non-blocking read once it has come, without a read deadline; before it
// comes nothing is read (the connection is passed over, and usable when
// it has come); the rest of an end that came in part is waited for as
// before, under a read deadline (h1FinishWait); a connection closed, or
// with bytes after the end, is not used again.
func TestH1TakeEnd(t *testing.T) {
	t.Run("arrived", func(t *testing.T) {
		lc, srv := owingConn(t)
		if _, err := srv.Write([]byte("0\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		arrived(lc)
		if st := lc.takeEnd(); st != h1Readable || lc.owed != nil {
			t.Fatalf("takeEnd %v, owed %v; want readable, nothing owed", st, lc.owed)
		}
		if lc.lim.waited {
			t.Error("a read deadline was set for an end that had come")
		}
		if st := lc.peek(); st != h1Quiet {
			t.Errorf("after the end: peek %v, want quiet (open, nothing to read)", st)
		}
	})
	t.Run("not yet", func(t *testing.T) {
		lc, srv := owingConn(t)
		if st := lc.takeEnd(); st != h1Quiet || lc.owed == nil {
			t.Fatalf("before the end: takeEnd %v, owed %v; want quiet, still owed", st, lc.owed)
		}
		if _, err := srv.Write([]byte("0\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		arrived(lc)
		if st := lc.takeEnd(); st != h1Readable || lc.owed != nil {
			t.Fatalf("after the end: takeEnd %v, owed %v; want readable, nothing owed", st, lc.owed)
		}
	})
	t.Run("in part", func(t *testing.T) {
		lc, srv := owingConn(t)
		if _, err := srv.Write([]byte("0\r\n")); err != nil {
			t.Fatal(err)
		}
		arrived(lc)
		// The rest never comes: waited for h1FinishWait, then given up.
		if st := lc.takeEnd(); st != h1Gone {
			t.Fatalf("takeEnd %v, want gone", st)
		}
		if !lc.lim.waited {
			t.Error("the rest of the end was waited for without a deadline")
		}
	})
	t.Run("closed", func(t *testing.T) {
		lc, srv := owingConn(t)
		_ = srv.Close()
		arrived(lc)
		if st := lc.takeEnd(); st != h1Gone {
			t.Fatalf("takeEnd %v, want gone", st)
		}
	})
	t.Run("bytes after the end", func(t *testing.T) {
		lc, srv := owingConn(t)
		if _, err := srv.Write([]byte("0\r\n\r\nHTTP/1.1 200 OK\r\n")); err != nil {
			t.Fatal(err)
		}
		arrived(lc)
		if st := lc.takeEnd(); st != h1Gone {
			t.Fatalf("takeEnd %v, want gone", st)
		}
	})
}
