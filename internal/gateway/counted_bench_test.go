package gateway

import (
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/procs"
)

// BenchmarkCallCountedStdio is BenchmarkCallThroughGatewayStdio/shared with
// the POSTs counted in Options.Load, as serve counts them (procs.Follow,
// execpages.WhenQuiet): the per-call cost of the count.
func BenchmarkCallCountedStdio(b *testing.B) {
	p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
	sc := stdioServer("up")
	sc.Sessions = SessionsShared
	g, err := New(b.Context(), []ServerConfig{sc}, gate.New(nil, policy.NewHolder(p), nil), &Options{Load: &procs.Load{}})
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
	cs := benchConnect(b, ts.URL+"/mcp", aliceToken)
	if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs}); err != nil {
		b.Fatal(err)
	}
	benchCalls(b, cs, "up__echo")
}
