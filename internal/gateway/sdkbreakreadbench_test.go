package gateway

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkReadSDKPathHTTP is an allowed resources/read through the
// gateway to a go-sdk HTTP upstream answering in JSON or with an event
// stream: the request whose answer branch sdkbreak2 checks (withAnswerCheck).
func BenchmarkReadSDKPathHTTP(b *testing.B) {
	p := &mcp.ReadResourceParams{URI: "test://static"}
	benchHTTPUpstream(b, func() *mcp.Server { return newFeatureServer("f", nil) }, func(b *testing.B, cs *mcp.ClientSession) {
		res, err := cs.ReadResource(b.Context(), p)
		if err != nil || len(res.Contents) != 1 {
			b.Fatalf("read: %v %+v", err, res)
		}
	})
}
