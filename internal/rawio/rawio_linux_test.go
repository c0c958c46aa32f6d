//go:build linux

package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection: the accepted
// end as it comes (a *net.TCPConn) and the dialled one.
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
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	return server, client
}

// addrless is err's text with c's addresses replaced, so that the errors
// of two connections can be compared.
func addrless(err error, c net.Conn) string {
	if err == nil {
		return "<nil>"
	}
	return strings.NewReplacer(c.LocalAddr().String(), "L", c.RemoteAddr().String(), "R").Replace(err.Error())
}

func TestWrapConnReadsAndWritesAsTheConnection(t *testing.T) {
	server, client := tcpPair(t)
	w := WrapConn(server)
	if _, ok := w.(*Conn); !ok {
		t.Fatalf("WrapConn(%T) = %T, want *rawio.Conn", server, w)
	}
	// Both ways, more than a socket's buffers take at once (writes that
	// wait for room, reads that wait for bytes).
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB
	for _, dir := range []struct {
		name string
		from net.Conn
		to   net.Conn
	}{{"to the wrapped end", client, w}, {"from the wrapped end", w, client}} {
		done := make(chan error, 1)
		go func() {
			n, err := dir.from.Write(big)
			if err == nil && n != len(big) {
				err = io.ErrShortWrite
			}
			done <- err
		}()
		got := make([]byte, len(big))
		if _, err := io.ReadFull(dir.to, got); err != nil {
			t.Fatalf("%s: read: %v", dir.name, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: write: %v", dir.name, err)
		}
		if !bytes.Equal(got, big) {
			t.Fatalf("%s: the bytes read differ from those written", dir.name)
		}
	}
	if n, err := w.Read(nil); n != 0 || err != nil {
		t.Fatalf("a zero-length read gave %d, %v; want 0, nil (as net.Conn)", n, err)
	}
	// The end of the stream is io.EOF itself, as net.Conn gives it.
	_ = client.Close()
	if n, err := w.Read(make([]byte, 10)); n != 0 || err != io.EOF { //nolint:errorlint // io.EOF itself, as net.Conn returns it
		t.Fatalf("read after the peer closed: %d, %v; want 0, io.EOF", n, err)
	}
}

// TestWrapConnErrorsAsTheConnection compares the wrapped connection's
// errors with those of the connection itself: a deadline in the past
// (net/http's abortPendingRead), a deadline that passes while a read
// waits, a read on a closed connection, a write to a peer that went away.
func TestWrapConnErrorsAsTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(c net.Conn, peer net.Conn) error
	}{
		{"read after a deadline in the past", func(c, _ net.Conn) error {
			_ = c.SetReadDeadline(time.Unix(1, 0))
			_, err := c.Read(make([]byte, 10))
			return err
		}},
		{"write after a deadline in the past", func(c, _ net.Conn) error {
			_ = c.SetWriteDeadline(time.Unix(1, 0))
			_, err := c.Write([]byte("x"))
			return err
		}},
		{"a waiting read ended by a deadline set in the past", func(c, _ net.Conn) error {
			errc := make(chan error, 1)
			go func() {
				_, err := c.Read(make([]byte, 10))
				errc <- err
			}()
			_ = c.SetReadDeadline(time.Unix(1, 0)) // before or during the read: the same outcome
			return <-errc
		}},
		{"read after close", func(c, _ net.Conn) error {
			_ = c.Close()
			_, err := c.Read(make([]byte, 10))
			return err
		}},
		{"write after close", func(c, _ net.Conn) error {
			_ = c.Close()
			_, err := c.Write([]byte("x"))
			return err
		}},
		{"write to a peer that reset the connection", func(c, peer net.Conn) error {
			_ = peer.(*net.TCPConn).SetLinger(0) // close sends a reset
			_ = peer.Close()
			// The reset may come after a first write: write until one fails.
			for range 1000 {
				if _, err := c.Write([]byte("x")); err != nil {
					return err
				}
				_, _ = c.Read(make([]byte, 1)) // reads the reset once it came
			}
			return errors.New("no write failed")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plainS, plainC := tcpPair(t)
			wrapS, wrapC := tcpPair(t)
			w := WrapConn(wrapS)
			want := tc.do(plainS, plainC)
			got := tc.do(w, wrapC)
			if addrless(got, w) != addrless(want, plainS) {
				t.Fatalf("wrapped: %q\nnet.Conn: %q", addrless(got, w), addrless(want, plainS))
			}
			var gotOp, wantOp *net.OpError
			if !errors.As(got, &gotOp) || !errors.As(want, &wantOp) || gotOp.Op != wantOp.Op || gotOp.Timeout() != wantOp.Timeout() {
				t.Fatalf("wrapped %#v, net.Conn %#v: want the same *net.OpError", got, want)
			}
			for _, target := range []error{os.ErrDeadlineExceeded, net.ErrClosed} {
				if errors.Is(got, target) != errors.Is(want, target) {
					t.Fatalf("errors.Is(%v, %v) = %v, net.Conn's %v", got, target, errors.Is(got, target), errors.Is(want, target))
				}
			}
		})
	}
}

func TestWrapFileReadsAndWritesAsTheFile(t *testing.T) {
	r, wf, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(); _ = wf.Close() }()
	rr, ww := WrapFile(r), WrapFile(wf)
	if rr == nil || ww == nil {
		t.Fatal("WrapFile of os.Pipe's ends = nil, want them wrapped (non-blocking in this process)")
	}
	big := bytes.Repeat([]byte("line of json\n"), 50000) // 650 KB: more than a pipe holds
	done := make(chan error, 1)
	go func() {
		n, err := ww.Write(big)
		if err == nil && n != len(big) {
			err = io.ErrShortWrite
		}
		_ = wf.Close()
		done <- err
	}()
	got, err := io.ReadAll(rr) // to io.EOF, which ReadAll takes as the end
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("the bytes read differ from those written")
	}
	if n, err := rr.Read(make([]byte, 1)); n != 0 || err != io.EOF { //nolint:errorlint // io.EOF itself
		t.Fatalf("read after the writer closed: %d, %v; want 0, io.EOF", n, err)
	}
	// Closed, as (*os.File).Read and Write say it.
	_ = r.Close()
	_, got1 := rr.Read(make([]byte, 1))
	_, want1 := r.Read(make([]byte, 1))
	_, got2 := ww.Write([]byte("x"))
	_, want2 := wf.Write([]byte("x"))
	for _, c := range [][2]error{{got1, want1}, {got2, want2}} {
		if c[0] == nil || c[1] == nil || c[0].Error() != c[1].Error() || !errors.Is(c[0], os.ErrClosed) {
			t.Fatalf("on a closed file: wrapped %v, os.File %v; want the same, os.ErrClosed", c[0], c[1])
		}
	}
}

func TestWrapFileRefusesBlockingDescriptors(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(); _ = w.Close() }()
	_ = r.Fd() // makes r blocking: a raw read of it would hold its thread and P
	if WrapFile(r) != nil {
		t.Fatal("WrapFile wrapped a blocking descriptor")
	}
	if WrapFile(w) == nil {
		t.Fatal("WrapFile did not wrap the non-blocking end")
	}
}

func TestWrappedReadAndWriteAllocateNothing(t *testing.T) {
	server, client := tcpPair(t)
	w := WrapConn(server)
	p, q := make([]byte, 64), make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := client.Write(p); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(w, q); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, q); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a round trip through the wrapped end allocated %v times, want 0", allocs)
	}
}
