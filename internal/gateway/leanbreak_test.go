package gateway

import (
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestLeanCallDispatchesTheRewrittenArguments: with Options.Rewrite set,
// the gate decides on the rewritten argument bytes, so the upstream must get
// those bytes, on the lean front as on the SDK path (a lean call once sent
// the agent's own bytes, which no policy had seen).
func TestLeanCallDispatchesTheRewrittenArguments(t *testing.T) {
	for _, disable := range []bool{false, true} {
		db := sqlitetest.Open(t)
		pol := policy.NewHolder(&policy.Policy{Default: policy.Allow,
			Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute}})
		gt := gate.New(db, pol, &gate.Options{})
		h := newHooks()
		trail := &leanTrail{}
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gt, &Options{
			Rewrite: func(_, _ string, _ json.RawMessage) json.RawMessage { return json.RawMessage(`{"rewritten":true}`) },
		})
		g.leanHook = trail.hook
		cs := connectHTTP(t, serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: disable}), aliceToken, nil, nil)
		if !disable {
			waitInitialized(t, g, cs.ID())
		}
		trail.take()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{"agent":"bytes"}`)})
		if err != nil || res.IsError {
			t.Fatalf("lean off %v: %v %+v", disable, err, res)
		}
		if got := textOf(t, res); got != `{"rewritten":true}` {
			t.Errorf("lean off %v: the upstream got %s, want the rewritten arguments the gate decided on", disable, got)
		}
		if got := trail.take(); !disable && (len(got) != 1 || !got[0]) {
			t.Errorf("lean trail %v, want [true]", got)
		}
	}
}

// TestLeanFrontForgetsADeletedSession: once a DELETE of a session was
// answered, the lean front no longer serves calls on it; they get the
// SDK's 404 like any other request. The front used to learn of the end
// only after the gateway had closed the session's per-agent upstream
// processes, and meanwhile served calls on the deleted session (which
// started new per-agent processes that nothing closed).
func TestLeanFrontForgetsADeletedSession(t *testing.T) {
	h := newHooks()
	g := newGateway(t, []ServerConfig{stdioServer("up"), {Name: "web", URL: httpUpstream(t, newUpstreamServer(h))}}, allowAll(), nil)
	trail := &leanTrail{}
	g.leanHook = trail.hook
	base := serveHTTP(t, g, nil)
	for i := range 3 {
		cs := connectHTTP(t, base, aliceToken, nil, nil)
		sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
		waitInitialized(t, g, sid)
		// A per-agent upstream process to close when the session ends.
		if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{}`)}); err != nil || res.IsError {
			t.Fatalf("session %d: call before the DELETE: %v %+v", i, err, res)
		}
		send := func(method, body string) (int, string) {
			t.Helper()
			resp, b := sessionExchange(t, method, base, aliceToken, sid, version, strings.NewReader(body))
			return resp.StatusCode, string(b)
		}
		if status, body := send(http.MethodDelete, ""); status != http.StatusNoContent {
			t.Fatalf("session %d: DELETE: %d %q", i, status, body)
		}
		trail.take()
		for _, tool := range []string{"web__echo", "up__echo"} {
			status, body := send(http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"after":"delete"}}}`)
			if status != http.StatusNotFound {
				t.Errorf("session %d: %s after the DELETE: %d %q, want 404", i, tool, status, body)
			}
		}
		if got := trail.take(); slices.Contains(got, true) {
			t.Errorf("session %d: lean trail %v after the DELETE, want nothing served", i, got)
		}
	}
}

// TestLeanFrontForgetsAnExpiredSession: a session the front's idle timer
// closed is forgotten before it is closed, so a call sent once it ended
// gets the SDK's 404 instead of being served lean (while the gateway
// still closes its per-agent upstream sessions).
func TestLeanFrontForgetsAnExpiredSession(t *testing.T) {
	g := newGateway(t, []ServerConfig{stdioServer("up")}, allowAll(), nil)
	trail := &leanTrail{}
	g.leanHook = trail.hook
	base := serveHTTP(t, g, &HTTPOptions{SessionTimeout: time.Hour})
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, g, sid)
	// A per-agent upstream process to close when the session ends.
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{}`)}); err != nil || res.IsError {
		t.Fatalf("call before the expiry: %v %+v", err, res)
	}
	var ls *leanSession
	g.leanRegs.Range(func(k, _ any) bool {
		ls = k.(*leanSessions).get(sid)
		return ls == nil
	})
	if ls == nil {
		t.Fatal("the lean front does not know the session")
	}
	// Expire it now: fire its idle timer once no request is in flight.
	for {
		ls.mu.Lock()
		idle := ls.active == 0
		if idle {
			ls.timer.Reset(0)
		}
		ls.mu.Unlock()
		if idle {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_ = ls.ss.Wait() // the idle timer closed it
	// Forgotten before it was closed: once Wait returns, the lean front
	// no longer knows the session.
	var still bool
	g.leanRegs.Range(func(k, _ any) bool {
		still = k.(*leanSessions).get(sid) != nil
		return !still
	})
	if still {
		t.Fatal("the lean front still knows the session after it was closed")
	}
	// go-sdk v1.8.0 drops a closed session from its handler's map only
	// after Close returns (ServerSession.Close runs onClose after
	// conn.Close), and answers a POST in that window with an empty 200.
	// Wait until its handler answers 404 to a ping.
	for {
		resp, _ := sessionExchange(t, http.MethodPost, base, aliceToken, sid, version,
			strings.NewReader(`{"jsonrpc":"2.0","id":6,"method":"ping"}`))
		if resp.StatusCode == http.StatusNotFound {
			break
		}
		if t.Context().Err() != nil {
			t.Fatalf("the SDK still serves the closed session: %d", resp.StatusCode)
		}
		time.Sleep(time.Millisecond)
	}
	trail.take()
	resp, b := sessionExchange(t, http.MethodPost, base, aliceToken, sid, version,
		strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("call after the session expired: %d %q, want 404", resp.StatusCode, b)
	}
	if got := trail.take(); slices.Contains(got, true) {
		t.Errorf("lean trail %v after the expiry, want nothing served", got)
	}
}

// TestLeanCancelOnlyFromItsSession: a notifications/cancelled naming a
// lean call in flight cancels it only when it comes from the call's own
// session and principal: the same id cancelled from another session of
// the same principal, by another principal on the call's session (the
// SDK's 403) or on that principal's own session leaves it running.
func TestLeanCancelOnlyFromItsSession(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	csA := connectHTTP(t, f.base, aliceToken, nil, nil)
	csA2 := connectHTTP(t, f.base, aliceToken, nil, nil)
	csB := connectHTTP(t, f.base, bobToken, nil, nil)
	for _, cs := range []*mcp.ClientSession{csA, csA2, csB} {
		waitInitialized(t, f.g, cs.ID())
	}
	version := csA.InitializeResult().ProtocolVersion
	send := func(token, sid, body string) int {
		t.Helper()
		resp, _ := sessionExchange(t, http.MethodPost, f.base, token, sid, version, strings.NewReader(body))
		return resp.StatusCode
	}
	done := make(chan int, 1)
	go func() {
		done <- send(aliceToken, csA.ID(), `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up__sleep","arguments":{}}}`)
	}()
	<-f.h.started
	var ls *leanSession
	f.g.leanRegs.Range(func(k, _ any) bool {
		ls = k.(*leanSessions).get(csA.ID())
		return ls == nil
	})
	// Record the cancels of the call (a cancel acts before its POST is
	// answered).
	var cancels atomic.Int64
	ls.mu.Lock()
	inner, ok := ls.inFlight["n:5"]
	if ok {
		ls.inFlight["n:5"] = func(cause error) { cancels.Add(1); inner(cause) }
	}
	ls.mu.Unlock()
	if !ok {
		t.Fatal("the sleep is not in flight on the lean path")
	}
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"x"}}`
	send(aliceToken, csA2.ID(), cancel)
	if status := send(bobToken, csA.ID(), cancel); status != http.StatusForbidden {
		t.Errorf("bob cancelling on alice's session: %d, want 403", status)
	}
	send(bobToken, csB.ID(), cancel)
	if n := cancels.Load(); n != 0 {
		t.Fatalf("%d cancels of alice's lean call from other sessions or principals, want 0", n)
	}
	if status := send(aliceToken, csA.ID(), cancel); status != http.StatusAccepted {
		t.Errorf("alice cancelling her call: %d, want 202", status)
	}
	if n := cancels.Load(); n != 1 {
		t.Errorf("%d cancels after alice cancelled her call, want 1", n)
	}
	if cause := <-f.h.ended; cause == nil {
		t.Error("the sleep ended without a cause, want it cancelled")
	}
	<-done
}

// TestLeanHeadersAcceptAsTheSDK: the lean front takes a POST only with an
// Accept the SDK's handler takes without a word; it once matched
// substrings, so it served POSTs whose Accept the SDK refuses with 400
// (application/jsonl, text/event-streams), and handed media ranges the SDK
// accepts (*/*, any case) to the SDK path.
func TestLeanHeadersAcceptAsTheSDK(t *testing.T) {
	const version = "2025-11-25"
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{[]string{"application/json, text/event-stream"}, true},
		{[]string{"application/json", "text/event-stream"}, true},
		{[]string{"*/*"}, true},
		{[]string{"Application/JSON;q=0.9, TEXT/*"}, true},
		{[]string{"application/*, text/event-stream"}, true},
		{[]string{"application/jsonl, text/event-streams"}, false},
		{[]string{"application/json-seq, text/event-stream"}, false},
		{[]string{"application/json"}, false},
		{nil, false},
	} {
		h := http.Header{"Content-Type": {"application/json"}, "Mcp-Protocol-Version": {version}, "Accept": tc.accept}
		if got := leanHeaders(h, version); got != tc.want {
			t.Errorf("Accept %q: lean %v, want %v (as the SDK accepts it)", tc.accept, got, tc.want)
		}
	}
}

// TestLeanHeadersContentTypeAndRefusedHeaders: leanHeaders looks headers
// up by their canonical keys and compares the common Content-Type before
// parsing it; the answer is the one the parse gives for every spelling,
// and a header set under any spelling (Header.Set canonicalises, as
// net/http's reader does) still sends the POST to the SDK path.
func TestLeanHeadersContentTypeAndRefusedHeaders(t *testing.T) {
	const version = "2025-11-25"
	base := func() http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
		h.Set("MCP-Protocol-Version", version)
		return h
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON",
		"application/json;", "application/jsonl", "text/plain", "", "application/json, text/plain"} {
		h := base()
		h.Set("Content-Type", ct)
		mt, _, err := mime.ParseMediaType(ct)
		if want := err == nil && mt == "application/json"; leanHeaders(h, version) != want {
			t.Errorf("Content-Type %q: lean %v, want %v", ct, !want, want)
		}
	}
	if h := base(); !leanHeaders(h, version) {
		t.Fatal("the plain headers are not lean")
	}
	if h := base(); leanHeaders(h, "2025-06-18") {
		t.Error("another MCP-Protocol-Version is lean")
	}
	for _, name := range []string{"Last-Event-ID", "MCP-Method", "Mcp-Name"} {
		h := base()
		h.Set(name, "x")
		if leanHeaders(h, version) {
			t.Errorf("with %s: lean, want the SDK path", name)
		}
	}
	h := base()
	h.Del("Content-Type")
	if leanHeaders(h, version) {
		t.Error("without Content-Type: lean, want the SDK path")
	}
}
