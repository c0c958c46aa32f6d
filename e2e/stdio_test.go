package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioReleasedByAnotherProcess serves an agent over `toolgate serve
// --stdio` (no admin listener) and releases its held call with an approval
// made through a second `toolgate serve` on the same SQLite file, via the
// CLI pointed at the second process.
func TestStdioReleasedByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	recordStdio := filepath.Join(dir, "record-stdio.log")
	recordAdmin := filepath.Join(dir, "record-admin.log")

	// The second process: the admin API on the shared store.
	admin := startGateway(t, gatewayConfig(db, upstreamServer(recordAdmin)+heldEchoPolicy), nil)

	// The stdio process: no listen section, so no admin listener.
	stdioCfg := `
storage:
  driver: sqlite
  path: ` + q(db) + `
` + principalsYAML + upstreamServer(recordStdio) + heldEchoPolicy
	cmd, stderr, _ := gatewayCommand(t, stdioCfg, nil, "--stdio")
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-stdio-agent", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	start := time.Now()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to toolgate --stdio: %v\nstderr:\n%s", err, stderr)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = cs.Close()
		}
		checkChildLog(t, "toolgate serve --stdio", stderr)
	})
	t.Logf("timing: toolgate --stdio connected in %v", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	ch := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"via":"stdio"}`)})
	p := waitPending(t, admin.Admin, 1)[0]
	if p.Server != "t" || p.Tool != "echo_raw" || p.RequestedBy != agentID {
		t.Errorf("pending approval = %+v, want t/echo_raw requested by %s", p, agentID)
	}
	held := time.Since(start)
	mustCLI(t, admin.Admin, "approve", p.ID)
	if got := mustOK(t, await(t, ch)); got != `{"via":"stdio"}` {
		t.Errorf("released call returned %q, want its arguments", got)
	}
	t.Logf("timing: held after %v; released %v after the approve command started (includes the ~250ms store poll)",
		held.Round(time.Millisecond), (time.Since(start) - held).Round(time.Millisecond))

	if got, want := readRecord(t, recordStdio), []string{`echo_raw {"via":"stdio"}`}; !slices.Equal(got, want) {
		t.Errorf("record of the stdio process's upstream = %q, want %q", got, want)
	}
	if got := readRecord(t, recordAdmin); len(got) != 0 {
		t.Errorf("the admin process's upstream ran %q; the call belongs to the stdio process", got)
	}
	if a := showJSON(t, admin.Admin, p.ID); a.State != "consumed" || a.DispatchOutcome != "ok" {
		t.Errorf("record: state %q, dispatch_outcome %q; want consumed, ok", a.State, a.DispatchOutcome)
	}

	// Closing stdin ends the stdio gateway cleanly.
	closed = true
	if err := cs.Close(); err != nil {
		t.Errorf("close the stdio session (toolgate's exit): %v", err)
	}
}
