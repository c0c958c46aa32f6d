package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawPost sends one JSON-RPC body to the agent endpoint as the e2e agent,
// optionally on session sid, and returns the status and body.
func rawPost(t *testing.T, g *gw, sid, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.MCP, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+agentToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := g.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func initializeBody(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, id)
}

// TestLimitsFromConfig runs the real binary with a small limits section:
// a result over limits.max_result_bytes fails that call only (isError
// naming the limit) while a call in flight on the same stdio upstream
// succeeds; a request over limits.max_request_bytes gets 413; an
// initialize past limits.max_mcp_sessions_per_principal gets 429 and a
// JSON-RPC error (issue 9, items 10 and 15).
func TestLimitsFromConfig(t *testing.T) {
	g, record := startUpstreamGateway(t, `
limits:
  max_result_bytes: 1MiB
  max_request_bytes: 64KiB
  max_mcp_sessions_per_principal: 3
policy:
  default: allow
`)
	cs := g.connect(t, nil, nil) // session 1 of 3

	slow := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__slow", Arguments: json.RawMessage(`{"seconds":2}`)})
	waitRecord(t, record, `slow started {"seconds":2}`)
	msg := mustIsError(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{"bytes":2097152}`)})))
	if !strings.Contains(msg, `upstream "t"`) || !strings.Contains(msg, "exceeds limits.max_result_bytes (1048576 bytes)") {
		t.Errorf("2 MiB result: %q, want it to name the upstream and the limit", msg)
	}
	if got := mustOK(t, await(t, slow)); got != "slept" {
		t.Errorf("the call in flight: %q", got)
	}
	if got := mustOK(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{"bytes":1000}`)}))); len(got) != 1000 {
		t.Errorf("a small result afterwards: %d bytes", len(got))
	}

	// A request body over 64 KiB.
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t__echo_raw","arguments":{"x":"` + strings.Repeat("a", 70<<10) + `"}}}`
	if status, body := rawPost(t, g, cs.ID(), big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 70 KiB request: %d %s, want 413", status, body)
	}

	// Sessions 2 and 3 open; the fourth is refused.
	for i := 2; i <= 3; i++ {
		if status, body := rawPost(t, g, "", initializeBody(i)); status != http.StatusOK {
			t.Fatalf("initialize %d: %d %s", i, status, body)
		}
	}
	status, body := rawPost(t, g, "", initializeBody(4))
	var e struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &e) != nil || e.ID != 4 || e.Error.Code != -32010 ||
		!strings.Contains(e.Error.Message, "limits.max_mcp_sessions_per_principal") {
		t.Errorf("the fourth initialize: %d %s; want 429 and a JSON-RPC error under id 4 naming the limit", status, body)
	}
	if !bytes.Contains([]byte(g.stderr.String()), []byte("upstream result larger than limits.max_result_bytes discarded")) {
		t.Error("the discarded result was not logged")
	}
}
