package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// BenchmarkCallSDKPathHTTP is an allowed call on the SDK path (it carries
// a progress token, so the lean front hands it to the go-sdk) to an HTTP
// upstream answering in JSON (/json) or with an event stream (/sse): the
// path whose answers captureRoundTripper checks before the SDK reads them
// (sdkbreak.go). Interleave runs of two trees to compare them:
//
//	go test -run '^$' -bench CallSDKPathHTTP -benchtime 2000x -count 5 ./internal/gateway/
func BenchmarkCallSDKPathHTTP(b *testing.B) {
	p := &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs}
	sdkPathToken(p, "bench")
	benchHTTPUpstream(b, func() *mcp.Server { return newUpstreamServer(nil) }, func(ctx context.Context, cs *mcp.ClientSession) error {
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			return fmt.Errorf("call: %w", err)
		}
		if res.IsError {
			return fmt.Errorf("call: %+v", res)
		}
		return nil
	})
}

// benchHTTPUpstream runs op in a loop against a go-sdk HTTP upstream
// serving newServer() through benchFront (an allow-all gate), once with
// JSON answers (/json) and once with event streams (/sse); an error of op
// fails the benchmark.
func benchHTTPUpstream(b *testing.B, newServer func() *mcp.Server, op func(ctx context.Context, cs *mcp.ClientSession) error) {
	b.Helper()
	for _, c := range []struct {
		name string
		json bool
	}{{"json", true}, {"sse", false}} {
		b.Run(c.name, func(b *testing.B) {
			s := newServer()
			up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: c.json}))
			b.Cleanup(up.Close)
			cs := benchFront(b, []ServerConfig{{Name: "up", URL: up.URL}}, gate.New(nil, policy.NewHolder(benchPolicy), nil))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := op(b.Context(), cs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
