package gateway

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// BenchmarkCallThroughGatewayWithToken is BenchmarkCallThroughGateway with
// a progress token on every call (as the TS SDK sends one when the caller
// passes onprogress): since branch leanprog the lean front serves it
// (leanprog.go), before it the SDK path did. The upstream sends no
// progress; the call carries the token both ways it would.
//
//	go test -run '^$' -bench 'CallThroughGateway$|WithToken' -benchtime 2000x -benchmem ./internal/gateway/
func BenchmarkCallThroughGatewayWithToken(b *testing.B) {
	cs := benchFront(b, []ServerConfig{{Name: "up", URL: benchUpstream(b)}}, gate.New(nil, policy.NewHolder(benchPolicy), nil))
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
}
