package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// TestApprovedCallsBesideABrokenAnswer: two calls a human approved run on
// the same HTTP upstream session (with progress tokens: the SDK path); the
// upstream answers one with a JSON body that is not JSON while the other
// is in flight. The broken one fails as "may have run", recorded
// transport_error; the other gets its result, recorded ok (it was failed
// as "may have run" with its result lost, though it had run). Real gate
// and SQLite store.
func TestApprovedCallsBesideABrokenAnswer(t *testing.T) {
	verifyNoLeaks(t)
	db, g := holdGate(t)
	up, url := newScriptedUpstream(t, true)
	h := newHeld()
	up.set("hang", h.answer)
	up.set("vendor", answerBytes(t, false, func(string) string {
		b := `{"jsonrpc":"2.0","id":` // cut short: not JSON
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
	}))
	gw := newGateway(t, []ServerConfig{{Name: "up", URL: url}}, g, nil)
	cs := connectHTTP(t, serveHTTP(t, gw, nil), aliceToken, nil, nil)
	approver := approval.Principal{ID: "carol", Kind: "human"}
	approveNext := func() approval.ID { t.Helper(); return approveOnlyPending(t, db, g, approver) }
	outcome := func(id approval.ID) approval.Outcome { t.Helper(); return waitOutcome(t, db, id) }
	call := func(tool string) chan *mcp.CallToolResult {
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			p := &mcp.CallToolParams{Name: "up__" + tool, Arguments: map[string]any{}}
			sdkPathToken(p, tool) // the SDK path
			res, err := cs.CallTool(t.Context(), p)
			if err != nil {
				t.Errorf("%s: %v", tool, err)
			}
			done <- res
		}()
		return done
	}
	held := call("hang")
	heldID := approveNext()
	<-h.arrived
	broken := call("vendor")
	brokenID := approveNext()
	if res := <-broken; res == nil || !res.IsError || !strings.Contains(textOf(t, res), "may have run") {
		t.Errorf("the broken call: %+v, want an isError saying it may have run", res)
	}
	close(h.release)
	if res := <-held; res == nil || res.IsError || textOf(t, res) != "held answer" {
		t.Errorf("the call beside it: %+v, want its result", res)
	}
	if o := outcome(brokenID); o != approval.OutcomeTransportError {
		t.Errorf("the broken call's outcome %q, want %q", o, approval.OutcomeTransportError)
	}
	if o := outcome(heldID); o != approval.OutcomeOK {
		t.Errorf("the call beside it: outcome %q, want %q", o, approval.OutcomeOK)
	}
	if n := len(up.takeCalls()); n != 2 {
		t.Errorf("the upstream got %d tools/call POSTs, want 2", n)
	}
}
