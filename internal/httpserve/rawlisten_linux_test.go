//go:build linux

package httpserve

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"syscall"
	"testing"

	"toolgate/internal/rawio"
)

// Serve's connections are read and written through rawio (no scheduler
// bookkeeping per read and write; docs/performance.md, "cpu25") under the
// cap's and the first byte's wrappers, and still reach their descriptor.
func TestServeReadsConnectionsRaw(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan net.Conn, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		got <- c
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, &Options{MaxConns: 4}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	sc := <-got
	defer sc.Close()
	if _, ok := sc.(syscall.Conn); !ok {
		t.Fatalf("%T is not a syscall.Conn", sc)
	}
	var chain []string
	for inner := sc; ; {
		chain = append(chain, typeName(inner))
		switch v := inner.(type) {
		case *conn:
			inner = v.Conn
			continue
		case *firstByteConn:
			inner = v.Conn
			continue
		case *rawio.Conn:
		default:
			t.Fatalf("the served connection is %v, with no *rawio.Conn", chain)
		}
		break
	}
	// And it still carries bytes both ways.
	if _, err := sc.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d, want 204", res.StatusCode)
	}
}

func typeName(c net.Conn) string {
	switch c.(type) {
	case *conn:
		return "*httpserve.conn"
	case *firstByteConn:
		return "*httpserve.firstByteConn"
	case *rawio.Conn:
		return "*rawio.Conn"
	case *net.TCPConn:
		return "*net.TCPConn"
	}
	return "other"
}
