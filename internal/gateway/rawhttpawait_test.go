package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
)

// TestH1AwaitWrite: a request's last bytes written from within the wait
// for its answer (countWriter.await, h1Awaiter) reach the upstream whole
// and return once the answer has begun, whatever the socket takes at once:
// an answer already there, one that comes after the bytes, a write larger
// than the socket's buffers (the rest through the connection), the
// upstream closing instead of answering, an upstream that reset the
// connection (the write's error, as the connection's Write reports it),
// and a connection past its deadline (nothing written, the deadline's
// error).
func TestH1AwaitWrite(t *testing.T) {
	if !h1Supported {
		t.Skip("no lean HTTP/1.1 exchange on this system")
	}
	// await writes p on lc's countWriter as exchange's last flush does and
	// returns what it reported, and the bytes counted.
	await := func(lc *h1Conn, p []byte) (int, int64, error) {
		lc.cw.n = 0
		lc.cw.await = true
		defer func() { lc.cw.await = false }()
		n, err := lc.cw.Write(p)
		return n, lc.cw.n, err
	}
	// answer reads want bytes on srv, then writes the answer.
	answer := func(srv io.ReadWriter, want int) <-chan []byte {
		got := make(chan []byte, 1)
		go func() {
			b := make([]byte, want)
			_, err := io.ReadFull(srv, b)
			if err == nil {
				_, err = srv.Write([]byte("HTTP/1.1 200 OK\r\n"))
			}
			if err != nil {
				b = nil
			}
			got <- b
		}()
		return got
	}
	for _, size := range []int{1, 461, 4 << 10, 512 << 10} {
		srv, c := tcpPair(t)
		if size > 64<<10 {
			// Small socket buffers: the write cannot go out at once.
			_ = c.(*net.TCPConn).SetWriteBuffer(32 << 10)
			_ = srv.(*net.TCPConn).SetReadBuffer(32 << 10)
		}
		lc := newH1Conn(c)
		p := bytes.Repeat([]byte("p"), size)
		p[0], p[size-1] = 'a', 'z'
		got := answer(srv, size)
		n, counted, err := await(lc, p)
		if err != nil || n != size || counted != int64(size) {
			t.Fatalf("%d bytes: write %d (counted %d), %v; want all, no error", size, n, counted, err)
		}
		if b := <-got; !bytes.Equal(b, p) {
			t.Fatalf("%d bytes: the upstream got %d bytes, not the ones written", size, len(b))
		}
		line, err := lc.br.ReadString('\n')
		if err != nil || line != "HTTP/1.1 200 OK\r\n" {
			t.Fatalf("%d bytes: answer %q, %v", size, line, err)
		}
		if st := lc.peek(); st != h1Quiet {
			t.Fatalf("%d bytes: after the answer the connection is %v, want quiet", size, st)
		}
	}

	t.Run("closed instead of an answer", func(t *testing.T) {
		srv, c := tcpPair(t)
		lc := newH1Conn(c)
		done := make(chan error, 1)
		go func() {
			_, err := io.ReadFull(srv, make([]byte, 3))
			_ = srv.Close()
			done <- err
		}()
		n, _, err := await(lc, []byte("abc"))
		if err != nil || n != 3 {
			t.Fatalf("write %d, %v; want 3, no error (the read reports the end)", n, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := lc.br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("read after the upstream closed: %v, want EOF", err)
		}
	})

	t.Run("reset by the upstream", func(t *testing.T) {
		srv, c := tcpPair(t)
		lc := newH1Conn(c)
		_ = srv.(*net.TCPConn).SetLinger(0)
		_ = srv.Close()
		for lc.peek() == h1Quiet { // the reset arrives: waited for, not slept on
			runtime.Gosched()
		}
		n, counted, err := await(lc, []byte("abc"))
		var op *net.OpError
		if n != 0 || counted != 0 || !errors.As(err, &op) || op.Op != "write" || op.Addr == nil ||
			(!errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET)) {
			t.Fatalf("write %d (counted %d), %v; want nothing written, the write's error as the connection reports it", n, counted, err)
		}
	})

	t.Run("past its deadline", func(t *testing.T) {
		_, c := tcpPair(t)
		lc := newH1Conn(c)
		_ = c.SetDeadline(aLongTimeAgo)
		n, counted, err := await(lc, []byte("abc"))
		if n != 0 || counted != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write %d (counted %d), %v; want nothing written, the deadline's error", n, counted, err)
		}
	})
}
