package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The host application of the session tests: an approver entry with role
// host, whose token creates root sessions on the admin listener.
const (
	sessHostID    = "host-app"
	sessHostToken = "e2e-host-token-51b0"
)

// sessConfig is a gateway in front of testupstream ("t") whose
// deployment policy allows everything, with the test agent, the approver
// bob and the host.
func sessConfig(db, record string) string {
	return `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
storage:
  driver: sqlite
  path: ` + q(db) + `
agents:
  - id: ` + agentID + `
    token_env: E2E_AGENT_TOKEN
approvers:
  - id: ` + approverID + `
    token_env: E2E_APPROVER_TOKEN
    roles: [approver]
  - id: ` + sessHostID + `
    token_env: E2E_HOST_TOKEN
    roles: [host]
` + upstreamServer(record) + `
policy:
  default: allow
  approval: { timeout: 2m, mode: hold, approvals: 1 }
`
}

// sessJSON is the part of the session JSON the tests read.
type sessJSON struct {
	ID        string `json:"id"`
	ParentID  string `json:"parent_id"`
	Mode      string `json:"mode"`
	Revision  int64  `json:"revision"`
	Effective struct {
		Revoked         bool                       `json:"revoked"`
		Tools           []string                   `json:"tools"`
		ToolsFrom       string                     `json:"tools_from"`
		RequireApproval map[string]json.RawMessage `json:"require_approval"`
	} `json:"effective"`
}

type sessCreated struct {
	ID      string   `json:"id"`
	Token   string   `json:"token"`
	Session sessJSON `json:"session"`
}

