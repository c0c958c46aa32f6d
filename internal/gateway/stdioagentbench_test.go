package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// BenchmarkStdioAgentWrite is one bounded write of an answer line to a
// stdio agent's stdout, a pipe the poller watches that a goroutine drains
// (limits.stdio_write_timeout's default bound):
//
//	go test -run '^$' -bench StdioAgentWrite ./internal/gateway/
func BenchmarkStdioAgentWrite(b *testing.B) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(done)
	}()
	b.Cleanup(func() {
		_ = w.Close()
		<-done
		_ = r.Close()
	})
	lw := newLockedWriter(w, 30*time.Second)
	line := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + fmt.Sprintf("%0100d", 0) + `"}]}}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lw.Write(line); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeStdioCall is an allowed tools/call from a stdio agent
// (ServeStdio; its stdout a real pipe, limits.stdio_write_timeout's default
// bound) to an in-process HTTP upstream, one call in flight, the agent
// writing and reading raw lines:
//
//	go test -run '^$' -bench ServeStdioCall ./internal/gateway/
func BenchmarkServeStdioCall(b *testing.B) {
	p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
	g, err := New(b.Context(), []ServerConfig{{Name: "up", URL: benchUpstream(b)}}, gate.New(nil, policy.NewHolder(p), nil), &Options{StdioWriteTimeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	inW, out := benchServeStdio(b, g)
	send := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			b.Fatal(err)
		}
	}
	// answer reads lines until one that carries id (notifications first).
	answer := func(id string) {
		for {
			l, err := out.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if len(l) > 20 && string(l[:len(`{"jsonrpc":"2.0","id":`)+len(id)]) == `{"jsonrpc":"2.0","id":`+id {
				return
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	answer("0")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	call := func(i int) {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__echo","arguments":{"to":"acct-1","amount":5}}}`, i))
		answer(fmt.Sprint(i))
	}
	call(1)
	b.ReportAllocs()
	i := 2
	for b.Loop() {
		call(i)
		i++
	}
}

// benchServeStdio serves a stdio agent on g over two real pipes for the
// benchmark's length and returns the agent's ends: where it writes its
// lines and where it reads g's.
func benchServeStdio(b *testing.B, g *Gateway) (io.Writer, *bufio.Reader) {
	b.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- g.ServeStdio(b.Context(), inR, outW, approval.Principal{ID: "desktop", Kind: "agent"})
	}()
	b.Cleanup(func() {
		_ = inW.Close()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
			b.Errorf("ServeStdio: %v", err)
		}
		_ = outR.Close()
	})
	return inW, bufio.NewReaderSize(outR, 64<<10)
}
