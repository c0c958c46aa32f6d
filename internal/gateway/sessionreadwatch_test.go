package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestLeanSessionReadWatchesTheClient (fixes33): on the 2025-era lean
// front, an agent session's call that waits for its session's policy read
// (every session-read slot taken) is given up when its client leaves:
// the POST's drop watch is armed before the read, so after the drop grace
// the call is refused as not admitted, and recorded, while the slots are
// still taken. On 78ec92b the watch was armed after the read: the call
// waited on for a slot although its client was gone.
func TestLeanSessionReadWatchesTheClient(t *testing.T) {
	verifyNoLeaks(t)
	db := sqlitetest.Open(t)
	gt := gate.New(db, policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
	}), &gate.Options{})
	host := approval.Principal{ID: "host", Kind: "human"}
	sess, sessTok, err := gt.CreateSession(t.Context(), host, session.NewSession{Tools: []string{"up__echo"}})
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
	hd, err := g.Handler(auth, &HTTPOptions{DropGrace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(hd)
	t.Cleanup(ts.Close)
	t.Cleanup(ba.open)

	const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fixes33","version":"1"}}}`
	ex, b := sessionExchange(t, http.MethodPost, ts.URL, sessTok, "", "", strings.NewReader(init))
	sid := ex.Header.Get("Mcp-Session-Id")
	if ex.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q: %s", ex.StatusCode, sid, b)
	}
	sessionExchange(t, http.MethodPost, ts.URL, sessTok, sid, "2025-06-18", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	waitInitialized(t, g, sid)

	// Every session-read slot taken.
	for range sessionReadsMax {
		g.sessionReads <- struct{}{}
	}
	t.Cleanup(func() {
		for range sessionReadsMax {
			<-g.sessionReads
		}
	})

	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"gone"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + sessTok, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18",
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
		req.Header.Set(k, v)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	waitAcquiring(t, 1) // the call waits for a session-read slot
	cancel()            // the client leaves: its connection is closed, no cancellation is sent
	if err := <-done; err == nil {
		t.Error("the request given up got an answer, want its context's error")
	}

	for deadline := time.Now().Add(testWait); ; time.Sleep(5 * time.Millisecond) {
		got := ba.unadmittedCalls()
		if len(got) == 1 {
			if want := `{"text":"gone"} refused: `; !strings.HasPrefix(got[0], want) || !strings.Contains(got[0], "before the call was admitted; nothing was run") {
				t.Errorf("recorded %q, want %q… not admitted", got[0], want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call whose client left while it waited for its session's policy read was not given up (unadmitted: %q)", got)
		}
	}
	if n := len(g.sessionReads); n != sessionReadsMax {
		t.Errorf("%d session-read slots taken, want the test's %d", n, sessionReadsMax)
	}
	if n := h.count("echo"); n != 0 {
		t.Errorf("the call ran %d times, want 0", n)
	}
}
