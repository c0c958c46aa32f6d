package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestParkedStreamRestAsTheListener (attack20): after a parked 2025-era
// held call is answered, the client's next requests on the same
// connection are served as the listener serves them (serveRest): its
// whole handler, not /mcp alone (toolgate serve mounts the agents'
// session API, /v1/, beside /mcp), and its bound on a request's header.
// The same requests after a call held on the connection's goroutine are
// the reference.
func TestParkedStreamRestAsTheListener(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}
	f := newLeanFixture(t, &opts)
	listener := func(noPark bool) (string, *atomic.Int64) {
		var n atomic.Int64
		f.g.parkHook = func() { n.Add(1) }
		f.g.noPark = noPark
		mcpH, err := f.g.Handler(testAuth, &opts)
		f.g.parkHook, f.g.noPark = nil, false
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/", mcpH)
		mux.HandleFunc("/v1/", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "agent sessions")
		})
		ts := httptest.NewUnstartedServer(mux)
		ts.Config.MaxHeaderBytes = 4 << 10
		ts.Start()
		t.Cleanup(ts.Close)
		return ts.URL, &n
	}
	parkedBase, parked := listener(false)
	onConnBase, _ := listener(true)
	var got [2]string
	for i, b := range []string{parkedBase, onConnBase} {
		cs := connectHTTP(t, b, aliceToken, nil, nil)
		waitInitialized(t, f.g, cs.ID())
		c, host := dialRaw(t, b)
		wr := newWireReader(c)
		if _, err := io.WriteString(c, rawSessionPOST(host, cs.ID(), cs.InitializeResult().ProtocolVersion, "h-1", "up__big", `{"n":2}`, "")); err != nil {
			t.Fatal(err)
		}
		f.waitState(t, approval.StatePending, 1)
		approved := false
		wr.response(t, func(l string) {
			if !approved && l == strings.TrimSpace(heartbeatComment) {
				approved = true
				f.approveNext(t)
			}
		})
		f.waitState(t, approval.StateConsumed, i+1)
		var out strings.Builder
		// The agents' session API beside /mcp, then a header over the
		// listener's bound.
		for _, req := range []string{
			"GET /v1/sessions HTTP/1.1\r\nHost: " + host + "\r\n\r\n",
			"GET /v1/sessions HTTP/1.1\r\nHost: " + host + "\r\nX-Big: " + strings.Repeat("b", 32<<10) + "\r\n\r\n",
		} {
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(wr.br, nil)
			if err != nil {
				t.Fatalf("front %d: %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			out.WriteString(resp.Status + " " + strings.TrimSpace(string(body)) + "\n")
		}
		got[i] = out.String()
		_ = c.Close()
	}
	if n := parked.Load(); n != 1 {
		t.Errorf("%d calls parked, want 1", n)
	}
	if got[0] != got[1] {
		t.Errorf("after a parked call:\n%s\nafter a call held on the connection's goroutine:\n%s", got[0], got[1])
	}
}

