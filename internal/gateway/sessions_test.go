package gateway

import (
	"context"
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

// toolNames lists the names of a tools/list answer.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestSessionToolViews serves agent sessions through a real gate: each
// session lists only its effective tools, a default session follows tools
// an upstream adds later while an explicit one neither lists them nor is
// notified, and a revoked session is notified and then lists nothing.
func TestSessionToolViews(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	host := approval.Principal{ID: "host", Kind: "human"}
	tokens := map[string]approval.Principal{}
	newSession := func(tools []string) session.Session {
		s, tok, err := g.CreateSession(t.Context(), host, session.NewSession{Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		tokens[tok] = approval.Principal{ID: s.Principal, Kind: "agent", SessionID: string(s.ID)}
		return s
	}
	def := newSession(nil)
	exp := newSession([]string{"fs__echo"})
	var defTok, expTok string
	for tok, p := range tokens {
		switch p.SessionID {
		case string(def.ID):
			defTok = tok
		case string(exp.ID):
			expTok = tok
		}
	}

	srv := newUpstreamServer(nil)
	gw := newGateway(t, []ServerConfig{{Name: "fs", URL: httpUpstream(t, srv)}}, g, &Options{Sessions: g})
	h, err := gw.Handler(func(tok string) (approval.Principal, bool) {
		if p, ok := tokens[tok]; ok {
			return p, true
		}
		return testAuth(tok)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	defEv, expEv := newClientEvents(), newClientEvents()
	defCS := connectHTTP(t, ts.URL, defTok, defEv, nil)
	expCS := connectHTTP(t, ts.URL, expTok, expEv, nil)
	plainCS := connectHTTP(t, ts.URL, aliceToken, nil, nil)

	all := toolNames(t, plainCS)
	if got := toolNames(t, defCS); !slices.Equal(got, all) || len(all) < 2 {
		t.Fatalf("default session lists %v, want every tool %v", got, all)
	}
	if got := toolNames(t, expCS); !slices.Equal(got, []string{"fs__echo"}) {
		t.Fatalf("explicit session lists %v, want [fs__echo]", got)
	}
	res, err := expCS.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs__numbers"})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "outside the session's policy") {
		t.Fatalf("explicit session calling fs__numbers: %+v, %v; want isError outside the session's policy", res, err)
	}

	srv.AddTool(&mcp.Tool{Name: "later", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "later"}}}, nil
	})
	waitTools(t, defCS, defEv, func(n []string) bool { return slices.Contains(n, "fs__later") })
	if got := toolNames(t, expCS); !slices.Equal(got, []string{"fs__echo"}) {
		t.Errorf("after the upstream added a tool the explicit session lists %v, want [fs__echo]", got)
	}

	// The sending middleware decides per MCP session: the explicit
	// session's view did not change, so its notification is suppressed.
	passes := func() bool {
		t.Helper()
		for ss := range gw.server.Sessions() {
			if p, _, ok := gw.views.get(ss, viewTools); ok && p.SessionID == string(exp.ID) {
				sent := false
				next := func(context.Context, string, mcp.Request) (mcp.Result, error) { sent = true; return nil, nil }
				req := &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: ss, Params: &mcp.ToolListChangedParams{}}
				if _, err := gw.sendingMiddleware(next)(t.Context(), "notifications/tools/list_changed", req); err != nil {
					t.Fatal(err)
				}
				return sent
			}
		}
		t.Fatal("no MCP session of the explicit agent session")
		return false
	}
	if passes() {
		t.Errorf("list_changed passes to the explicit session although its tools did not change")
	}

	// Revoke the explicit session: its client is told to re-list.
	if _, err := g.RevokeSession(t.Context(), host, exp.ID); err != nil {
		t.Fatal(err)
	}
	gw.SessionsChanged()
	select {
	case <-expEv.listChanged:
	case <-time.After(testWait):
		t.Fatal("the revoked session got no tools/list_changed")
	}
	if passes() {
		t.Errorf("list_changed passes again after the revoked session was notified of its change")
	}
	if got := toolNames(t, expCS); len(got) != 0 {
		t.Errorf("revoked session lists %v, want nothing", got)
	}
	res, err = expCS.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs__echo", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "revoked") {
		t.Errorf("revoked session calling fs__echo: %+v, %v; want isError saying revoked", res, err)
	}
	if got := toolNames(t, defCS); !slices.Contains(got, "fs__later") || slices.Contains(got, notifierTool) {
		t.Errorf("default session lists %v", got)
	}
}
