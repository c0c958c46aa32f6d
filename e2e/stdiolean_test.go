package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioLeanPolicy allows big_result and slow, holds echo_raw for one
// approval and denies the rest.
const stdioLeanPolicy = `
policy:
  default: deny
  rules:
    - name: echo needs approval
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 1m }
    - name: reads
      server: t
      tools: [big_result, slow, ask]
      effect: allow
`

// TestStdioLeanAnswersLikeTheSDKPath runs `toolgate serve --stdio` for a
// 2025-11-25 agent, whose plain calls the stdio lean front answers
// (branch stdio41), and for a 2026-07-28 agent, whose calls (their
// protocol metadata in _meta) stay on the SDK's path, and gives both the
// same calls: allowed with a large result, denied, held then approved
// through a second process on the same SQLite file, an unknown tool, bad
// arguments, and a call cancelled by the agent, which must reach the
// upstream; the 2025 agent also answers an upstream's elicitation during a
// lean call and during an SDK-path one (a progress token) alike. Both agents see the same answers and the audit trail the same
// outcomes.
func TestStdioLeanAnswersLikeTheSDKPath(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	admin := startGateway(t, gatewayConfig(db, upstreamServer(filepath.Join(dir, "record-admin.log"))+stdioLeanPolicy), nil)

	views := map[string][]string{}
	for _, rev := range []struct {
		name string
		opts *mcp.ClientSessionOptions
	}{{"2025-11-25", &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}}, {"2026-07-28", nil}} {
		record := filepath.Join(dir, "record-"+rev.name+".log")
		cfg := `
storage:
  driver: sqlite
  path: ` + q(db) + `
` + principalsYAML + upstreamServer(record) + stdioLeanPolicy
		cmd, stderr, _ := gatewayCommand(t, cfg, nil, "--stdio")
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e-stdio-lean", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes to " + req.Params.Message}}, nil
			},
		})
		ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
		cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, rev.opts)
		if err != nil {
			cancel()
			t.Fatalf("%s: connect to toolgate --stdio: %v\nstderr:\n%s", rev.name, err, stderr)
		}
		if got := cs.InitializeResult(); rev.opts != nil && (got == nil || got.ProtocolVersion != rev.name) {
			t.Errorf("%s: negotiated %+v", rev.name, got)
		}
		view := func(what string, r callResult) {
			s := what + ": "
			switch {
			case r.err != nil:
				s += "error " + r.err.Error()
			default:
				sc, _ := json.Marshal(r.res.StructuredContent)
				s += fmt.Sprintf("isError=%v text=%.120q (%d bytes) structured=%s", r.res.IsError, text(r.res), len(text(r.res)), sc)
			}
			views[rev.name] = append(views[rev.name], s)
		}
		call := func(name string, args any) callResult {
			return await(t, callAsync(ctx, cs, &mcp.CallToolParams{Name: name, Arguments: args}))
		}

		view("allowed", call("t__big_result", map[string]any{}))
		view("allowed, large", call("t__big_result", map[string]any{"bytes": 512 << 10}))
		view("denied", call("t__progress", map[string]any{"n": 1}))
		held := callAsync(ctx, cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"via":"stdio"}`)})
		p := waitPending(t, admin.Admin, 1)[0]
		mustCLI(t, admin.Admin, "approve", p.ID)
		view("held then approved", await(t, held))
		a := showJSON(t, admin.Admin, p.ID)
		views[rev.name] = append(views[rev.name], fmt.Sprintf("recorded: state %s, outcome %s", a.State, a.DispatchOutcome))
		view("unknown tool", call("t__nope", map[string]any{}))
		view("bad arguments", call("t__echo_raw", "not an object"))

		if rev.opts != nil {
			// An upstream's question to a 2025 agent during its call goes
			// through the SDK's session on both paths: a plain call (the
			// lean front) and one with a progress token (the SDK's path).
			lean := call("t__ask", map[string]any{"tag": "a"})
			sdk := await(t, callAsync(ctx, cs, &mcp.CallToolParams{Name: "t__ask", Arguments: map[string]any{"tag": "a"}, Meta: mcp.Meta{"progressToken": "p1"}}))
			if lean.err != nil || sdk.err != nil || text(lean.res) != "accept yes to question-a" || text(lean.res) != text(sdk.res) {
				t.Errorf("elicitation during a call: lean %v %q, SDK path %v %q", lean.err, text(lean.res), sdk.err, text(sdk.res))
			}
		}

		cctx, ccancel := context.WithCancel(ctx)
		slow := callAsync(cctx, cs, &mcp.CallToolParams{Name: "t__slow", Arguments: map[string]any{}})
		waitRecord(t, record, "slow started {}")
		ccancel()
		view("cancelled", await(t, slow))
		// The agent's notifications/cancelled reached the upstream call.
		waitRecord(t, record, "slow cancelled {}")

		if err := cs.Close(); err != nil {
			t.Errorf("%s: close the stdio session (toolgate's exit): %v", rev.name, err)
		}
		cancel()
		checkChildLog(t, "toolgate serve --stdio ("+rev.name+")", stderr)
	}
	if a, b := views["2025-11-25"], views["2026-07-28"]; !slices.Equal(a, b) {
		t.Errorf("the agents saw different answers:\n2025-11-25 (stdio lean front):\n%q\n2026-07-28 (SDK path):\n%q", a, b)
	}
	t.Logf("answers: %q", views["2025-11-25"])
}
