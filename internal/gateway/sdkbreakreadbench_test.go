package gateway

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkReadSDKPathHTTP is an allowed resources/read through the
// gateway to a go-sdk HTTP upstream answering in JSON or with an event
// stream: the request whose answer branch sdkbreak2 checks (withAnswerCheck).
func BenchmarkReadSDKPathHTTP(b *testing.B) {
	p := &mcp.ReadResourceParams{URI: "test://static"}
	benchHTTPUpstream(b, func() *mcp.Server { return newFeatureServer("f", nil) }, func(ctx context.Context, cs *mcp.ClientSession) error {
		res, err := cs.ReadResource(ctx, p)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if len(res.Contents) != 1 {
			return fmt.Errorf("read: %+v", res)
		}
		return nil
	})
}
