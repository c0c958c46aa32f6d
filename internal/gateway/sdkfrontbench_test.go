package gateway

import (
	"net/http/httptest"
	"testing"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// BenchmarkCallThroughGatewaySDKFront is BenchmarkCallThroughGateway with
// HTTPOptions.DisableLeanCalls: the SDK's server serves the agent's
// tools/call and the SDK's client makes the upstream call, as they do for
// a stdio agent (ServeStdio has no lean front). It splits
// BenchmarkServeStdioCall's gap to BenchmarkCallThroughGateway into the
// lean front's part and the stdio transport's (docs/performance.md,
// branch ends40):
//
//	go test -run '^$' -bench 'ServeStdioCall|CallThroughGateway(SDKFront)?$' -benchtime 2000x ./internal/gateway/
func BenchmarkCallThroughGatewaySDKFront(b *testing.B) {
	g, err := New(b.Context(), []ServerConfig{{Name: "up", URL: benchUpstream(b)}}, gate.New(nil, policy.NewHolder(benchPolicy), nil), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	h, err := g.Handler(testAuth, &HTTPOptions{DisableLeanCalls: true})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(h)
	b.Cleanup(ts.Close)
	benchCalls(b, benchConnect(b, ts.URL+"/mcp", aliceToken), "up__echo")
}
