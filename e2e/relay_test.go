package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// relayPolicy allows the testupstream's multi round-trip tool.
const relayPolicy = `
policy:
  default: deny
  rules:
    - name: ask_mrtr is fine
      server: t
      tools: [ask_mrtr]
      effect: allow
`

// TestRelayedMultiRoundTrip (issue 11, SEP-2322): an upstream that answers
// a 2026-07-28 agent's call with input_required reaches the agent with its
// input requests unchanged (key, method, message) and its requestState
// wrapped in toolgate's; the next round with the agent's inputResponses
// and that state reaches the upstream with the upstream's own state, and
// completes. The wrapped state is single-use and bound to the call: used
// again, tampered with, or sent with other arguments it is refused with
// -32602 and nothing reaches the upstream. The agent's client capabilities
// are what the upstream sees: without elicitation it answers -32021.
func TestRelayedMultiRoundTrip(t *testing.T) {
	g, record := startUpstreamGateway(t, relayPolicy)
	c := &taskClient{t: t, g: g, token: agentToken, caps: map[string]any{"elicitation": map[string]any{}}}
	runs := func() int { return len(readRecord(t, record)) }
	round := func(args, state string, responses map[string]any) (map[string]any, map[string]any) {
		t.Helper()
		p := map[string]any{"name": "t__ask_mrtr", "arguments": json.RawMessage(args)}
		if state != "" {
			p["requestState"] = state
		}
		if responses != nil {
			p["inputResponses"] = responses
		}
		return c.rpc("tools/call", p, "t__ask_mrtr")
	}
	answer := map[string]any{"answer": map[string]any{"action": "accept", "content": map[string]any{"answer": "42"}}}

	res, e := round(`{"tag":"a"}`, "", nil)
	if e != nil || res["resultType"] != "input_required" {
		t.Fatalf("first round: %v %v, want input_required", res, e)
	}
	ir, _ := res["inputRequests"].(map[string]any)
	ask, _ := ir["answer"].(map[string]any)
	params, _ := ask["params"].(map[string]any)
	if len(ir) != 1 || ask["method"] != "elicitation/create" || params["message"] != "question-a" {
		t.Fatalf("inputRequests %v: want the upstream's elicitation under its key \"answer\"", ir)
	}
	state, _ := res["requestState"].(string)
	if state == "" || state == "up-state-a" {
		t.Fatalf("requestState %q: want the upstream's state wrapped by toolgate", state)
	}
	if got := countRecord(t, record, `ask_mrtr {"tag":"a"} asked`); got != 1 {
		t.Fatalf("the upstream asked %d times, want 1", got)
	}

	before := runs()
	for _, bad := range []struct {
		name, args, state string
	}{
		{"tampered", `{"tag":"a"}`, state + "-TAMPERED"},
		{"other arguments", `{"tag":"b"}`, state},
		{"the upstream's own state", `{"tag":"a"}`, "up-state-a"},
	} {
		res, e := round(bad.args, bad.state, answer)
		if e == nil || e["code"] != float64(-32602) || !strings.Contains(e["message"].(string), "requestState refused") {
			t.Fatalf("%s state: %v %v, want error -32602 requestState refused", bad.name, res, e)
		}
	}
	if n := runs(); n != before {
		t.Fatalf("refused rounds reached the upstream: %d record lines, want %d", n, before)
	}

	res, e = round(`{"tag":"a"}`, state, answer)
	if e != nil || res["resultType"] != "complete" {
		t.Fatalf("second round: %v %v, want a complete result", res, e)
	}
	if got := contentText(res); got != "answered 42 state=up-state-a" {
		t.Fatalf("second round answered %q, want the upstream to get the answer and its own state", got)
	}

	before = runs()
	res, e = round(`{"tag":"a"}`, state, answer)
	if e == nil || !strings.Contains(e["message"].(string), "used already") {
		t.Fatalf("state used again: %v %v, want it refused as used", res, e)
	}
	if n := runs(); n != before {
		t.Fatalf("a reused state reached the upstream")
	}

	noCaps := &taskClient{t: t, g: g, token: agentToken, caps: map[string]any{}}
	res, e = noCaps.rpc("tools/call", map[string]any{"name": "t__ask_mrtr", "arguments": json.RawMessage(`{"tag":"c"}`)}, "t__ask_mrtr")
	if e == nil || e["code"] != float64(-32021) {
		t.Fatalf("agent without elicitation: %v %v, want -32021 from the upstream", res, e)
	}
}

// contentText is the text of a raw tools/call result's first content item.
func contentText(res map[string]any) string {
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	first, _ := content[0].(map[string]any)
	s, _ := first["text"].(string)
	return s
}

