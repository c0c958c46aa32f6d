package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/procs"
)

// Tests of branch attack14: what an agent is told when an HTTP upstream
// fails a call that may have reached it (httpreached.go).

// sdkCall POSTs tools/call up__<tool> with a progress token, which the
// lean front hands to the SDK path (the middleware, upstream.call and the
// go-sdk client's CallTool), and returns the answer.
func (f *rawHTTPFixture) sdkCall(t *testing.T, rid, tool, args string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"` + rid + `","method":"tools/call","params":{"name":"up__` + tool + `","arguments":` + args + `,"_meta":{"progressToken":"` + rid + `","` + sdkPathMetaKey + `":true}}}`
	resp, b := sessionExchange(t, http.MethodPost, f.base, aliceToken, f.sid, f.ver, strings.NewReader(body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", rid, resp.StatusCode, b)
	}
	return string(b)
}

// TestHTTPUpstreamMayHaveRunIsNotNothingRun: an HTTP upstream that got a
// whole tools/call and then cut the connection before answering, or
// answered HTTP 500 (its tool failed while running) or 502 or 504 (a
// proxy in front of it passed the call on and got no valid or timely
// answer), may have run the call: the agent is told so, on the lean raw
// path and on the SDK path, and never "nothing was run" (an agent told
// that may send it again). The go-sdk client reports all of these as
// rejected by the transport, and the raw path took 502 and 504 for
// rejections. A 429 or 503 still says nothing was run. The upstream got
// each call once.
func TestHTTPUpstreamMayHaveRunIsNotNothingRun(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	status := func(code int) func(http.ResponseWriter, *http.Request, json.RawMessage) {
		return func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Error(w, http.StatusText(code), code)
		}
	}
	cases := []struct {
		tool    string
		answer  func(http.ResponseWriter, *http.Request, json.RawMessage)
		want    string
		sdkWant string // on the SDK path, when not want
	}{
		{tool: "dies", answer: func(_ http.ResponseWriter, r *http.Request, _ json.RawMessage) {
			_, _ = io.Copy(io.Discard, r.Body) // the whole call arrived
			panic(http.ErrAbortHandler)        // the connection is cut before any answer
		}, want: "may have run"},
		{tool: "vendor", answer: status(http.StatusInternalServerError), want: "may have run"},
		{tool: "fails", answer: status(http.StatusBadGateway), want: "may have run"},
		{tool: "array", answer: status(http.StatusGatewayTimeout), want: "may have run"},
		{tool: "plain", answer: status(http.StatusServiceUnavailable), want: "nothing was run"},
		{tool: "notjson", answer: status(http.StatusTooManyRequests), want: "nothing was run"},
		{tool: "otherid", answer: func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
			// A 500 that carries the upstream's JSON-RPC error: that error.
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32042,"message":"the tool's own error"}}`)
		}, want: "the tool's own error", sdkWant: "may have run"}, // the go-sdk reads no body of a 500
	}
	for _, c := range cases {
		f.up.set(c.tool, c.answer)
	}
	for _, path := range []string{"raw", "sdk"} {
		for _, c := range cases {
			rid := path + "-" + c.tool
			var got string
			if path == "raw" {
				got = f.call(t, rid, c.tool, `{}`)
			} else {
				got = f.sdkCall(t, rid, c.tool, `{}`)
			}
			want := c.want
			if path == "sdk" && c.sdkWant != "" {
				want = c.sdkWant
			}
			if (!strings.Contains(got, `"isError":true`) && !strings.Contains(got, `"error":`)) || !strings.Contains(got, want) {
				t.Errorf("%s %s: answer %q, want a failure saying %q", path, c.tool, got, want)
			}
			if n := len(f.up.takeCalls()); n != 1 {
				t.Errorf("%s %s: the upstream got %d tools/call POSTs, want 1", path, c.tool, n)
			}
		}
	}
	if got := f.sdkCall(t, "ok", "echo", `{"still":"works"}`); !strings.Contains(got, `{\"still\":\"works\"}`) {
		t.Errorf("call after the failures: %q", got)
	}
}

