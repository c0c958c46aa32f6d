package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernPolicy allows t__echo_raw and holds t__slow for approval.
const modernPolicy = `
policy:
  default: deny
  rules:
    - name: echo is fine
      server: t
      tools: [echo_raw]
      effect: allow
    - name: slow needs approval
      server: t
      tools: [slow]
      effect: approve
`

// TestGoSDKClientNegotiates2026 (issue 11): the go-sdk client, left to
// itself, negotiates 2026-07-28 with toolgate (server/discover, no
// protocol session) and lists and calls tools; the same endpoint still
// serves a 2025-11-25 client with a session.
func TestGoSDKClientNegotiates2026(t *testing.T) {
	g, record := startUpstreamGateway(t, modernPolicy)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-2026", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: g.MCP, HTTPClient: &http.Client{Transport: &bearer{token: agentToken, base: g.tr}}}
	cs, err := c.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", v)
	}
	if cs.ID() != "" {
		t.Errorf("a 2026-07-28 session has protocol session id %q, want none", cs.ID())
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "t__echo_raw") {
		t.Fatalf("tools/list = %v, want t__echo_raw", names)
	}
	if got := mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"era":"2026"}`)))); got != `{"era":"2026"}` {
		t.Errorf("call returned %q", got)
	}
	waitRecord(t, record, `echo_raw {"era":"2026"}`)

	old := g.connect(t, nil, nil)
	if v := old.InitializeResult().ProtocolVersion; v != "2025-11-25" || old.ID() == "" {
		t.Fatalf("2025 client: version %q, session %q; want 2025-11-25 with a session", v, old.ID())
	}
	if got := mustOK(t, await(t, callAsync(t.Context(), old, toolCall("t__echo_raw", `{"era":"2025"}`)))); got != `{"era":"2025"}` {
		t.Errorf("2025 call returned %q", got)
	}
}

// post2026 sends one 2026-07-28 JSON-RPC request to g's /mcp with the
// given SEP-2243 headers, and returns the HTTP status and the decoded
// response (the JSON body, or the data of the first SSE event).
func post2026(t *testing.T, g *gw, headers map[string]string, body string) (int, map[string]any) {
	t.Helper()
	return post2026As(t, g, agentToken, headers, body)
}

// post2026As is post2026 as the agent whose token is token.
func post2026As(t *testing.T, g *gw, token string, headers map[string]string, body string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.MCP, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: &bearer{token: token, base: g.tr}}).Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 {
		raw = raw[i+len("data: "):]
		if j := bytes.IndexByte(raw, '\n'); j >= 0 {
			raw = raw[:j]
		}
	}
	var msg map[string]any
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("response %d is not JSON-RPC: %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, msg
}

// TestHeaderMismatchRunsNothing (issue 11, SEP-2243): a 2026-07-28 call
// whose Mcp-Name header names another tool than its body gets -32020;
// nothing runs and no approval is created. The same body with agreeing
// headers is held for approval (so the check is what stopped it).
func TestHeaderMismatchRunsNothing(t *testing.T) {
	g, record := startUpstreamGateway(t, modernPolicy)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t__slow","arguments":{"seconds":1},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, h := range []map[string]string{
		{"Mcp-Method": "tools/call", "Mcp-Name": "t__echo_raw"},
		{"Mcp-Method": "tools/list", "Mcp-Name": "t__slow"},
		{"Mcp-Method": "tools/call"},
	} {
		_, msg := post2026(t, g, h, body)
		e, _ := msg["error"].(map[string]any)
		if code, _ := e["code"].(float64); code != -32020 {
			t.Errorf("headers %v: response %v, want error -32020", h, msg)
		}
	}
	if n := len(approvals(t, g.Admin, "all")); n != 0 {
		t.Fatalf("%d approvals created by mismatched requests, want 0", n)
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q", got)
	}

	// Agreeing headers: the call reaches the gate and is held.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.MCP, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "t__slow")
		if resp, err := (&http.Client{Transport: &bearer{token: agentToken, base: g.tr}}).Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if p := waitPending(t, g.Admin, 1)[0]; p.Tool != "slow" {
		t.Errorf("held %s/%s, want t/slow", p.Server, p.Tool)
	}
	cancel()
	<-done
}

// TestUpstreamSpeakingOnly2026 (issue 11): a go-sdk upstream restricted to
// 2026-07-28 over stateless HTTP connects (toolgate falls back from
// 2025-11-25 to 2026-07-28 through server/discover) and its tools are
// listed and called through toolgate, by a 2025 and a 2026 agent.
func TestUpstreamSpeakingOnly2026(t *testing.T) {
	u, record := startHTTPUpstream(t, "-only-2026")
	dir := t.TempDir()
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "toolgate.db"), `
servers:
  t:
    url: `+q(u)+`
policy:
  default: deny
  rules:
    - name: echo is fine
      server: t
      tools: [echo_raw]
      effect: allow
`), nil)
	g.waitLog(t, "upstream speaks only MCP 2026-07-28")
	old := g.connect(t, nil, nil)
	if got := mustOK(t, await(t, callAsync(t.Context(), old, toolCall("t__echo_raw", `{"up":"2026","agent":"2025"}`)))); got != `{"up":"2026","agent":"2025"}` {
		t.Errorf("2025 agent's call returned %q", got)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-2026", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.MCP, HTTPClient: &http.Client{Transport: &bearer{token: agentToken, base: g.tr}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"up":"2026","agent":"2026"}`)))); got != `{"up":"2026","agent":"2026"}` {
		t.Errorf("2026 agent's call returned %q", got)
	}
	waitRecord(t, record, `echo_raw {"up":"2026","agent":"2026"}`)
	if n := countRecord(t, record, `echo_raw {"up":"2026","agent":"2025"}`); n != 1 {
		t.Errorf("the 2025 agent's call ran %d times, want 1", n)
	}
}

// TestOwnAnswersCarryResultType2026 (issue 11): a tools/call result that
// toolgate answers itself, here a policy refusal, carries resultType
// "complete" on a 2026-07-28 request, as that revision requires (the
// TypeScript SDK v2 fails a call whose result lacks it); nothing runs.
func TestOwnAnswersCarryResultType2026(t *testing.T) {
	g, record := startUpstreamGateway(t, modernPolicy)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t__big_result","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	_, msg := post2026(t, g, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "t__big_result"}, body)
	res, _ := msg["result"].(map[string]any)
	if res == nil || res["isError"] != true {
		t.Fatalf("denied call answered %v, want an isError result", msg)
	}
	if res["resultType"] != "complete" {
		t.Errorf("refusal result %v has resultType %v, want \"complete\"", res, res["resultType"])
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q", got)
	}
}
