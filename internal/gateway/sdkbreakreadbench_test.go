package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// BenchmarkReadSDKPathHTTP is an allowed resources/read through the
// gateway to a go-sdk HTTP upstream answering in JSON or with an event
// stream: the request whose answer branch sdkbreak2 checks (withAnswerCheck).
func BenchmarkReadSDKPathHTTP(b *testing.B) {
	for _, c := range []struct {
		name string
		json bool
	}{{"json", true}, {"sse", false}} {
		b.Run(c.name, func(b *testing.B) {
			s := newFeatureServer("f", nil)
			up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: c.json}))
			b.Cleanup(up.Close)
			cs := benchFront(b, []ServerConfig{{Name: "up", URL: up.URL}}, gate.New(nil, policy.NewHolder(benchPolicy), nil))
			p := &mcp.ReadResourceParams{URI: "test://static"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := cs.ReadResource(b.Context(), p)
				if err != nil || len(res.Contents) != 1 {
					b.Fatalf("read: %v %+v", err, res)
				}
			}
		})
	}
}
