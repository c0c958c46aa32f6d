package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// TestIsModern: which POSTs without a session are 2026-07-28 requests
// (served statelessly) and which stay 2025-era (initialize, or 400).
func TestIsModern(t *testing.T) {
	for _, c := range []struct {
		name, header, body string
		want               bool
	}{
		{"2026 header", "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, true},
		{"2026 header, initialize (a removed method)", "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, true},
		{"protocolVersion in _meta", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, true},
		{"server/discover", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, true},
		{"2025 initialize", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, false},
		{"2025 header", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"no marker", "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, false},
		{"not JSON", "", `{`, false},
	} {
		h := http.Header{}
		if c.header != "" {
			h.Set("MCP-Protocol-Version", c.header)
		}
		if got := isModern(h, []byte(c.body)); got != c.want {
			t.Errorf("%s: isModern = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestNamedApproval: only an explicit _meta["toolgate/approval"] names an
// approval to resume.
func TestNamedApproval(t *testing.T) {
	for _, c := range []struct {
		meta mcp.Meta
		want approval.ID
	}{
		{nil, ""},
		{mcp.Meta{"progressToken": "x"}, ""},
		{mcp.Meta{"toolgate/approval": "0197-abc"}, "0197-abc"},
		{mcp.Meta{"toolgate/approval": map[string]any{"id": "0197-def", "state": "pending"}}, "0197-def"},
		{mcp.Meta{"toolgate/approval": map[string]any{"state": "pending"}}, ""},
		{mcp.Meta{"toolgate/approval": 42.0}, ""},
	} {
		if got := namedApproval(c.meta); got != c.want {
			t.Errorf("namedApproval(%v) = %q, want %q", c.meta, got, c.want)
		}
	}
}

// TestMarkComplete: a relayed prompts/get result gets resultType
// "complete" and keeps everything else.
func TestMarkComplete(t *testing.T) {
	res := &mcp.GetPromptResult{Description: "d", Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}
	b, err := json.Marshal(markComplete(res))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["resultType"] != "complete" || m["description"] != "d" || len(m["messages"].([]any)) != 1 {
		t.Errorf("markComplete gave %s", b)
	}
}

// TestModernCallsDeclareNoClientCapabilities: a 2026-07-28 agent that did
// not declare sampling calls a tool that needs it; the upstream sees a
// session without sampling and answers -32021 (SEP-2575), which reaches
// the agent as it is. A 2025 agent's call on the shared session, which
// declares sampling, still runs the tool.
func TestModernCallsDeclareNoClientCapabilities(t *testing.T) {
	// Both kinds of server: the 2026 calls of either go through the
	// upstream's capability-less 2026 session.
	for _, sessions := range []string{SessionsShared, SessionsPerAgent} {
		t.Run(sessions, func(t *testing.T) { testModernCallsDeclareNoClientCapabilities(t, sessions) })
	}
}

func testModernCallsDeclareNoClientCapabilities(t *testing.T, sessions string) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "caps-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "needs_sampling", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if caps := req.ClientCapabilities(); caps != nil && caps.Sampling != nil {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
			}
			data, err := json.Marshal(mcp.MissingRequiredClientCapabilityData{RequiredCapabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}})
			if err != nil {
				return nil, err
			}
			return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "sampling capability required", Data: data}
		})
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, s), Sessions: sessions}}, allowAll(), nil)
	base := serveHTTP(t, g, nil)

	old := connectHTTP(t, base, aliceToken, nil, nil)
	res, err := old.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__needs_sampling", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("2025 agent: %v", err)
	}
	if got := textOf(t, res); got != "ran" {
		t.Fatalf("2025 agent got %q, want the tool to run", got)
	}

	cs := connectModernAgent(t, base)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__needs_sampling", Arguments: map[string]any{}})
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != mcp.CodeMissingRequiredClientCapabilities {
		t.Fatalf("2026 agent without sampling: result %+v (%s), err %v; want error -32021", res, textOf(t, res), err)
	}
	var data mcp.MissingRequiredClientCapabilityData
	if err := json.Unmarshal(wire.Data, &data); err != nil || data.RequiredCapabilities == nil || data.RequiredCapabilities.Sampling == nil {
		t.Fatalf("error data %s does not name sampling (%v)", wire.Data, err)
	}
}