// TestH1FallbackMarksAWrittenRequest: a POST that goes through net/http's
// Transport (an https:// upstream, a proxy) and fails after the
// transport read its whole body may have reached the upstream; one that
// failed before (nothing listens) did not.
func TestH1FallbackMarksAWrittenRequest(t *testing.T) {
	verifyNoLeaks(t)
	var got atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Add(1)
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(ts.Close)
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	h1 := &h1Transport{fallback: base} // no lean host: everything goes to the fallback
	resp, err := h1Post(t, t.Context(), h1, ts.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	if err == nil {
		_ = resp.Body.Close()
	}
	if err == nil || !reached(err) {
		t.Errorf("POST cut after the upstream read it: error %v, want it marked as may have reached", err)
	}
	if n := got.Load(); n != 1 {
		t.Errorf("the upstream got %d POSTs, want 1", n)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	resp, err = h1Post(t, t.Context(), h1, "http://"+addr+"/", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	if err == nil {
		_ = resp.Body.Close()
	}
	if err == nil || reached(err) {
		t.Errorf("POST to nothing: error %v, want one not marked as may have reached", err)
	}
}

// answerRaw answers a scripted call on the connection taken from
// net/http, which it then closes (and says so, Connection: close, so
// that the next call is not sent on it before the close arrives): the
// bytes pre writes, then the final answer's status line, the header lines
// extra writes, and the JSON answer msg ($ID replaced) as a body of its
// length.
func answerRaw(t *testing.T, pre, extra func(w io.Writer), msg string) func(http.ResponseWriter, *http.Request, json.RawMessage) {
	t.Helper()
	return func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
		c, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = c.Close() }()
		if pre != nil {
			pre(bw)
		}
		_, _ = io.WriteString(bw, "HTTP/1.1 200 OK\r\n")
		if extra != nil {
			extra(bw)
		}
		body := strings.ReplaceAll(msg, "$ID", string(id))
		_, _ = fmt.Fprintf(bw, "Content-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		_ = bw.Flush()
	}
}

// TestH1AnswerHead: the lean exchange reads an answer's head as net/http's
// Transport does: informational answers (100 Continue, 103 Early Hints)
// before the final one are passed over, and the call's result arrives
// (the call had run; it was failed); a head over 10 MiB fails the call
// as one that may have run instead of being read into memory whatever its
// size. On the raw path and on the SDK path (both POST through the lean
// exchange); the next call works.
func TestH1AnswerHead(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	h1Of(t, f.g)
	const result = `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"after-hints"}]}}`
	f.up.set("vendor", answerRaw(t, func(w io.Writer) {
		_, _ = io.WriteString(w, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
	}, nil, result))
	f.up.set("huge", answerRaw(t, nil, func(w io.Writer) {
		_, _ = io.WriteString(w, "X-Endless: ")
		line := strings.Repeat("a", 64<<10)
		for range 16 << 4 { // 16 MiB of one header line
			if _, err := io.WriteString(w, line); err != nil {
				return // toolgate stopped reading
			}
		}
		_, _ = io.WriteString(w, "\r\n")
	}, result))
	for _, path := range []string{"raw", "sdk"} {
		call := f.call
		if path == "sdk" {
			call = f.sdkCall
		}
		if got := call(t, path+"-hints", "vendor", `{}`); !strings.Contains(got, "after-hints") || strings.Contains(got, `"isError":true`) {
			t.Errorf("%s: answer after 1xx answers %q, want the call's result", path, got)
		}
		if got := call(t, path+"-huge", "huge", `{}`); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "may have run") {
			t.Errorf("%s: answer with a 16 MiB head %q, want a failure saying the call may have run", path, got)
		}
		if got := call(t, path+"-ok", "echo", `{"still":"works"}`); !strings.Contains(got, `{\"still\":\"works\"}`) {
			t.Errorf("%s: the next call: %q", path, got)
		}
	}
	if n := len(f.up.takeCalls()); n != 6 {
		t.Errorf("the upstream got %d tools/call POSTs, want 6", n)
	}
}

// panicLeanGK allows everything, except that the lean front's admission
// panics while armed, as a bug before the answer would.
type panicLeanGK struct {
	allowAllGK
	armed atomic.Bool
}

func (g *panicLeanGK) AdmitUnlessHeld(ctx context.Context, c *gate.Call, adm *gate.Admission) *gate.HandOff {
	if g.armed.Load() {
		panic("attack14: in the lean front's admission")
	}
	return g.allowAllGK.AdmitUnlessHeld(ctx, c, adm)
}

// TestHTTPFrontCountsOutAPanickedRequest: a POST whose serving panics
// (here in the lean front's admission; net/http recovers it and drops the
// connection) is counted out of Options.Load as well: it stayed counted
// in flight for good, so that procs.Follow saw two calls in flight at
// every single one after it and never ran on one P again.
func TestHTTPFrontCountsOutAPanickedRequest(t *testing.T) {
	load := &procs.Load{}
	gk := &panicLeanGK{}
	g := newGateway(t, []ServerConfig{stdioServer("up")}, gk, &Options{Load: load})
	waitUpstream(t, g, "up", nil)
	base := serveHTTP(t, g, nil)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	sid, ver := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, g, sid)
	gk.armed.Store(true)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":"p-1","method":"tools/call","params":{"name":"up__echo","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": ver,
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
		req.Header.Set(k, v)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Fatalf("POST whose admission panicked: %d %q, want the connection dropped", resp.StatusCode, b)
	}
	gk.armed.Store(false)
	// Counted out, not left behind for good (the client's earlier POSTs
	// are counted until their handlers return: waited for).
	waitLoadZero(t, load)
}

