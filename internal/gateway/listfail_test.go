package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// failingList wraps a streamable HTTP MCP handler: while fail is set, it
// answers every tools/list (or method, when set) with a JSON-RPC error, whose message is msg if
// set, else one quoting self (the URL the gateway is configured with, query
// and all), and passes the rest on.
type failingList struct {
	next http.Handler
	fail atomic.Bool
	self atomic.Pointer[string]
	msg  string
	// method is the request failed; "" means tools/list, "*" every
	// JSON-RPC request (a POST with an id).
	method string
}

func (f *failingList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !f.fail.Load() {
		f.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	method := f.method
	if method == "" {
		method = "tools/list"
	}
	if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 || method != "*" && msg.Method != method {
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.next.ServeHTTP(w, r)
		return
	}
	text := f.msg
	if text == "" {
		text = fmt.Sprintf("catalog backend down (configured as %s)", *f.self.Load())
	}
	quoted, _ := json.Marshal(text)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":%s}}`, msg.ID, quoted)
}

// waitListErr waits until server's last tools/list failed (want true) or
// succeeded (want false).
func waitListErr(t *testing.T, g *Gateway, server string, want bool) {
	t.Helper()
	u := g.ups[server]
	ctx, cancel := context.WithTimeout(t.Context(), testWait)
	defer cancel()
	for {
		u.mu.Lock()
		ch, got := u.changed, u.listErr != nil && u.conn != nil
		u.mu.Unlock()
		if got == want {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("upstream %q: tools/list failed = %v after %s, want %v", server, got, testWait, want)
		}
	}
}

// TestListFailedToolIsUnavailable: an HTTP upstream that initialises but
// whose tools/list fails (at start and again after the reconnect) is up
// with no tools; a go-sdk agent calling one of its names is told it is
// unavailable because tools/list failed (an isError result, the URL's
// query removed, recorded as a refusal, nothing sent), not "unknown tool".
// A session narrowed without that server still reads "unknown tool". Once
// a tools/list succeeds, the same call runs.
func TestListFailedToolIsUnavailable(t *testing.T) {
	key, err := seal.NewKey(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	rec := &decidedLog{}
	pol := policy.NewHolder(&policy.Policy{Default: policy.Allow})
	gt := gate.New(sqlitetest.Open(t), pol, &gate.Options{Key: key, Recorder: rec})
	narrowTok, auth := narrowSession(t, gt, "up__echo")

	up := newUpstreamServer(nil)
	fl := &failingList{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)}
	fl.fail.Store(true)
	ts := httptest.NewServer(fl)
	t.Cleanup(ts.Close)
	flakyURL := ts.URL + "/mcp?key=s3cret" //nolint:gosec // G101: a made-up credential, to see it removed
	fl.self.Store(&flakyURL)

	g := newGateway(t, []ServerConfig{
		{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))},
		{Name: "flaky", URL: flakyURL, Optional: true},
	}, gt, &Options{Sessions: gt, Tasks: gt, HealthInterval: time.Hour, RestartMin: 10 * time.Millisecond})
	h, err := g.Handler(auth, nil)
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	waitState(t, g, "flaky", StateConnected)
	waitListErr(t, g, "flaky", true)

	cs := connectHTTP(t, gw.URL, aliceToken, nil, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "flaky__echo", Arguments: map[string]any{"n": 1}})
	if err != nil || !res.IsError {
		t.Fatalf("flaky__echo: %+v %v, want an isError result", res, err)
	}
	text := textOf(t, res)
	for _, want := range []string{`upstream "flaky" is unavailable: tools/list failed: `, "catalog backend down", "the call was not sent and nothing was run"} {
		if !strings.Contains(text, want) {
			t.Errorf("answer %q does not say %q", text, want)
		}
	}
	if strings.Contains(text, "s3cret") {
		t.Errorf("answer %q shows the URL's query", text)
	}
	narrow := connectHTTP(t, gw.URL, narrowTok, nil, nil)
	res, err = narrow.CallTool(t.Context(), &mcp.CallToolParams{Name: "flaky__echo"})
	wantUnknown(t, "flaky__echo", res, err)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__nosuch"})
	wantUnknown(t, "up__nosuch", res, err)

	recs := rec.of("flaky")
	if len(recs) != 1 || recs[0].Allowed || recs[0].Tool != "echo" || !strings.Contains(recs[0].Reason, "tools/list failed") ||
		strings.Contains(recs[0].Reason, "s3cret") {
		t.Fatalf("flaky's audit records = %+v, want one refusal saying tools/list failed", recs)
	}

	fl.fail.Store(false)
	g.ups["flaky"].requestRefresh()
	waitListErr(t, g, "flaky", false)
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "flaky__echo", Arguments: map[string]any{"n": 1}})
	if err != nil || res.IsError {
		t.Fatalf("flaky__echo after a good tools/list: %+v %v", res, err)
	}
}
