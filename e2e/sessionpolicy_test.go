package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// policyToolName is the built-in MCP tool through which a session asks to
// change its own policy.
const policyToolName = "toolgate__request_policy_change"

// A second approver, on whose behalf the policy tests' sessions act: she
// may never decide their requests.
const (
	danaID    = "dana"
	danaToken = "e2e-dana-token-27c3"
)

// spEnv is the gateway environment of the policy tests.
var spEnv = map[string]string{"E2E_HOST_TOKEN": sessHostToken, "E2E_DANA_TOKEN": danaToken}

// withDana adds the approver dana to a sessConfig.
func withDana(cfg string) string {
	return strings.Replace(cfg, "approvers:\n", "approvers:\n  - id: "+danaID+"\n    token_env: E2E_DANA_TOKEN\n    roles: [approver]\n", 1)
}

// spAnswer is the answer to a policy request.
type spAnswer struct {
	Status     string   `json:"status"`
	ApprovalID string   `json:"approval_id"`
	ExpiresAt  string   `json:"expires_at"`
	Revision   int64    `json:"revision"`
	Changed    bool     `json:"changed"`
	Widens     []string `json:"widens"`
	Reason     string   `json:"reason"`
	Message    string   `json:"message"`
	Error      struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// spRequest POSTs a policy request of session id with token and returns
// the HTTP status and the answer.
func spRequest(t *testing.T, agentBase, id, token string, body any) (int, spAnswer) {
	t.Helper()
	status, b := sessHTTP(t, "POST", agentBase+"/v1/sessions/"+id+"/policy-requests", token, body)
	var a spAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("policy request answer %d %s: %v", status, b, err)
	}
	return status, a
}

// spWant is spRequest that wants status and answer status.
func spWant(t *testing.T, agentBase, id, token string, body any, status int, want string) spAnswer {
	t.Helper()
	got, a := spRequest(t, agentBase, id, token, body)
	if got != status || a.Status != want {
		t.Fatalf("policy request %v = %d %+v, want %d %s", body, got, a, status, want)
	}
	return a
}

// spSession reads session id on the admin listener.
func spSession(t *testing.T, admin, id string) sessJSON {
	t.Helper()
	status, b := sessHTTP(t, "GET", admin+"/v1/sessions/"+id, sessHostToken, nil)
	var s sessJSON
	if err := json.Unmarshal(b, &s); status != http.StatusOK || err != nil {
		t.Fatalf("GET session %s = %d %s", id, status, b)
	}
	return s
}

func spTool(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, spAnswer) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: policyToolName, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var a spAnswer
	_ = json.Unmarshal([]byte(text(res)), &a)
	return res, a
}

func listsPolicyTool(t *testing.T, cs *mcp.ClientSession) bool {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == policyToolName })
}

