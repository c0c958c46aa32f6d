package gateway

import (
	"encoding/json"
	"net/http"
	"testing"

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
