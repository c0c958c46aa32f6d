package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestPolicyTool calls the built-in toolgate__request_policy_change as an
// agent session: it is listed to sessions only, a narrowing applies and
// re-lists the session's tools, a widening answers approval_required, and
// a principal that is not a session cannot call it. Without
// Options.PolicyRequests it does not exist.
func TestPolicyTool(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, &gate.Options{ServerExists: func(s string) bool { return s == "fs" }})
	host := approval.Principal{ID: "host", Kind: "human"}
	s, tok, err := g.CreateSession(t.Context(), host, session.NewSession{Tools: []string{"fs__echo", "fs__numbers"}})
	if err != nil {
		t.Fatal(err)
	}
	auth := func(k string) (approval.Principal, bool) {
		if k == tok {
			return approval.Principal{ID: s.Principal, Kind: "agent", SessionID: string(s.ID)}, true
		}
		return testAuth(k)
	}
	serve := func(opts *Options) (session, plain *mcp.ClientSession, ev *clientEvents) {
		gw := newGateway(t, []ServerConfig{{Name: "fs", URL: httpUpstream(t, newUpstreamServer(nil))}}, g, opts)
		h, err := gw.Handler(auth, nil)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		ev = newClientEvents()
		return connectHTTP(t, ts.URL, tok, ev, nil), connectHTTP(t, ts.URL, aliceToken, nil, nil), ev
	}

	cs, plain, ev := serve(&Options{Sessions: g, PolicyRequests: g})
	if got := toolNames(t, cs); !slices.Equal(got, []string{"fs__echo", "fs__numbers", PolicyToolName}) {
		t.Fatalf("session lists %v", got)
	}
	if got := toolNames(t, plain); slices.Contains(got, PolicyToolName) {
		t.Errorf("a principal that is not a session lists %v", got)
	}
	call := func(cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, gate.PolicyAnswer) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: PolicyToolName, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		var ans gate.PolicyAnswer
		_ = json.Unmarshal([]byte(textOf(t, res)), &ans)
		return res, ans
	}
	res, ans := call(cs, map[string]any{"tools": []string{"fs__echo"}})
	if res.IsError || ans.Status != gate.PolicyApplied || ans.Revision != 2 {
		t.Fatalf("narrowing = %s", textOf(t, res))
	}
	select {
	case <-ev.listChanged:
	case <-time.After(testWait):
		t.Fatal("no tools/list_changed after the session narrowed itself")
	}
	if got := toolNames(t, cs); !slices.Equal(got, []string{"fs__echo", PolicyToolName}) {
		t.Errorf("after narrowing the session lists %v", got)
	}
	res, ans = call(cs, map[string]any{"tools": []string{"fs"}})
	if !res.IsError || ans.Status != gate.PolicyApprovalRequired || ans.ApprovalID == "" {
		t.Errorf("widening = %s", textOf(t, res))
	}
	if res, _ = call(cs, map[string]any{"tools": []string{"db"}}); !res.IsError || !strings.Contains(textOf(t, res), "ceiling") {
		t.Errorf("past the ceiling = %s", textOf(t, res))
	}
	if _, err := plain.CallTool(t.Context(), &mcp.CallToolParams{Name: PolicyToolName, Arguments: map[string]any{"tools": []string{}}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("non-session call = %v, want an unknown tool error", err)
	}

	off, _, _ := serve(&Options{Sessions: g})
	if got := toolNames(t, off); slices.Contains(got, PolicyToolName) {
		t.Errorf("without PolicyRequests the session lists %v", got)
	}
	if _, err := off.CallTool(t.Context(), &mcp.CallToolParams{Name: PolicyToolName, Arguments: map[string]any{"tools": []string{}}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("call without PolicyRequests = %v, want an unknown tool error", err)
	}
}