// TestSessionPolicyRequests drives issue 6's session policy requests
// through the built binary: narrowing applies at once and voids an older
// pending request; widening waits for an approval given through the CLI
// (a separate process), which the identical request then uses once, and
// concurrent retries apply it once; a different proposal never uses it; a
// mixed change applies nothing; the session's own principal cannot
// approve; a change past the ceiling is refused even after an approval of
// something similar; the built-in MCP tool asks in band.
func TestSessionPolicyRequests(t *testing.T) {
	dir := t.TempDir()
	g := startGateway(t, withDana(sessConfig(filepath.Join(dir, "toolgate.db"), filepath.Join(dir, "record.log"))), spEnv)
	agentBase := strings.TrimSuffix(g.MCP, "/mcp")
	root := sessCreate(t, g.Admin, sessHostToken, map[string]any{
		"tools":            []string{"t__echo_raw", "t__big_result"},
		"require_approval": map[string]any{"t": []string{"echo_raw"}},
		"on_behalf_of":     danaID,
	})
	id, tok := root.ID, root.Token
	cs := g.sessConnect(t, tok, nil)
	if !listsPolicyTool(t, cs) {
		t.Fatalf("a session does not list %s", policyToolName)
	}
	if listsPolicyTool(t, g.sessConnect(t, agentToken, nil)) {
		t.Errorf("a configured agent (not a session) lists %s", policyToolName)
	}

	// A widening request waits; a narrowing one (through the built-in
	// tool) applies at once, bumps the revision and voids the older one.
	old := spWant(t, agentBase, id, tok, map[string]any{"tools": []string{"t"}}, http.StatusAccepted, "approval_required")
	if old.ApprovalID == "" || old.ExpiresAt == "" {
		t.Fatalf("approval_required without id or expiry: %+v", old)
	}
	if s := spSession(t, g.Admin, id); s.Revision != 1 {
		t.Fatalf("revision after a widening request = %d, want 1", s.Revision)
	}
	res, a := spTool(t, cs, map[string]any{"tools": []string{"t__echo_raw"}})
	if res.IsError || a.Status != "applied" || a.Revision != 2 {
		t.Fatalf("narrowing through the built-in tool = %s", text(res))
	}
	if s := spSession(t, g.Admin, id); s.Revision != 2 || !slices.Equal(s.Effective.Tools, []string{"t__echo_raw"}) {
		t.Fatalf("after narrowing: revision %d tools %v", s.Revision, s.Effective.Tools)
	}
	if got := showJSON(t, g.Admin, old.ApprovalID); got.State != "cancelled" {
		t.Errorf("pending widening request made before the narrowing is %s, want cancelled", got.State)
	}

	// Widening: approval_required, nothing applied; the session's own
	// principal (dana, whom it acts for) cannot approve; bob approves
	// through the CLI.
	wide := map[string]any{"tools": []string{"t__echo_raw", "t__slow"}}
	w := spWant(t, agentBase, id, tok, wide, http.StatusAccepted, "approval_required")
	if s := spSession(t, g.Admin, id); s.Revision != 2 || !slices.Equal(s.Effective.Tools, []string{"t__echo_raw"}) {
		t.Fatalf("widening applied something: revision %d tools %v", s.Revision, s.Effective.Tools)
	}
	var doc struct {
		Kind         string          `json:"kind"`
		Target       string          `json:"target"`
		BaseRevision int64           `json:"base_revision"`
		RequestedBy  string          `json:"requested_by"`
		Arguments    json.RawMessage `json:"arguments"`
	}
	adminGet(t, g.Admin+"/v1/approvals/"+w.ApprovalID, &doc)
	if doc.Kind != "session_policy" || doc.Target != id || doc.BaseRevision != 2 || doc.RequestedBy != "session:"+id ||
		string(doc.Arguments) != `{"tools":["t__echo_raw","t__slow"]}` {
		t.Errorf("approval = %+v %s", doc, doc.Arguments)
	}
	if r := postVerdict(t, g.Admin, danaToken, w.ApprovalID, "approve", nil); r.Status != http.StatusForbidden || r.Code != "self_review" {
		t.Errorf("approve by the session's own principal = %d %s, want 403 self_review", r.Status, r.Body)
	}
	mustCLI(t, g.Admin, "approve", w.ApprovalID)
	if s := spSession(t, g.Admin, id); s.Revision != 2 {
		t.Fatalf("approving applied the change before the retry: revision %d", s.Revision)
	}
	// A different proposal does not use the approval.
	diff := spWant(t, agentBase, id, tok, map[string]any{"tools": []string{"t__echo_raw", "t__progress"}}, http.StatusAccepted, "approval_required")
	if diff.ApprovalID == w.ApprovalID {
		t.Errorf("a different proposal got the approved request %s", w.ApprovalID)
	}

	// Two concurrent identical retries apply it once.
	var wg sync.WaitGroup
	answers := make([]spAnswer, 2)
	statuses := make([]int, 2)
	for i := range answers {
		wg.Go(func() {
			status, b, err := adminDo(t.Context(), "POST", agentBase+"/v1/sessions/"+id+"/policy-requests", tok, wide)
			statuses[i] = status
			if err == nil {
				err = json.Unmarshal(b, &answers[i])
			}
			if err != nil {
				t.Errorf("retry %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	applied := 0
	for i, a := range answers {
		switch {
		case a.Status == "applied" && a.Changed:
			applied++
		case a.Status == "applied", statuses[i] == http.StatusAccepted:
		default:
			t.Errorf("concurrent retry %d = %d %+v", i, statuses[i], a)
		}
	}
	if s := spSession(t, g.Admin, id); applied != 1 || s.Revision != 3 || !slices.Equal(s.Effective.Tools, []string{"t__echo_raw", "t__slow"}) {
		t.Fatalf("concurrent retries: %d applied, revision %d, tools %v; want 1, 3, [t__echo_raw t__slow]", applied, s.Revision, s.Effective.Tools)
	}
	if got := showJSON(t, g.Admin, w.ApprovalID); got.State != "consumed" {
		t.Errorf("used approval is %s, want consumed", got.State)
	}
	// Narrow again; the identical widening now needs a new approval.
	spWant(t, agentBase, id, tok, map[string]any{"tools": []string{"t__echo_raw"}}, http.StatusOK, "applied")
	if again := spWant(t, agentBase, id, tok, wide, http.StatusAccepted, "approval_required"); again.ApprovalID == w.ApprovalID {
		t.Errorf("a second identical retry reused approval %s", w.ApprovalID)
	}

	// Mixed narrowing (drop every tool) and widening (drop the
	// requirement) applies nothing.
	before := spSession(t, g.Admin, id)
	spWant(t, agentBase, id, tok, map[string]any{"tools": []string{}, "require_approval": map[string]any{"t": false}}, http.StatusAccepted, "approval_required")
	if s := spSession(t, g.Admin, id); s.Revision != before.Revision || !slices.Equal(s.Effective.Tools, before.Effective.Tools) || len(s.Effective.RequireApproval) != 1 {
		t.Errorf("mixed change applied something: %+v", s)
	}

	// The ceiling: a child may widen within its parent only. An approver
	// approved a similar request; the one past the parent is still 403.
	child := sessCreate(t, agentBase, tok, map[string]any{"tools": []string{}})
	similar := spWant(t, agentBase, child.ID, child.Token, map[string]any{"tools": []string{"t__echo_raw"}}, http.StatusAccepted, "approval_required")
	if r := postVerdict(t, g.Admin, approverToken, similar.ApprovalID, "approve", nil); r.Status != http.StatusOK {
		t.Fatalf("approve the similar request = %d %s", r.Status, r.Body)
	}
	status, past := spRequest(t, agentBase, child.ID, child.Token, map[string]any{"tools": []string{"t__echo_raw", "t__slow"}})
	if status != http.StatusForbidden || past.Error.Code != "ceiling" || !strings.Contains(past.Error.Message, "t__slow") {
		t.Errorf("past the ceiling = %d %+v, want 403 ceiling naming t__slow", status, past)
	}
	if s := spSession(t, g.Admin, child.ID); s.Revision != 1 {
		t.Errorf("the ceiling refusal applied something: revision %d", s.Revision)
	}
	// A session asks only for itself.
	if status, _ := sessHTTP(t, "POST", agentBase+"/v1/sessions/"+id+"/policy-requests", child.Token, map[string]any{"tools": []string{}}); status != http.StatusForbidden {
		t.Errorf("a child asking for its parent = %d, want 403", status)
	}

	// The built-in tool asks in band too.
	res, a = spTool(t, cs, map[string]any{"tools": []string{"t__echo_raw", "t__big_result"}})
	if !res.IsError || a.Status != "approval_required" || a.ApprovalID == "" {
		t.Errorf("widening through the built-in tool = %s", text(res))
	}
}

// TestSessionPolicyRequestCap: the 33rd pending policy request of one
// session is refused with a clear message, expired requests leave no
// trace in the count, and sessions.request_tool: false removes the
// built-in tool.
func TestSessionPolicyRequestCap(t *testing.T) {
	dir := t.TempDir()
	// The 32 requests must all be pending when the 33rd comes: the timeout
	// leaves room for a loaded machine (at 4s a loaded run saw the first
	// expire before the 33rd), and the test waits for the last to expire.
	cfg := sessConfig(filepath.Join(dir, "toolgate.db"), filepath.Join(dir, "record.log")) +
		"sessions:\n  request_tool: false\n  policy_request_timeout: 15s\n"
	g := startGateway(t, cfg, spEnv)
	agentBase := strings.TrimSuffix(g.MCP, "/mcp")
	s := sessCreate(t, g.Admin, sessHostToken, map[string]any{"tools": []string{}})

	cs := g.sessConnect(t, s.Token, nil)
	if listsPolicyTool(t, cs) {
		t.Errorf("with sessions.request_tool: false a session lists %s", policyToolName)
	}
	// An unknown tool is a JSON-RPC error (MCP: invalid params), not an isError result.
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: policyToolName, Arguments: map[string]any{"tools": []string{}}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("calling the absent built-in tool = %v, want an unknown tool error", err)
	}

	proposal := func(i int) map[string]any {
		return map[string]any{"tools": []string{"t__echo_raw"}, "require_approval": map[string]any{"t": []string{fmt.Sprint("x", i)}}}
	}
	var last string
	for i := range 32 {
		last = spWant(t, agentBase, s.ID, s.Token, proposal(i), http.StatusAccepted, "approval_required").ApprovalID
	}
	status, a := spRequest(t, agentBase, s.ID, s.Token, proposal(32))
	if status != http.StatusTooManyRequests || a.Error.Code != "too_many_pending" || !strings.Contains(a.Error.Message, "32 are pending") {
		t.Fatalf("33rd request = %d %+v, want 429 too_many_pending saying 32 are pending", status, a)
	}
	waitState(t, g.Admin, last, "expired")
	spWant(t, agentBase, s.ID, s.Token, proposal(32), http.StatusAccepted, "approval_required")
}