// TestRelayedRoundsSDKClients (issue 11): real go-sdk clients of both eras
// answer an upstream's multi round-trip request through toolgate, for a
// stdio upstream (toolgate's shared session speaks 2025-11-25 to it, its
// session for 2026 agents 2026-07-28) and for an HTTP upstream that speaks
// only 2026-07-28. The 2026-07-28 client's own multi round-trip loop
// fulfils the relayed input_required (its elicitation handler answers) and
// retries with the wrapped state. The 2025-11-25 client gets the question as
// a classic elicitation/create: from the stdio upstream's SDK (relayed by
// toolgate), or, for the 2026-only upstream, from toolgate, which then sends
// the answer and the upstream's state upstream.
func TestRelayedRoundsSDKClients(t *testing.T) {
	stdio, stdioRecord := startUpstreamGateway(t, relayPolicy)
	u, httpRecord := startHTTPUpstream(t, "-only-2026")
	only2026 := startGateway(t, gatewayConfig(filepath.Join(t.TempDir(), "toolgate.db"), `
servers:
  t:
    url: `+q(u)+relayPolicy), nil)
	only2026.waitLog(t, "upstream speaks only MCP 2026-07-28")
	for _, up := range []struct {
		name   string
		g      *gw
		record string
	}{
		{"stdio", stdio, stdioRecord},
		{"http-only-2026", only2026, httpRecord},
	} {
		for _, era := range []struct {
			name string
			opts *mcp.ClientSessionOptions
		}{
			{"2026-07-28", nil},
			{"2025-11-25", era2025},
		} {
			t.Run(up.name+"/"+era.name, func(t *testing.T) {
				var asked atomic.Int32
				c := mcp.NewClient(&mcp.Implementation{Name: "e2e-relay", Version: "1"}, &mcp.ClientOptions{
					ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						asked.Add(1)
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "to " + req.Params.Message}}, nil
					},
				})
				tr := &mcp.StreamableClientTransport{Endpoint: up.g.MCP, HTTPClient: &http.Client{Transport: &bearer{token: agentToken, base: up.g.tr}}}
				cs, err := c.Connect(t.Context(), tr, era.opts)
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				t.Cleanup(func() { _ = cs.Close() })
				if v := cs.InitializeResult().ProtocolVersion; v != era.name {
					t.Fatalf("negotiated %s, want %s", v, era.name)
				}
				tag := up.name + "/" + era.name
				args := `{"tag":"` + tag + `"}`
				got := mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__ask_mrtr", args))))
				if want := "answered to question-" + tag + " state=up-state-" + tag; got != want {
					t.Fatalf("result %q, want %q", got, want)
				}
				if n := asked.Load(); n != 1 {
					t.Fatalf("the client was asked %d times, want 1", n)
				}
				if n := countRecord(t, up.record, "ask_mrtr "+args+" answered"); n != 1 {
					t.Fatalf("the upstream completed %d times, want 1", n)
				}
			})
		}
	}
}

// TestRelayedRoundsPassTheGate (issue 11): each relayed round is a call the
// policy decides anew; the wrapped state says which round it continues,
// never that it may run. A round after a reload that denies the tool is
// refused and the answer never reaches the upstream.
func TestRelayedRoundsPassTheGate(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	base := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record))
	g := startGateway(t, base+relayPolicy, nil)
	c := &taskClient{t: t, g: g, token: agentToken, caps: map[string]any{"elicitation": map[string]any{}}}
	res, e := c.rpc("tools/call", map[string]any{"name": "t__ask_mrtr", "arguments": json.RawMessage(`{"tag":"g"}`)}, "t__ask_mrtr")
	state, _ := res["requestState"].(string)
	if e != nil || res["resultType"] != "input_required" || state == "" {
		t.Fatalf("first round: %v %v, want input_required with a requestState", res, e)
	}

	g.writeConfig(t, base+`
policy:
  default: deny
  rules:
    - name: no asking
      server: t
      tools: [ask_mrtr]
      effect: deny
`)
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "policy reloaded", "no asking")
	res, e = c.rpc("tools/call", map[string]any{"name": "t__ask_mrtr", "arguments": json.RawMessage(`{"tag":"g"}`), "requestState": state,
		"inputResponses": map[string]any{"answer": map[string]any{"action": "accept", "content": map[string]any{"answer": "yes"}}}}, "t__ask_mrtr")
	if e != nil || res["isError"] != true || !strings.Contains(contentText(res), "denied") {
		t.Fatalf("round after the deny reload: %v %v, want a denial", res, e)
	}
	if n := countRecord(t, record, `ask_mrtr {"tag":"g"} answered`); n != 0 {
		t.Fatalf("the denied round reached the upstream")
	}
}

// TestRequestStateOf2025AgentRefused (issue 11): toolgate gives a 2025-era
// agent no requestState (its rounds stay inside toolgate), so one the agent
// sends itself is refused (-32602) and nothing reaches the upstream.
func TestRequestStateOf2025AgentRefused(t *testing.T) {
	g, record := startUpstreamGateway(t, relayPolicy)
	cs := g.connect(t, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "x"}}, nil
	}}, nil)
	p := toolCall("t__ask_mrtr", `{"tag":"own"}`)
	p.RequestState = "up-state-own"
	r := await(t, callAsync(t.Context(), cs, p))
	var wire *jsonrpc.Error
	if !errors.As(r.err, &wire) || wire.Code != -32602 || !strings.Contains(wire.Message, "requestState refused") {
		t.Fatalf("2025 agent's own requestState: %+v, %v; want -32602 requestState refused", r.res, r.err)
	}
	if lines := readRecord(t, record); len(lines) != 0 {
		t.Fatalf("the refused call reached the upstream: %q", lines)
	}
}
