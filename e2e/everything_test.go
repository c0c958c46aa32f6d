package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestEverythingProgressRelay calls the npm everything server's long-running
// operation through the gateway and checks that the upstream's progress
// reaches the client under the client's own progress token.
func TestEverythingProgressRelay(t *testing.T) {
	n := findNPM(t)
	cfg := gatewayConfig(filepath.Join(t.TempDir(), "toolgate.db"), `
servers:
  ev:
    command: `+q(n.node)+`
    args: [`+q(n.script(t, "mcp-server-everything"))+`, stdio]
    call_timeout: 60s
policy:
  default: allow
`)
	g := startGateway(t, cfg, nil)
	prog := newProgressLog()
	raw := new(syncBuffer)
	cs := g.connect(t, &mcp.ClientOptions{ProgressNotificationHandler: prog.handler}, raw)

	var tool string
	for tl, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if strings.HasPrefix(tl.Name, "ev__") && strings.Contains(strings.ToLower(tl.Name), "long") {
			tool = tl.Name
		}
	}
	if tool == "" {
		t.Fatal("tools/list has no ev__ long-running operation tool")
	}
	t.Logf("long-running tool: %s", tool)

	start := time.Now()
	const steps = 4
	before := len(raw.String())
	r := await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{
		Name:      tool,
		Arguments: map[string]any{"duration": 1, "steps": steps},
		Meta:      mcp.Meta{"progressToken": "my-token"},
	}))
	out := mustOK(t, r)
	elapsed(t, "everything long-running operation (1s, 4 steps)", start)
	if !strings.Contains(out, "completed") {
		t.Errorf("result = %q, want the operation's completion message", out)
	}

	// What went over the wire before the result, in order.
	wire := wireProgress(t, raw.String()[before:])
	checkProgress(t, wire, "my-token")
	for i, p := range wire {
		if p.Total != 0 && p.Total < p.Progress {
			t.Errorf("notification %d: progress %v past total %v", i, p.Progress, p.Total)
		}
	}
	// Every step the upstream reported before its result reaches the client
	// before the result, the last one included.
	if len(wire) != steps {
		t.Fatalf("%d progress notifications reached the client before the result, want all %d of the upstream's: %+v", len(wire), steps, wire)
	}
	// The client's handler sees the same notifications, under its token.
	checkProgress(t, prog.waitCount(t, len(wire)), "my-token")
}
