package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// relayStdioPolicy allows the testupstream's asking tools on both servers
// of TestRelayedRoundsStdioAgent.
const relayStdioPolicy = `
policy:
  default: deny
  rules:
    - name: asking is fine
      server: t
      tools: [ask, ask_mrtr]
      effect: allow
    - name: asking the 2026 server is fine
      server: h
      tools: [ask_mrtr]
      effect: allow
`

// TestRelayedRoundsStdioAgent (branch mrtr42): a 2026-07-28 agent over
// `toolgate serve --stdio` (the go-sdk v1.8 client's default revision) gets
// what the same agent over HTTP gets when an upstream asks it something
// during a call. An upstream's input_required — from a stdio upstream
// (toolgate's session for 2026 agents speaks 2026-07-28 to it) and from an
// HTTP upstream that speaks only 2026-07-28 — reaches the agent as a
// relayed round, which the client's own multi round-trip loop answers
// (its elicitation handler, once) and re-sends with toolgate's wrapped
// state; the upstream gets the answer and its own state and completes
// once. An upstream that asks with a classic elicitation/create, which a
// 2026 session cannot carry, answers the same on both transports.
//
// On e3242174 the stdio agent's calls went through the 2025 agents'
// upstream sessions: the stdio upstream's question came back as a classic
// elicitation/create, which the SDK refuses on a 2026 session, and the
// call failed; the 2026-only upstream's requestState reached the agent
// unwrapped and its re-send was refused (-32602).
func TestRelayedRoundsStdioAgent(t *testing.T) {
	dir := t.TempDir()
	u, httpRecord := startHTTPUpstream(t, "-only-2026")
	servers := func(record string) string {
		return upstreamServer(record) + `
  h:
    url: ` + q(u) + `
`
	}
	httpUpRecord := filepath.Join(dir, "record-http-gateway.log")
	hg := startGateway(t, gatewayConfig(filepath.Join(dir, "http.db"), servers(httpUpRecord)+relayStdioPolicy), nil)
	hg.waitLog(t, "upstream speaks only MCP 2026-07-28")

	stdioUpRecord := filepath.Join(dir, "record-stdio-gateway.log")
	cmd, stderr, _ := gatewayCommand(t, `
storage:
  driver: sqlite
  path: `+q(filepath.Join(dir, "stdio.db"))+`
`+principalsYAML+servers(stdioUpRecord)+relayStdioPolicy, nil, "--stdio")

	var asked atomic.Int32
	client := func() *mcp.Client {
		return mcp.NewClient(&mcp.Implementation{Name: "e2e-relay-stdio", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked.Add(1)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "to " + req.Params.Message}}, nil
			},
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	scs, err := client().Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to toolgate --stdio: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		_ = scs.Close()
		checkChildLog(t, "toolgate serve --stdio", stderr)
	})
	hcs, err := client().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hg.MCP, HTTPClient: &http.Client{Transport: &bearer{token: agentToken, base: hg.tr}}}, nil)
	if err != nil {
		t.Fatalf("connect to toolgate over HTTP: %v", err)
	}
	t.Cleanup(func() { _ = hcs.Close() })
	for name, cs := range map[string]*mcp.ClientSession{"stdio": scs, "http": hcs} {
		if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("%s: negotiated %s, want 2026-07-28", name, v)
		}
	}

	// answer is the call's outcome with the transport's tag made generic.
	answer := func(cs *mcp.ClientSession, tool, tag string) string {
		r := await(t, callAsync(ctx, cs, toolCall(tool, `{"tag":"`+tag+`"}`)))
		var s string
		if r.err != nil {
			s = "error " + r.err.Error()
		} else {
			s = "isError=" + map[bool]string{true: "true", false: "false"}[r.res.IsError] + " " + text(r.res)
		}
		return strings.ReplaceAll(s, tag, "<tag>")
	}
	for _, c := range []struct {
		tool, want string
		asks       int32  // questions the agent answers
		record     string // the upstream's record of the completed call ("" none)
	}{
		{tool: "t__ask_mrtr", want: "isError=false answered to question-<tag> state=up-state-<tag>", asks: 1, record: "ask_mrtr %s answered"},
		{tool: "h__ask_mrtr", want: "isError=false answered to question-<tag> state=up-state-<tag>", asks: 1, record: "ask_mrtr %s answered"},
		// A classic question cannot reach a 2026 agent: the same failure
		// on both transports, never one of them answered.
		{tool: "t__ask"},
	} {
		got := map[string]string{}
		for _, tr := range []struct {
			name   string
			cs     *mcp.ClientSession
			record string
		}{{"stdio", scs, stdioUpRecord}, {"http", hcs, httpUpRecord}} {
			if strings.HasPrefix(c.tool, "h__") {
				tr.record = httpRecord
			}
			tag := tr.name + "-" + c.tool
			before := asked.Load()
			got[tr.name] = answer(tr.cs, c.tool, tag)
			if n := asked.Load() - before; n != c.asks {
				t.Errorf("%s %s: the agent was asked %d times, want %d", tr.name, c.tool, n, c.asks)
			}
			if c.record != "" {
				line := strings.Replace(c.record, "%s", `{"tag":"`+tag+`"}`, 1)
				if n := countRecord(t, tr.record, line); n != 1 {
					t.Errorf("%s %s: the upstream completed %d times, want 1", tr.name, c.tool, n)
				}
			}
		}
		if c.want != "" && got["stdio"] != c.want {
			t.Errorf("%s over stdio: %q, want %q", c.tool, got["stdio"], c.want)
		}
		if got["stdio"] != got["http"] {
			t.Errorf("%s: stdio answered %q, HTTP %q", c.tool, got["stdio"], got["http"])
		}
		t.Logf("%s: %q", c.tool, got["stdio"])
	}
}
