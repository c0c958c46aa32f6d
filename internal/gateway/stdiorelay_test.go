package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestStdioModernRelayedStateSealed (branch mrtr42): a 2026-07-28 stdio
// agent's round (tools/call, then prompts/get) with an upstream that asks
// (input_required) is relayed
// as a 2026-07-28 HTTP request's is: the agent gets the upstream's input
// requests with a requestState toolgate wrapped (never the upstream's
// own), the next round with that state and the agent's answers reaches
// the upstream with the upstream's own state, and the wrapped state is
// single-use and bound to the call: tampered, used for other arguments,
// the upstream's raw state, or used again, it is refused (-32602) and
// nothing reaches the upstream. On e3242174 the call went through the
// 2025 agents' upstream session, whose client (toolgate's) tried to
// answer the question itself and failed the call.
func TestStdioModernRelayedStateSealed(t *testing.T) {
	var asked, answered atomic.Int32
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["q"].(*mcp.ElicitResult); ok && r != nil {
			answered.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("got %v with %s", r.Content["a"], req.Params.RequestState)}}}, nil
		}
		asked.Add(1)
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "question", RequestedSchema: json.RawMessage(`{"type":"object"}`)}},
			RequestState:  "upstream-state",
		}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "askp"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if r, ok := req.Params.InputResponses["q"].(*mcp.ElicitResult); ok && r != nil {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("prompt got %v with %s", r.Content["a"], req.Params.RequestState)}}}}, nil
		}
		return &mcp.GetPromptResult{
			InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "prompt question", RequestedSchema: json.RawMessage(`{"type":"object"}`)}},
			RequestState:  "upstream-prompt-state",
		}, nil
	})
	// Stateless: the upstream speaks only 2026-07-28.
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	key, err := seal.NewKey(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	gk := gate.New(sqlitetest.Open(t), policy.NewHolder(&policy.Policy{Default: policy.Allow}), &gate.Options{Key: key})
	g := newGateway(t, []ServerConfig{{Name: "up", URL: ts.URL}}, gk, &Options{MRTR: gk})
	a := serveModernStdio(t, g)

	id := 0
	round := func(args, state string) map[string]any {
		t.Helper()
		id++
		extra := ""
		if state != "" {
			extra = fmt.Sprintf(`,"requestState":%q,"inputResponses":{"q":{"action":"accept","content":{"a":"yes"}}}`, state)
		}
		body := modernCallBody(fmt.Sprint(id), "up__ask", args, "")
		body = strings.Replace(body, `,"_meta":`, extra+`,"_meta":`, 1)
		a.send(body)
		var m map[string]any
		if err := json.Unmarshal([]byte(a.response(id)), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := round(`{"k":1}`, "")
	res, _ := first["result"].(map[string]any)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" || state == "upstream-state" || res["inputRequests"] == nil {
		t.Fatalf("first round: %v; want input_required with the upstream's question and a state toolgate wrapped", first)
	}
	for name, bad := range map[string][2]string{
		"tampered":           {`{"k":1}`, state[:len(state)-4] + "AAAA"},
		"other arguments":    {`{"k":2}`, state},
		"the upstream's own": {`{"k":1}`, "upstream-state"},
	} {
		m := round(bad[0], bad[1])
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32602) || !strings.Contains(fmt.Sprint(e["message"]), "requestState refused") {
			t.Errorf("%s state: %v, want -32602 requestState refused", name, m)
		}
	}
	if n := answered.Load(); n != 0 {
		t.Fatalf("refused rounds reached the upstream: %d", n)
	}
	second := round(`{"k":1}`, state)
	res, _ = second["result"].(map[string]any)
	if res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(res["content"]), "got yes with upstream-state") {
		t.Fatalf("second round: %v; want the upstream's answer to the agent's input under its own state", second)
	}
	again := round(`{"k":1}`, state)
	if e, _ := again["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "used already") {
		t.Errorf("the state used again: %v, want it refused as used", again)
	}
	if n, m := asked.Load(), answered.Load(); n != 1 || m != 1 {
		t.Errorf("the upstream asked %d and completed %d times, want 1 and 1", n, m)
	}

	// prompts/get: the same relay.
	prompt := func(state string) map[string]any {
		t.Helper()
		id++
		extra := ""
		if state != "" {
			extra = fmt.Sprintf(`"requestState":%q,"inputResponses":{"q":{"action":"accept","content":{"a":"yes"}}},`, state)
		}
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"prompts/get","params":{"name":"up__askp",%s"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`, id, extra))
		var m map[string]any
		if err := json.Unmarshal([]byte(a.response(id)), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	first = prompt("")
	res, _ = first["result"].(map[string]any)
	state, _ = res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" || state == "upstream-prompt-state" {
		t.Fatalf("prompts/get first round: %v; want input_required with a state toolgate wrapped", first)
	}
	second = prompt(state)
	if res, _ = second["result"].(map[string]any); res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(res["messages"]), "prompt got yes with upstream-prompt-state") {
		t.Fatalf("prompts/get second round: %v; want the upstream's answer under its own state", second)
	}
	if e, _ := prompt(state)["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "used already") {
		t.Errorf("prompts/get state used again: not refused as used")
	}
}
