package httpserve

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkCappedKeepAlive: one client's keep-alive requests, one at a
// time, to Serve behind the connection cap: each request's first read
// goes through the idle connection's awaitByte (fixes36).
func BenchmarkCappedKeepAlive(b *testing.B) { benchCappedKeepAlive(b, nil) }

// BenchmarkCappedKeepAliveHandoff: the same with an idle hand-off set
// (idle40) that never takes the connection: each idle wait first waits
// for the next request under handoffGrace (the client's request comes
// sooner, so nothing is handed off).
func BenchmarkCappedKeepAliveHandoff(b *testing.B) {
	benchCappedKeepAlive(b, func(net.Conn, *http.Server) bool { return false })
}

func benchCappedKeepAlive(b *testing.B, handoff func(net.Conn, *http.Server) bool) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, &Options{MaxConns: 100, IdleHandoff: handoff}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Serve = %v", err)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	req := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	b.ResetTimer()
	for range b.N {
		if _, err := io.WriteString(c, req); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}