// sessHTTP sends body (nil for none) with a bearer token and returns the
// status and the response body.
func sessHTTP(t *testing.T, method, url, token string, body any, header ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// sessCreate POSTs body to base+/v1/sessions with token and wants 201.
func sessCreate(t *testing.T, base, token string, body any) sessCreated {
	t.Helper()
	status, b := sessHTTP(t, "POST", base+"/v1/sessions", token, body)
	if status != http.StatusCreated {
		t.Fatalf("POST %s/v1/sessions %v = %d %s", base, body, status, b)
	}
	var c sessCreated
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// sessConnect opens an MCP client session to g with token. The session is
// closed on cleanup.
func (g *gw) sessConnect(t *testing.T, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-session-agent", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: g.MCP, HTTPClient: &http.Client{Transport: &bearer{token: token, base: g.tr}}}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	cs, err := c.Connect(ctx, tr, era2025)
	if err != nil {
		t.Fatalf("connect to %s: %v", g.MCP, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func sessList(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		if tl.Name != policyToolName { // the built-in tool every session lists (sessionpolicy_test.go)
			names = append(names, tl.Name)
		}
	}
	slices.Sort(names)
	return names
}

// TestSessionsEndToEnd drives sessions through the built binary: a host
// creates a root session on the admin listener, a real Go SDK client uses
// its token on /mcp (list, an allowed call, a call held by the session's
// require_approval and approved through the CLI), the session creates
// children on the agent listener that can only narrow, a requirement change
// applies from the next call, and revoking the root refuses the children's
// next calls and cancels their held ones.
func TestSessionsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	g := startGateway(t, sessConfig(filepath.Join(dir, "toolgate.db"), record), map[string]string{"E2E_HOST_TOKEN": sessHostToken})
	agentBase := strings.TrimSuffix(g.MCP, "/mcp")
	all := []string{"t__ask", "t__ask_mrtr", "t__big_result", "t__echo_raw", "t__hang", "t__progress", "t__slow", "t__toggle_tool"}

	// Agent and session tokens never reach the admin listener; a host
	// token does not work on the agent side.
	if status, _ := sessHTTP(t, "POST", g.Admin+"/v1/sessions", agentToken, map[string]any{}); status != http.StatusUnauthorized {
		t.Errorf("agent token creating a root session: %d, want 401", status)
	}
	root := sessCreate(t, g.Admin, sessHostToken, map[string]any{
		"tools":            []string{"t"},
		"require_approval": map[string]any{"t": []string{"echo_raw"}},
	})
	if root.Session.Mode != "explicit" || !strings.HasPrefix(root.Token, "tgs_") {
		t.Fatalf("root session = %+v", root)
	}
	if status, _ := sessHTTP(t, "POST", g.Admin+"/v1/sessions", root.Token, map[string]any{}); status != http.StatusUnauthorized {
		t.Errorf("session token on the admin listener: %d, want 401", status)
	}

	// A real client with the session token: list, allowed call, held call
	// approved through the CLI.
	rootCS := g.sessConnect(t, root.Token, nil)
	if got := sessList(t, rootCS); !slices.Equal(got, all) {
		t.Fatalf("root session lists %v, want %v", got, all)
	}
	mustOK(t, await(t, callAsync(t.Context(), rootCS, &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{"n":1}`)})))
	held := callAsync(t.Context(), rootCS, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"n":2}`)})
	p := waitPending(t, g.Admin, 1)[0]
	if p.Rule != "session require_approval" || p.RequestedBy != "session:"+root.ID {
		t.Errorf("held approval rule %q by %q, want the session's require_approval by session:%s", p.Rule, p.RequestedBy, root.ID)
	}
	mustCLI(t, g.Admin, "approve", p.ID)
	if got := mustOK(t, await(t, held)); got != `{"n":2}` {
		t.Errorf("approved echo_raw = %q", got)
	}
	waitRecord(t, record, `echo_raw {"n":2}`)

	// The requirement changes from the next call; an unchanged PUT says so.
	putURL := g.Admin + "/v1/sessions/" + root.ID + "/servers/t/require-approval"
	var change struct {
		Changed       bool   `json:"changed"`
		EffectiveFrom string `json:"effective_from"`
	}
	status, b := sessHTTP(t, "PUT", putURL, sessHostToken, []string{"echo_raw", "big_result", "echo_raw"}, "If-Match", "1")
	if err := json.Unmarshal(b, &change); status != 200 || err != nil || !change.Changed || change.EffectiveFrom != "next_call" {
		t.Fatalf("PUT require-approval = %d %s", status, b)
	}
	status, b = sessHTTP(t, "PUT", putURL, sessHostToken, []string{"big_result", "echo_raw"}, "If-Match", "2")
	if err := json.Unmarshal(b, &change); status != 200 || err != nil || change.Changed {
		t.Errorf("unchanged PUT = %d %s, want changed false", status, b)
	}
	if status, _ := sessHTTP(t, "PUT", putURL, sessHostToken, true, "If-Match", "1"); status != http.StatusConflict {
		t.Errorf("stale If-Match: %d, want 409", status)
	}
	held = callAsync(t.Context(), rootCS, &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{"n":3}`)})
	p = waitPending(t, g.Admin, 1)[0]
	mustCLI(t, g.Admin, "deny", p.ID, "--reason", "not now")
	if msg := mustIsError(t, await(t, held)); !strings.Contains(msg, "not now") {
		t.Errorf("denied call says %q", msg)
	}

	// Children through the agent listener: narrowing only.
	narrow := sessCreate(t, agentBase, root.Token, map[string]any{"tools": []string{"t__big_result"}})
	if narrow.Session.Mode != "explicit" || narrow.Session.ParentID != root.ID {
		t.Errorf("narrow child = %+v", narrow.Session)
	}
	status, b = sessHTTP(t, "POST", agentBase+"/v1/sessions", narrow.Token, map[string]any{"tools": []string{"t"}})
	if status != http.StatusForbidden || !strings.Contains(string(b), "child tools may only narrow the parent session tool policy: t") {
		t.Errorf("widening grandchild = %d %s, want 403 naming t", status, b)
	}
	if status, b := sessHTTP(t, "POST", agentBase+"/v1/sessions", root.Token, map[string]any{"tools": []string{"nope"}}); status != http.StatusUnprocessableEntity {
		t.Errorf("unknown server = %d %s, want 422", status, b)
	}
	if status, _ := sessHTTP(t, "POST", agentBase+"/v1/sessions", agentToken, map[string]any{}); status != http.StatusForbidden {
		t.Errorf("plain agent token creating a child: %d, want 403", status)
	}
	narrowCS := g.sessConnect(t, narrow.Token, nil)
	if got := sessList(t, narrowCS); !slices.Equal(got, []string{"t__big_result"}) {
		t.Errorf("narrow child lists %v, want [t__big_result]", got)
	}
	if msg := mustIsError(t, await(t, callAsync(t.Context(), narrowCS, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"n":4}`)}))); !strings.Contains(msg, "outside the session's policy") {
		t.Errorf("narrow child calling echo_raw: %q", msg)
	}
	none := sessCreate(t, agentBase, root.Token, map[string]any{"tools": []string{}})
	noneCS := g.sessConnect(t, none.Token, nil)
	if got := sessList(t, noneCS); len(got) != 0 {
		t.Errorf("child with tools [] lists %v", got)
	}

	// A child cannot switch its parent's requirement off: asking for it is
	// refused (403 widen, naming the field and the parent's value) rather
	// than accepted and silently overridden. An inherited child has its
	// parent's: echo_raw is held. Revoking the root cancels it.
	status, b = sessHTTP(t, "POST", agentBase+"/v1/sessions", root.Token, map[string]any{"require_approval": map[string]any{"t": false}})
	if status != http.StatusForbidden || !strings.Contains(string(b), `"widen"`) || !strings.Contains(string(b), "require_approval.t = false") {
		t.Errorf("child switching its parent's requirement off = %d %s, want 403 widen naming require_approval.t", status, b)
	}
	inh := sessCreate(t, agentBase, root.Token, map[string]any{})
	if inh.Session.Mode != "inherited" {
		t.Errorf("child without tools: mode %q, want inherited", inh.Session.Mode)
	}
	inhEvents := make(chan struct{}, 8)
	inhCS := g.sessConnect(t, inh.Token, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { inhEvents <- struct{}{} }})
	if got := sessList(t, inhCS); !slices.Equal(got, all) {
		t.Errorf("inherited child lists %v, want %v", got, all)
	}
	held = callAsync(t.Context(), inhCS, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"n":5}`)})
	p = waitPending(t, g.Admin, 1)[0]
	if p.RequestedBy != "session:"+inh.ID {
		t.Errorf("held approval by %q, want session:%s", p.RequestedBy, inh.ID)
	}
	status, b = sessHTTP(t, "DELETE", g.Admin+"/v1/sessions/"+root.ID, sessHostToken, nil)
	if status != 200 || !strings.Contains(string(b), inh.ID) || !strings.Contains(string(b), p.ID) {
		t.Fatalf("DELETE root = %d %s, want it to list the child and the cancelled approval", status, b)
	}
	if msg := mustIsError(t, await(t, held)); !strings.Contains(msg, "cancelled") {
		t.Errorf("held call of a revoked child says %q, want cancelled", msg)
	}
	waitState(t, g.Admin, p.ID, "cancelled")
	select {
	case <-inhEvents:
	case <-t.Context().Done():
		t.Fatal("no tools/list_changed after revocation")
	}
	if got := sessList(t, inhCS); len(got) != 0 {
		t.Errorf("revoked child lists %v, want nothing", got)
	}
	for _, cs := range []*mcp.ClientSession{rootCS, narrowCS, inhCS} {
		if msg := mustIsError(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{"n":6}`)}))); !strings.Contains(msg, "revoked") {
			t.Errorf("call after revocation says %q, want revoked", msg)
		}
	}
	var s sessJSON
	status, b = sessHTTP(t, "GET", g.Admin+"/v1/sessions/"+narrow.ID, sessHostToken, nil)
	if err := json.Unmarshal(b, &s); status != 200 || err != nil || !s.Effective.Revoked || s.Effective.ToolsFrom != narrow.ID {
		t.Errorf("GET revoked child = %d %s", status, b)
	}
	if lines := readRecord(t, record); slices.ContainsFunc(lines, func(l string) bool {
		return strings.Contains(l, `"n":5`) || strings.Contains(l, `"n":6`) || strings.Contains(l, `"n":3`)
	}) {
		t.Errorf("refused calls reached the upstream: %q", lines)
	}
}
