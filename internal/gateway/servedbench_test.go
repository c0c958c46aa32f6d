package gateway

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"toolgate/internal/audit"
	"toolgate/internal/gate"
	"toolgate/internal/httpserve"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// BenchmarkCallServedNoAuth is an allowed call the way e2e/perfpair loads
// `toolgate serve --insecure-no-auth`: a 2025-era SDK client session on
// loopback, the front served by httpserve.Serve with a body read timeout
// (the mcp listener's), the audit trail on a real SQLite file; /http with
// an HTTP upstream, /stdio-shared with one shared stdio upstream (the test
// binary). Its bytes and allocations per call (client and upstream
// included) are what docs/performance.md, "http47", compares.
func BenchmarkCallServedNoAuth(b *testing.B) {
	b.Run("http", func(b *testing.B) { benchServedNoAuth(b, ServerConfig{Name: "up", URL: benchUpstream(b)}) })
	b.Run("stdio-shared", func(b *testing.B) {
		sc := stdioServer("up")
		sc.Sessions = SessionsShared
		benchServedNoAuth(b, sc)
	})
}

func benchServedNoAuth(b *testing.B, up ServerConfig) {
	b.Helper()
	db := sqlitetest.Open(b)
	tr := audit.New(db, nil)
	ctx, cancel := context.WithCancel(b.Context())
	trDone := make(chan error, 1)
	go func() { trDone <- tr.Run(ctx) }()
	g, err := New(ctx, []ServerConfig{up}, gate.New(db, policy.NewHolder(benchPolicy), &gate.Options{Recorder: tr}), nil)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	h, err := g.Handler(nil, &HTTPOptions{InsecureNoAuth: true, ListenAddr: ln.Addr().String()})
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- httpserve.Serve(ctx, ln, h, &httpserve.Options{ReadTimeout: time.Minute}) }()
	b.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			b.Error(err)
		}
		_ = g.Close()
		if err := <-trDone; err != nil && !errors.Is(err, context.Canceled) {
			b.Error(err)
		}
	})
	benchCalls(b, benchConnect(b, "http://"+ln.Addr().String()+"/mcp", ""), "up__echo")
}
