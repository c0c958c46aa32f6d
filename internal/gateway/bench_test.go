package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/audit"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// The benchmarks compare a tools/call sent straight to an upstream with the
// same call through the gateway (allowed by policy), both over Streamable
// HTTP on loopback with one client session and sequential calls:
//
//	go test -run '^$' -bench 'Call' -benchtime 2000x ./internal/gateway/
//
// The difference is what the gateway adds to a call that needs no approval.

var benchArgs = json.RawMessage(`{"to":"acct-1","amount":5}`)

func benchUpstream(b *testing.B) string {
	b.Helper()
	s := newUpstreamServer(nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	b.Cleanup(ts.Close)
	return ts.URL
}

func benchConnect(tb testing.TB, endpoint, token string) *mcp.ClientSession {
	tb.Helper()
	b := tb
	rt := http.DefaultTransport
	if token != "" {
		rt = bearer{token: token, next: rt}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}}, era2025)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

func benchCalls(b *testing.B, cs *mcp.ClientSession, name string) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: name, Arguments: benchArgs})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
	}
}

func BenchmarkCallDirect(b *testing.B) {
	benchCalls(b, benchConnect(b, benchUpstream(b), ""), "echo")
}

func BenchmarkCallThroughGateway(b *testing.B) {
	// The real gate with a policy that allows the call: the store is never
	// touched on this path, so none is given. The policy is held as
	// toolgate serve holds it (compiled once per revision; a bare *Policy
	// compiles on every evaluation).
	benchGateway(b, gate.New(nil, policy.NewHolder(benchPolicy), nil))
}

var benchPolicy = &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}

// BenchmarkCallThroughGatewayAudited is BenchmarkCallThroughGateway with
// the audit trail on (as serve runs it): each allowed call is queued for
// the chain, which a background goroutine appends to a real SQLite store.
func BenchmarkCallThroughGatewayAudited(b *testing.B) {
	db := sqlitetest.Open(b)
	tr := audit.New(db, nil)
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	benchGateway(b, gate.New(db, policy.NewHolder(benchPolicy), &gate.Options{Recorder: tr}))
}

func benchGateway(b *testing.B, gt *gate.Gate) {
	b.Helper()
	benchCalls(b, benchFront(b, []ServerConfig{{Name: "up", URL: benchUpstream(b)}}, gt), "up__echo")
}

// benchFront serves a gateway of servers and gt over HTTP and returns
// alice's session with it; everything ends with b.
func benchFront(b *testing.B, servers []ServerConfig, gt *gate.Gate) *mcp.ClientSession {
	b.Helper()
	g, err := New(b.Context(), servers, gt, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	h, err := g.Handler(testAuth, nil)
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(h)
	b.Cleanup(ts.Close)
	return benchConnect(b, ts.URL+"/mcp", aliceToken)
}

// BenchmarkCallThroughGateway2026 is BenchmarkCallThroughGateway with a
// client speaking 2026-07-28 (no session; each call a stateless POST):
// /lean with the lean front (lean2026.go), /sdk with DisableLeanCalls
// (the SDK's stateless handler serves every call).
func BenchmarkCallThroughGateway2026(b *testing.B) {
	for _, c := range []struct {
		name string
		opts *HTTPOptions
	}{{"lean", nil}, {"sdk", &HTTPOptions{DisableLeanCalls: true}}} {
		b.Run(c.name, func(b *testing.B) {
			cs := benchFront2026(b, []ServerConfig{{Name: "up", URL: benchUpstream(b)}}, gate.New(nil, policy.NewHolder(benchPolicy), nil), c.opts)
			benchCalls(b, cs, "up__echo")
		})
	}
}

// BenchmarkCallThroughPlainProxy is the yardstick: a minimal Go SDK proxy
// (one tool whose handler forwards the raw arguments over one upstream
// client session), with no policy, catalog, raw result capture or auth.
func BenchmarkCallThroughPlainProxy(b *testing.B) {
	up := benchConnect(b, benchUpstream(b), "")
	s := mcp.NewServer(&mcp.Implementation{Name: "plain-proxy", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: objectSchema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return up.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: req.Params.Arguments})
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	b.Cleanup(ts.Close)
	benchCalls(b, benchConnect(b, ts.URL, ""), "echo")
}

// BenchmarkCallThroughGatewayStdio is BenchmarkCallThroughGateway with a
// stdio upstream (the test binary), once with one upstream session per
// agent session (the stdio default) and once with one shared session.
func BenchmarkCallThroughGatewayStdio(b *testing.B) {
	for _, mode := range []string{SessionsPerAgent, SessionsShared} {
		b.Run(mode, func(b *testing.B) {
			p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
			sc := stdioServer("up")
			sc.Sessions = mode
			cs := benchFront(b, []ServerConfig{sc}, gate.New(nil, policy.NewHolder(p), nil))
			// The first call of a per-agent session starts its process.
			if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs}); err != nil {
				b.Fatal(err)
			}
			benchCalls(b, cs, "up__echo")
		})
	}
}

// BenchmarkCallThroughGatewayStdioParallel is BenchmarkCallThroughGatewayStdio
// with 16 agent sessions making calls at once (b.RunParallel), each with one
// call in flight: with sessions: shared all of them go over the one upstream
// session, with per_agent each agent session has its own upstream process.
func BenchmarkCallThroughGatewayStdioParallel(b *testing.B) {
	const agents = 16
	for _, mode := range []string{SessionsPerAgent, SessionsShared} {
		b.Run(mode, func(b *testing.B) {
			p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
			sc := stdioServer("up")
			sc.Sessions = mode
			g, err := New(b.Context(), []ServerConfig{sc}, gate.New(nil, policy.NewHolder(p), nil), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = g.Close() })
			h, err := g.Handler(testAuth, nil)
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(h)
			b.Cleanup(ts.Close)
			sessions := make(chan *mcp.ClientSession, agents)
			for range agents {
				cs := benchConnect(b, ts.URL+"/mcp", aliceToken)
				if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs}); err != nil {
					b.Fatal(err)
				}
				sessions <- cs
			}
			b.SetParallelism((agents + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var cs *mcp.ClientSession
				select {
				case cs = <-sessions:
				default:
					b.Error("more goroutines than agent sessions")
					return
				}
				for pb.Next() {
					res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs})
					if err != nil || res.IsError {
						b.Errorf("call: %v %+v", err, res)
						return
					}
				}
			})
		})
	}
}

// BenchmarkCallThroughGateway2026Stdio is BenchmarkCallThroughGateway2026
// (lean front) with a stdio upstream (the test binary, one shared session;
// its session for 2026 agents speaks 2026-07-28): the allowed 2026 call's
// dispatch without the SDK's client since 2026-12-02 (modernraw.go).
func BenchmarkCallThroughGateway2026Stdio(b *testing.B) {
	p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
	sc := stdioServer("up")
	sc.Sessions = SessionsShared
	cs := benchFront2026(b, []ServerConfig{sc}, gate.New(nil, policy.NewHolder(p), nil), nil)
	// The first call opens the upstream's session for 2026 agents.
	if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs}); err != nil {
		b.Fatal(err)
	}
	benchCalls(b, cs, "up__echo")
}
