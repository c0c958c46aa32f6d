package gateway

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// BenchmarkPromptGetStdio is one prompts/get through the gateway to a
// stdio upstream (the test binary's feature server, one shared session,
// call_timeout 30 s): a request the go-sdk's transport writes to the
// child (sdkwrite.go: each such write is bounded since fixes29).
func BenchmarkPromptGetStdio(b *testing.B) {
	p := &policy.Policy{Default: policy.Allow}
	sc := ServerConfig{Name: "up", Command: stdioServer("up").Command, Args: []string{"-test.run=^$"},
		Env: map[string]string{envUpstream: "stdio-features"}, Sessions: SessionsShared, CallTimeout: 30 * time.Second}
	cs := benchFront(b, []ServerConfig{sc}, gate.New(nil, policy.NewHolder(p), nil))
	params := &mcp.GetPromptParams{Name: "up__greet", Arguments: map[string]string{"name": "Ann"}}
	if _, err := cs.GetPrompt(b.Context(), params); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := cs.GetPrompt(b.Context(), params); err != nil {
			b.Fatal(err)
		}
	}
}
