package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// BenchmarkCallThroughGateway2026WithToken is BenchmarkCallThroughGateway2026
// (lean front on) with a progress token on every call, as the go-sdk and
// TypeScript clients send one when the caller wants progress: since branch
// tok26 the lean front serves it (lean2026.go), before it the SDK path's
// stateless handler did. The upstream sends no progress; /http is an HTTP
// upstream, /stdio the test binary (one shared session).
//
//	go test -run '^$' -bench 'CallThroughGateway2026WithToken' -benchtime 2000x -count 6 -benchmem ./internal/gateway/
func BenchmarkCallThroughGateway2026WithToken(b *testing.B) {
	for _, c := range []struct {
		name string
		up   func(b *testing.B) ServerConfig
	}{
		{"http", func(b *testing.B) ServerConfig { b.Helper(); return ServerConfig{Name: "up", URL: benchUpstream(b)} }},
		{"stdio", func(*testing.B) ServerConfig { sc := stdioServer("up"); sc.Sessions = SessionsShared; return sc }},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
			cs := benchFront2026(b, []ServerConfig{c.up(b)}, gate.New(nil, policy.NewHolder(p), nil), nil)
			// The first call opens the upstream's session for 2026 agents.
			if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				p := &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs}
				p.SetProgressToken("bench-tok")
				res, err := cs.CallTool(b.Context(), p)
				if err != nil || res.IsError {
					b.Fatalf("call: %v %+v", err, res)
				}
			}
		})
	}
}

// benchFront2026 serves a gateway of servers and gt over HTTP (opts) and
// returns a go-sdk client session with it speaking 2026-07-28 (alice's
// token; no protocol session: each call a stateless POST); everything
// ends with b.
func benchFront2026(b *testing.B, servers []ServerConfig, gt *gate.Gate, opts *HTTPOptions) *mcp.ClientSession {
	b.Helper()
	g, err := New(b.Context(), servers, gt, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	h, err := g.Handler(testAuth, opts)
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(h)
	b.Cleanup(ts.Close)
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := cl.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: aliceToken, next: http.DefaultTransport}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != modernVersion {
		b.Fatalf("negotiated %s, want %s", v, modernVersion)
	}
	return cs
}