// answerBytes answers a scripted call with the bytes raw returns for its
// id, on the connection taken from net/http, which it then closes (with
// a reset when rst is set).
func answerBytes(t *testing.T, rst bool, raw func(id string) string) func(http.ResponseWriter, *http.Request, json.RawMessage) {
	t.Helper()
	return func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
		c, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = io.WriteString(bw, raw(string(id)))
		_ = bw.Flush()
		if tc, ok := c.(*net.TCPConn); ok && rst {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

// TestH1MisbehavingAnswers: an upstream that answers a call at the byte
// level in ways net/http's server never would. Whatever it sends, the
// call reaches it once (never twice), the agent gets the result when the
// answer carries it whole and otherwise a failure saying the call may
// have run (never "nothing was run": the upstream had the call), and the
// next call works. On the raw path and on the SDK path.
func TestH1MisbehavingAnswers(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	h1Of(t, f.g)
	result := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"whole"}]}}`
	}
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	cases := []struct {
		name string
		rst  bool
		raw  func(id string) string
		ok   bool // the answer carries the result whole
	}{
		{"connection close", false, func(id string) string {
			return fmt.Sprintf("%sConnection: close\r\nContent-Length: %d\r\n\r\n%s", head, len(result(id)), result(id))
		}, true},
		{"HTTP/1.0 to the end", false, func(id string) string {
			return "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + result(id)
		}, true},
		{"chunked with trailers", false, func(id string) string {
			r := result(id)
			return fmt.Sprintf("%sConnection: close\r\nTransfer-Encoding: chunked\r\nTrailer: X-Done\r\n\r\n%x\r\n%s\r\n0\r\nX-Done: yes\r\n\r\n", head, len(r), r)
		}, true},
		{"chunked and a length", false, func(id string) string {
			r := result(id)
			return fmt.Sprintf("%sContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", head, len(r), r)
		}, false},
		{"bad chunk size", false, func(id string) string {
			return head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + result(id) + "\r\n0\r\n\r\n"
		}, false},
		{"body shorter than its length", false, func(id string) string {
			return fmt.Sprintf("%sContent-Length: %d\r\n\r\n%s", head, len(result(id))+50, result(id))
		}, false},
		{"body longer than its length", false, func(id string) string {
			return fmt.Sprintf("%sConnection: close\r\nContent-Length: %d\r\n\r\n%s{\"jsonrpc\":\"2.0\",\"id\":99}", head, len(result(id)), result(id))
		}, true},
		{"stream cut in an event", false, func(id string) string {
			return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: message\ndata: " + result(id)[:20]
		}, false},
		{"switching protocols", false, func(string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
		}, false},
		{"not HTTP", false, func(string) string { return "SSH-2.0-OpenSSH_9.6\r\n" }, false},
		{"reset", true, func(string) string { return "" }, false},
	}
	for _, path := range []string{"raw", "sdk"} {
		call := f.call
		if path == "sdk" {
			call = f.sdkCall
		}
		for i, c := range cases {
			f.up.set("vendor", answerBytes(t, c.rst, c.raw))
			got := call(t, fmt.Sprintf("%s-%d", path, i), "vendor", `{}`)
			switch {
			case strings.Contains(got, "nothing was run"):
				t.Errorf("%s %s: answer %q says nothing was run; the upstream had the call", path, c.name, got)
			case c.ok && (!strings.Contains(got, `"text":"whole"`) || strings.Contains(got, `"isError":true`)):
				t.Errorf("%s %s: answer %q, want the result", path, c.name, got)
			case !c.ok && !strings.Contains(got, `"isError":true`) && !strings.Contains(got, `"error"`) && !strings.Contains(got, `"text":"whole"`):
				t.Errorf("%s %s: answer %q, want a failure (or the whole result)", path, c.name, got)
			}
			if n := len(f.up.takeCalls()); n != 1 {
				t.Errorf("%s %s: the upstream got %d tools/call POSTs, want 1", path, c.name, n)
			}
			// The next call works (TestSDKPathBrokenAnswerFailsOnlyItsCall:
			// at once, on the same session, since branch sdkbreak).
			f.untilWorks(t, call, fmt.Sprintf("%s-%d-next", path, i))
		}
	}
}

// untilWorks sends echo calls through call until one is answered (at most
// testWait), and forgets the upstream's record of them.
func (f *rawHTTPFixture) untilWorks(t *testing.T, call func(*testing.T, string, string, string) string, rid string) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for i := 0; ; i++ {
		got := call(t, fmt.Sprintf("%s-%d", rid, i), "echo", `{"n":1}`)
		if strings.Contains(got, `{\"n\":1}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no call works: %q", rid, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.up.takeCalls()
}

