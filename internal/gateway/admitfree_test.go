package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore/sqlitetest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAllowedCallsTakeNoSlotWithTokenOrSession: with every one of the
// gateway's 128 admission slots held by a held call whose admission does
// not return (as when the store hangs on its creation), calls the policy
// allows outright are still answered: one with a progress token and one
// from an agent session (its session's policy read under a session-read
// slot), on the lean front and on the SDK path. A call the session's
// policy excludes is still refused, and a held call from the session still
// waits for an admission slot (it needs the store).
func TestAllowedCallsTakeNoSlotWithTokenOrSession(t *testing.T) {
	verifyNoLeaks(t)
	db := sqlitetest.Open(t)
	gt := gate.New(db, policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules:    []policy.Rule{{Name: "big needs a human", Server: "up", Tools: []string{"big"}, Effect: policy.Approve}},
	}), &gate.Options{})
	host := approval.Principal{ID: "host", Kind: "human"}
	sess, sessTok, err := gt.CreateSession(t.Context(), host, session.NewSession{Tools: []string{"up__echo", "up__big"}})
	if err != nil {
		t.Fatal(err)
	}
	auth := func(tok string) (approval.Principal, bool) {
		if tok == sessTok {
			return approval.Principal{ID: sess.Principal, Kind: "agent", SessionID: string(sess.ID)}, true
		}
		return testAuth(tok)
	}
	ba := newBlockingAdmits()
	ba.Gate = gt
	h := newHooks()
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, ba, &Options{Sessions: gt})
	serve := func(opts *HTTPOptions) string {
		hd, err := g.Handler(auth, opts)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(hd)
		t.Cleanup(ts.Close)
		return ts.URL
	}
	lean := serve(&HTTPOptions{DropGrace: time.Hour})
	sdk := serve(&HTTPOptions{DropGrace: time.Hour, DisableLeanCalls: true})
	// Before the gateway's Close and the servers' (cleanups run last
	// first): the stuck admissions go on, and are held.
	t.Cleanup(ba.open)

	// Every admission slot held: admitSlotsMax held calls (parked, each
	// admitted by one of the queue's goroutines) stuck in AdmitOrHold.
	conns := make([]net.Conn, admitSlotsMax)
	for i := range conns {
		c, addr := dialRaw(t, lean)
		conns[i] = c
		if _, err := io.WriteString(c, rawModernRequest(addr, fmt.Sprint(100+i), "up__big", fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	ba.waitEntered(t, admitSlotsMax, "the held calls filling the slots")
	if n := len(g.admits); n != admitSlotsMax {
		t.Fatalf("%d admission slots taken, want all %d", n, admitSlotsMax)
	}

	call := func(t *testing.T, base, tok string, progress bool, tool string) (*mcp.CallToolResult, error) {
		t.Helper()
		cs := connectHTTP(t, base, tok, nil, nil)
		p := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hi"}}
		if progress {
			p.SetProgressToken("p-1")
		}
		ctx, cancel := context.WithTimeout(t.Context(), testWait)
		defer cancel()
		return cs.CallTool(ctx, p)
	}
	for _, front := range []struct{ name, base string }{{"lean front", lean}, {"SDK path", sdk}} {
		t.Run(front.name, func(t *testing.T) {
			for _, c := range []struct {
				name     string
				tok      string
				progress bool
			}{{"with a progress token", aliceToken, true}, {"from an agent session", sessTok, false}, {"from an agent session, with a progress token", sessTok, true}} {
				res, err := call(t, front.base, c.tok, c.progress, "up__echo")
				if err != nil || res.IsError || textOf(t, res) != `{"text":"hi"}` {
					t.Errorf("an allowed call %s: %v %+v, want its result without a slot", c.name, err, res)
				}
			}
			// up__die: outside the session's tools, refused without a slot.
			res, err := call(t, front.base, sessTok, false, "up__die")
			if err != nil || !res.IsError || !containsText(res, "outside the session's policy") {
				t.Errorf("a call outside the session's policy: %v %+v, want its refusal", err, res)
			}
		})
	}
	if n := h.count("echo"); n != 6 {
		t.Errorf("the allowed calls ran %d times, want 6", n)
	}

	// A held call from the session still needs the store: on the SDK
	// path it waits for a slot (parked, it would wait in the park queue).
	cs := connectHTTP(t, sdk, sessTok, nil, nil)
	held := make(chan error, 1)
	hctx, hcancel := context.WithCancel(t.Context())
	defer hcancel()
	go func() {
		_, err := cs.CallTool(hctx, &mcp.CallToolParams{Name: "up__big", Arguments: map[string]any{"n": 1000}})
		held <- err
	}()
	waitAcquiring(t, 1)
	hcancel()
	if err := <-held; err == nil {
		t.Error("the held call given up returned no error")
	}
}

// containsText reports whether r's first content item is text containing s.
func containsText(r *mcp.CallToolResult, s string) bool {
	if len(r.Content) == 0 {
		return false
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	return ok && strings.Contains(tc.Text, s)
}
