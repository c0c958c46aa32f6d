package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioHeldCallAnsweredAtSIGTERM stops `toolgate serve --stdio` with
// SIGTERM while it holds a call: the agent is told that the gateway is
// shutting down and that the approval stays pending (shutdown37: the
// session is closed only once that answer is written, and the gate is
// stopped first, so it is not "the caller went away"), and the approval
// does stay pending.
func TestStdioHeldCallAnsweredAtSIGTERM(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	admin := startGateway(t, gatewayConfig(db, upstreamServer(filepath.Join(dir, "record-admin.log"))+heldEchoPolicy), nil)
	stdioCfg := `
storage:
  driver: sqlite
  path: ` + q(db) + `
` + principalsYAML + upstreamServer(filepath.Join(dir, "record-stdio.log")) + heldEchoPolicy
	cmd, stderr, _ := gatewayCommand(t, stdioCfg, nil, "--stdio")
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-stdio-agent", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to toolgate --stdio: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		checkChildLog(t, "toolgate serve --stdio", stderr)
	})
	ch := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"via":"stdio"}`)})
	p := waitPending(t, admin.Admin, 1)[0]
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch)
	if r.err != nil {
		t.Fatalf("the held call ended with %v at SIGTERM, want that the gateway is shutting down\nstderr:\n%s", r.err, stderr)
	}
	if msg := text(r.res); !r.res.IsError || !strings.Contains(msg, "the gateway is shutting down") || !strings.Contains(msg, p.ID+" stays pending") {
		t.Errorf("the held call was answered %q (isError %v), want that the gateway is shutting down and approval %s stays pending", msg, r.res.IsError, p.ID)
	}
	if a := showJSON(t, admin.Admin, p.ID); a.State != "pending" {
		t.Errorf("approval %s is %s after the SIGTERM, want pending", p.ID, a.State)
	}
}