// panickingPolicy is a real compiled policy that allows everything and
// whose evaluation panics while armed, as a bug in the evaluator would.
type panickingPolicy struct {
	*policy.Holder
	armed atomic.Bool
}

func (p *panickingPolicy) Evaluate(c policy.Call) (policy.Decision, error) {
	if p.armed.Load() {
		panic("attack14: in the policy evaluation")
	}
	return p.Holder.Evaluate(c)
}

// TestPolicyPanicDeniesOnBothPaths: a policy evaluation that panics
// denies the call on the SDK path (where the panic, before the admission,
// ended the process: the go-sdk's handler goroutines have no recover) and
// on the lean front, and the session goes on.
func TestPolicyPanicDeniesOnBothPaths(t *testing.T) {
	pol := &panickingPolicy{Holder: policy.NewHolder(&policy.Policy{Default: policy.Allow})}
	up, url := newScriptedUpstream(t, true)
	f := &rawHTTPFixture{up: up, trail: &leanTrail{}}
	f.g = newGateway(t, []ServerConfig{{Name: "up", URL: url}}, gate.New(nil, pol, nil), nil)
	f.base = serveHTTP(t, f.g, nil)
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	f.sid, f.ver = cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, f.sid)
	pol.armed.Store(true)
	for _, path := range []string{"raw", "sdk"} {
		call := f.call
		if path == "sdk" {
			call = f.sdkCall
		}
		if got := call(t, path+"-p", "echo", `{"n":1}`); !strings.Contains(got, "policy evaluation failed") || strings.Contains(got, `{\"n\":1}`) {
			t.Errorf("%s: answer %q, want a denial", path, got)
		}
	}
	pol.armed.Store(false)
	if n := len(f.up.takeCalls()); n != 0 {
		t.Errorf("the upstream got %d calls, want none", n)
	}
	f.untilWorks(t, f.sdkCall, "after")
}
