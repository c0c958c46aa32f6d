package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTypeScriptTimeoutCancelsHeldCall pins what happens when a TypeScript
// SDK 1.x client gives up on a held call: with onprogress but without
// resetTimeoutOnProgress its request times out (-32001) although toolgate
// keeps sending progress, and the SDK then sends notifications/cancelled
// for it (in a POST of its own, not awaited: the script waits for it to be
// answered before it exits, see timeout1x.mjs). toolgate records
// the explicit cancellation: the approval ends "cancelled" (docs/
// architecture.md, request lifecycle item 7), not left pending for a
// re-send, so no approver is asked about a call nobody waits for. A
// client that dies without cancelling leaves it pending (TestDroppedClientProcess).
func TestTypeScriptTimeoutCancelsHeldCall(t *testing.T) {
	node := tsV1Node(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+leanPolicy), nil)
	script, err := filepath.Abs(filepath.Join("tsclient", "timeout1x.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*waitFor(t))
	defer cancel()
	// 3 s: long enough for the hold to start and its first progress
	// notification (sent when the hold starts) to arrive, far below the
	// approval's timeout.
	cmd := exec.CommandContext(ctx, node, script, g.MCP, agentToken, "3000", "settle")
	cmd.Env = childEnv()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	var l struct {
		Error    string          `json:"error"`
		Code     int             `json:"code"`
		Progress int             `json:"progress"`
		Result   json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if l.Code != -32001 || !strings.Contains(l.Error, "Request timed out") || l.Progress < 1 {
		t.Fatalf("TypeScript client: %+v; want -32001 Request timed out after at least one progress notification", l)
	}
	if !strings.Contains(stderr.String(), "sent notifications/cancelled: 202") {
		t.Errorf("the SDK did not send notifications/cancelled on its timeout (or toolgate did not accept it); client stderr:\n%s", stderr.String())
	}
	all := approvals(t, g.Admin, "all")
	if len(all) != 1 {
		t.Fatalf("%d approvals, want the held call's one: %+v", len(all), all)
	}
	// Still pending after waitFor (the cancellation ignored, or taken for
	// a dropped connection) fails here.
	waitState(t, g.Admin, all[0].ID, "cancelled")
	if n := countRecord(t, record, `big_result {"ts":"timeout"}`); n != 0 {
		t.Errorf("the timed-out call ran %d times upstream, want 0", n)
	}
}

// tsV1Node returns the node binary for the TypeScript SDK 1.x client
// (@modelcontextprotocol/sdk), as tsV2Node does for v2.
func tsV1Node(t *testing.T) string {
	t.Helper()
	return tsNode(t, "@modelcontextprotocol/sdk")
}
