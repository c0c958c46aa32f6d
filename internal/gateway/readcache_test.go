package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// TestRelayedReadIsPrivate: a resources/read toolgate relays is gated per
// principal (policy, sessions), so its answer says so to caches
// (SEP-2549): cacheScope "private" and ttlMs 0 (stale at once: the next
// read goes through the gate again), whatever the upstream said. Before,
// an upstream's "public" and its ttlMs reached the agent as they came,
// letting a shared cache serve one principal's gated read to another.
func TestRelayedReadIsPrivate(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "cache-upstream", Version: "1"}, nil)
	s.AddResource(&mcp.Resource{URI: "test://doc", Name: "doc"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{
			Contents:  []*mcp.ResourceContents{{URI: req.Params.URI, Text: "secret plans"}},
			Cacheable: mcp.Cacheable{TTLMs: 60_000, CacheScope: "public"},
		}, nil
	})
	g := newGateway(t, []ServerConfig{{Name: "m", URL: httpUpstream(t, s)}}, allowAll(), nil)
	for _, era := range []struct {
		name  string
		agent func() *rawAgent
		meta  string
	}{
		{"2025-11-25", func() *rawAgent { return serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"}) }, `{}`},
		{"2026-07-28", func() *rawAgent { return serveModernStdio(t, g) },
			`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`},
	} {
		a := era.agent()
		a.send(`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"test://doc","_meta":` + era.meta + `}}`)
		line := a.response(7)
		var m struct {
			Result *struct {
				Contents   []struct{ Text string }
				TTLMs      *int    `json:"ttlMs"`
				CacheScope *string `json:"cacheScope"`
			}
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.Result == nil {
			t.Fatalf("%s: answer %s: %v", era.name, line, err)
		}
		if len(m.Result.Contents) != 1 || m.Result.Contents[0].Text != "secret plans" {
			t.Errorf("%s: contents %s, want the upstream's", era.name, line)
		}
		if m.Result.CacheScope == nil || *m.Result.CacheScope != "private" || m.Result.TTLMs == nil || *m.Result.TTLMs != 0 {
			t.Errorf(`%s: the relayed read says %s, want "cacheScope":"private" and "ttlMs":0`, era.name, line)
		}
	}
}
