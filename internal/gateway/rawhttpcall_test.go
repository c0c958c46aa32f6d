package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scriptedUpstream serves a go-sdk MCP server over Streamable HTTP (JSON
// or event-stream answers) and answers the tools/call POSTs of the tools
// in script itself, so a test can send what no go-sdk server would: an
// unknown result field, a malformed or oversized answer, a 404, a
// connection that dies. Every other request reaches the real server.
type scriptedUpstream struct {
	next   http.Handler
	script map[string]func(w http.ResponseWriter, r *http.Request, id json.RawMessage)

	mu    sync.Mutex
	calls []scriptedCall // the tools/call POSTs, in order
	other chan scriptedPost
}

// A scriptedCall is one tools/call POST the upstream got.
type scriptedCall struct {
	tool   string
	id     string
	header http.Header
}

// A scriptedPost is a POST that carried no request: a response or a
// notification of the client.
type scriptedPost struct {
	body   string
	header http.Header
}

// scriptedTools are the tools a scriptedUpstream lists besides the test
// tools (addUpstreamTools), for tests to script.
var scriptedTools = []string{"vendor", "fails", "array", "notjson", "otherid", "huge", "plain", "dies", "hang", "asks"}

func newScriptedUpstream(t *testing.T, jsonAnswers bool) (*scriptedUpstream, string) {
	t.Helper()
	return scriptedUpstreamOf(t, newUpstreamServer(nil), jsonAnswers, scriptedTools...)
}

// newScriptedFeatureUpstream is a scriptedUpstream (JSON answers) of a
// feature server (newFeatureServer) with a tool "hang" to script.
func newScriptedFeatureUpstream(t *testing.T) (*scriptedUpstream, string) {
	t.Helper()
	return scriptedUpstreamOf(t, newFeatureServer("f", nil), true, "hang")
}

// scriptedUpstreamOf serves srv, with the tools named added (answering
// "unscripted"), as a scriptedUpstream.
func scriptedUpstreamOf(t *testing.T, srv *mcp.Server, jsonAnswers bool, tools ...string) (*scriptedUpstream, string) {
	t.Helper()
	for _, name := range tools {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "unscripted"}}}, nil
		})
	}
	s := &scriptedUpstream{
		next:   mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: jsonAnswers}),
		script: map[string]func(http.ResponseWriter, *http.Request, json.RawMessage){},
		other:  make(chan scriptedPost, 16),
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func (s *scriptedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		switch {
		case m.Method == "tools/call":
			s.mu.Lock()
			s.calls = append(s.calls, scriptedCall{tool: m.Params.Name, id: string(m.ID), header: r.Header.Clone()})
			f := s.script[m.Params.Name]
			s.mu.Unlock()
			if f != nil {
				f(w, r, m.ID)
				return
			}
		case s.scripted(m.Method) != nil:
			// Scripted by method (sdkbreak2's and attack18's tests): a
			// tool's name has no "/".
			s.scripted(m.Method)(w, r, m.ID)
			return
		case m.Method == "notifications/cancelled" || (m.Method == "" && bytes.Contains(body, []byte(`"scripted-`))):
			s.other <- scriptedPost{body: string(body), header: r.Header.Clone()}
			if m.Method == "" {
				w.WriteHeader(http.StatusAccepted)
				return
			}
		}
	}
	s.next.ServeHTTP(w, r)
}

// scripted is the script of method, or nil.
func (s *scriptedUpstream) scripted(method string) func(http.ResponseWriter, *http.Request, json.RawMessage) {
	if method == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.script[method]
}

func (s *scriptedUpstream) set(tool string, f func(w http.ResponseWriter, r *http.Request, id json.RawMessage)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script[tool] = f
}

func (s *scriptedUpstream) takeCalls() []scriptedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

// answerJSON answers with the JSON-RPC message msg ($ID replaced by id).
func answerJSON(msg string) func(http.ResponseWriter, *http.Request, json.RawMessage) {
	return func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, strings.ReplaceAll(msg, "$ID", string(id)))
	}
}

// answerSSE answers with an event stream of the messages msgs ($ID
// replaced by id), one event each.
func answerSSE(msgs ...string) func(http.ResponseWriter, *http.Request, json.RawMessage) {
	return func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, m := range msgs {
			_, _ = io.WriteString(w, "event: message\ndata: "+strings.ReplaceAll(m, "$ID", string(id))+"\n\n")
		}
	}
}

// rawHTTPFixture is a gateway with the HTTP upstream "up" (a scripted
// go-sdk server; nil from rawHTTPFixtureOf) and an agent session on its
// lean front.
type rawHTTPFixture struct {
	up       *scriptedUpstream
	g        *Gateway
	base     string
	trail    *leanTrail
	sid, ver string
}

func newRawHTTPFixture(t *testing.T, jsonAnswers bool, sc ServerConfig, opts *Options) *rawHTTPFixture {
	t.Helper()
	up, url := newScriptedUpstream(t, jsonAnswers)
	sc.URL = url
	f := rawHTTPFixtureOf(t, sc, opts)
	f.up = up
	return f
}

// rawHTTPFixtureOf is a rawHTTPFixture in front of the HTTP upstream sc
// (named "up"); its up is nil.
func rawHTTPFixtureOf(t *testing.T, sc ServerConfig, opts *Options) *rawHTTPFixture {
	t.Helper()
	sc.Name = "up"
	f := &rawHTTPFixture{trail: &leanTrail{}}
	f.g = newGateway(t, []ServerConfig{sc}, allowAll(), opts)
	f.g.leanHook = f.trail.hook
	f.base = serveHTTP(t, f.g, nil)
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	f.sid, f.ver = cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, f.sid)
	f.trail.take()
	return f
}

// call POSTs tools/call up__<tool> with args under the id rid on the
// agent session and returns the lean front's answer.
func (f *rawHTTPFixture) call(t *testing.T, rid, tool, args string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"` + rid + `","method":"tools/call","params":{"name":"up__` + tool + `","arguments":` + args + `}}`
	resp, b := sessionExchange(t, http.MethodPost, f.base, aliceToken, f.sid, f.ver, strings.NewReader(body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", rid, resp.StatusCode, b)
	}
	return string(b)
}

// rawHTTPCalls is how many raw HTTP calls the upstream "up" of g sent.
func rawHTTPCalls(g *Gateway) uint64 { return g.ups["up"].rawHTTPSeq.Load() }

// TestRawHTTPCallPassesResultBytesThrough: a lean call to an HTTP upstream
// goes out as one raw POST (id "tg-h<n>", the session's id and protocol
// version, the configured headers) and its result bytes come back as the
// upstream sent them (an unknown field, 2^63-1, 1e400), whether the
// upstream answers with JSON or an event stream; the upstream's own
// server-info _meta entry is dropped.
func TestRawHTTPCallPassesResultBytesThrough(t *testing.T) {
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			f := newRawHTTPFixture(t, mode == "json", ServerConfig{Headers: map[string]string{"X-Upstream-Key": "k-1"}}, nil)
			vendor := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"v"}],"x-vendor":{"n":1e400,"max":9223372036854775807}}}`
			if mode == "json" {
				f.up.set("vendor", answerJSON(vendor))
			} else {
				f.up.set("vendor", answerSSE(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, vendor))
			}
			before := rawHTTPCalls(f.g)
			got := f.call(t, "v-1", "vendor", `{}`)
			// The result alone: answered as application/json (leanjson_test.go).
			want := `{"jsonrpc":"2.0","id":"v-1","result":{"content":[{"type":"text","text":"v"}],"x-vendor":{"n":1e400,"max":9223372036854775807}}}`
			if got != want {
				t.Errorf("answer\n got %q\nwant %q", got, want)
			}
			got = f.call(t, "n-1", "numbers", `{"huge":true}`)
			if !strings.Contains(got, numbersHuge) || !strings.Contains(got, `"big":`+numbersMeta) || strings.Contains(got, "test-upstream") {
				t.Errorf("numbers answer %q: want %s and _meta.big %s intact, no server info", got, numbersHuge, numbersMeta)
			}
			if n := rawHTTPCalls(f.g) - before; n != 2 {
				t.Errorf("%d raw HTTP calls, want 2", n)
			}
			if tr := f.trail.take(); len(tr) != 2 || !tr[0] || !tr[1] {
				t.Errorf("lean trail %v, want both served lean", tr)
			}
			c, err := f.g.ups["up"].session()
			if err != nil {
				t.Fatal(err)
			}
			calls := f.up.takeCalls()
			if len(calls) != 2 {
				t.Fatalf("upstream got %d tools/call POSTs, want 2", len(calls))
			}
			for _, call := range calls {
				h := call.header
				if !strings.HasPrefix(call.id, `"tg-h`) || h.Get("Mcp-Session-Id") != c.cs.ID() || c.cs.ID() == "" ||
					h.Get("Mcp-Protocol-Version") != upstreamProtocolVersion || h.Get("Accept") != "application/json, text/event-stream" ||
					h.Get("Content-Type") != "application/json" || h.Get("X-Upstream-Key") != "k-1" {
					t.Errorf("tools/call %s: id %s, headers %v (session %q)", call.tool, call.id, h, c.cs.ID())
				}
			}
		})
	}
}

// TestRawHTTPCallFailures: what an agent gets from a raw HTTP call when
// the upstream answers with a JSON-RPC error (the upstream's error, data
// intact), a malformed answer, an answer to another id, an answer over
// limits.max_result_bytes, an unknown content type, or a connection that
// dies mid-answer; each fails only that call, and the next call works.
func TestRawHTTPCallFailures(t *testing.T) {
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			logs := &logBuffer{}
			f := newRawHTTPFixture(t, mode == "json", ServerConfig{}, &Options{MaxResultBytes: 1 << 12, Logger: logs.logger()})
			answer := answerSSE
			if mode == "json" {
				answer = func(msgs ...string) func(http.ResponseWriter, *http.Request, json.RawMessage) {
					return answerJSON(msgs[0])
				}
			}
			f.up.set("fails", answer(`{"jsonrpc":"2.0","id":$ID,"error":{"code":-32042,"message":"nope","data":{"n":1e400}}}`))
			f.up.set("array", answer(`{"jsonrpc":"2.0","id":$ID,"result":[1]}`))
			f.up.set("notjson", answer(`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"http-result-data"`))
			f.up.set("otherid", answer(`{"jsonrpc":"2.0","id":"someone-else","result":{"content":[]}}`))
			f.up.set("huge", answer(`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"`+bigText(1<<13)+`"}]}}`))
			f.up.set("plain", func(w http.ResponseWriter, _ *http.Request, _ json.RawMessage) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, "hello")
			})
			f.up.set("dies", func(w http.ResponseWriter, _ *http.Request, _ json.RawMessage) {
				w.Header().Set("Content-Type", "text/event-stream")
				if mode == "json" {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Length", "100")
				}
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, `{"jsonrpc":`)
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // the connection is cut
			})
			for _, c := range []struct{ tool, want string }{
				{"fails", `"error":{"code":-32042,"message":"nope","data":{"n":1e400}}`},
				{"array", `the upstream sent a malformed response (the result is not an object)`},
				{"notjson", `the upstream sent a malformed response`},
				{"otherid", `the upstream sent a malformed response`},
				{"huge", `exceeds limits.max_result_bytes`},
				{"plain", `the upstream sent a malformed response (HTTP 200 that is neither JSON nor an event stream); the call may have run`},
				{"dies", `is unavailable: the connection failed during the call; the call may have run`},
			} {
				if mode == "sse" && c.tool == "otherid" {
					// Another id on a stream is someone else's answer: the
					// stream then ends without the call's.
					c.want = "is unavailable"
				}
				got := f.call(t, "f-"+c.tool, c.tool, `{}`)
				if !strings.Contains(got, c.want) {
					t.Errorf("%s: answer %q, want %q in it", c.tool, got, c.want)
				}
			}
			if got := f.call(t, "ok", "echo", `{"still":"works"}`); !strings.Contains(got, `{\"still\":\"works\"}`) {
				t.Errorf("call after the failures: %q", got)
			}
			if n := rawHTTPCalls(f.g); n < 7 {
				t.Errorf("%d raw HTTP calls, want every call raw", n)
			}
			// A malformed answer is the call's result data: logged by
			// size, not by content.
			if l := logs.String(); !strings.Contains(l, "the call fails") || strings.Contains(l, "http-result-data") {
				t.Errorf("want the malformed answer logged without its bytes:\n%s", l)
			}
		})
	}
}

// TestRawHTTPCallSessionMissingFallsBack: an upstream that answers 404 to
// the session id never ran the call: the raw path hands it to
// upstream.call, which sends it again (and re-initialises the session when
// the SDK sees the 404 too); the agent gets the result.
func TestRawHTTPCallSessionMissingFallsBack(t *testing.T) {
	f := newRawHTTPFixture(t, false, ServerConfig{}, nil)
	var once sync.Once
	f.up.set("echo", func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		missing := false
		once.Do(func() { missing = true })
		if missing {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		f.up.next.ServeHTTP(w, r)
	})
	got := f.call(t, "e-1", "echo", `{"a":1}`)
	if !strings.Contains(got, `{\"a\":1}`) || strings.Contains(got, `"isError":true`) {
		t.Fatalf("answer %q, want the echo", got)
	}
	calls := f.up.takeCalls()
	if len(calls) != 2 || !strings.HasPrefix(calls[0].id, `"tg-h`) || strings.HasPrefix(calls[1].id, `"tg-`) {
		t.Errorf("tools/call POSTs %+v, want the raw one (404) and the SDK's", calls)
	}
}

// TestRawHTTPCallCancelled: a raw HTTP call whose call_timeout passes is
// cancelled upstream with notifications/cancelled naming its id, on the
// upstream session, and the agent gets the timeout error.
func TestRawHTTPCallCancelled(t *testing.T) {
	f := newRawHTTPFixture(t, false, ServerConfig{CallTimeout: 50 * time.Millisecond}, nil)
	release := make(chan struct{})
	defer close(release)
	f.up.set("hang", func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	got := f.call(t, "h-1", "hang", `{}`)
	if !strings.Contains(got, "no result within call_timeout") {
		t.Errorf("answer %q, want the call_timeout error", got)
	}
	calls := f.up.takeCalls()
	if len(calls) != 1 {
		t.Fatalf("%d tools/call POSTs, want 1", len(calls))
	}
	select {
	case p := <-f.up.other:
		if !strings.Contains(p.body, `"requestId":`+calls[0].id) || p.header.Get("Mcp-Session-Id") != calls[0].header.Get("Mcp-Session-Id") {
			t.Errorf("cancel notification %s (session %q), want requestId %s on session %q", p.body, p.header.Get("Mcp-Session-Id"), calls[0].id, calls[0].header.Get("Mcp-Session-Id"))
		}
	case <-time.After(testWait):
		t.Fatal("no notifications/cancelled reached the upstream")
	}
}

// TestRawHTTPCallRoutesLogsAndRequests: on a raw HTTP call's event stream,
// a log message reaches the agent that made the call before its result,
// and a server→client request (roots/list) is put to that agent and its
// answer POSTed back to the upstream on the session, as on the SDK path.
func TestRawHTTPCallRoutesLogsAndRequests(t *testing.T) {
	f := newRawHTTPFixture(t, false, ServerConfig{}, nil)
	rec := &agentRecord{}
	opts, setup := capableClient("alice", rec, false)
	cs := connectAgent(t, f.base, aliceToken, opts, setup)
	waitInitialized(t, f.g, cs.ID())
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	f.up.set("asks", func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello from up"}}`+"\n\n")
		_, _ = io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","id":"scripted-1","method":"roots/list"}`+"\n\n")
		w.(http.Flusher).Flush()
		var roots string
		select {
		case p := <-f.up.other:
			roots = p.body
		case <-r.Context().Done():
			return
		}
		res, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": roots}}})
		_, _ = io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","id":`+string(id)+`,"result":`+string(res)+"}\n\n")
	})
	before := rawHTTPCalls(f.g)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__asks", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if got := textOf(t, res); !strings.Contains(got, `"id":"scripted-1"`) || !strings.Contains(got, "file:///alice") {
		t.Errorf("the upstream got %s as the answer to roots/list, want alice's roots", got)
	}
	// The agent's client hands notifications to its handlers on a queue
	// of its own: wait for the log message there.
	if logs := rec.waitLen(&rec.logs, 1); len(logs) != 1 || logs[0] != "hello from up" {
		t.Errorf("agent logs %q, want the upstream's message", logs)
	}
	if n := rawHTTPCalls(f.g) - before; n != 1 {
		t.Errorf("%d raw HTTP calls, want 1", n)
	}
}

// TestRawHTTPBodyID: the raw HTTP request carries the "tg-h" id, the
// arguments compacted, and nothing else.
func TestRawHTTPBodyID(t *testing.T) {
	mk, err := rawRequest(rawHTTPIDPrefix, "t", json.RawMessage("{\n\"a\": 1}"), "")
	if err != nil {
		t.Fatal(err)
	}
	got := string(mk.line(7))
	want := `{"jsonrpc":"2.0","id":"tg-h7","method":"tools/call","params":{"name":"t","arguments":{"a":1}}}` + "\n"
	if got != want {
		t.Errorf("body %q, want %q", got, want)
	}
	if _, ok := parseRawID(json.RawMessage(`"tg-h7"`)); ok {
		t.Error(`a stdio session would take "tg-h7" for one of its raw calls`)
	}
	if _, err := rawRequest(rawHTTPIDPrefix, "t", json.RawMessage(`[1]`), ""); err == nil {
		t.Error("array arguments accepted")
	}
}

// TestRawHTTPCallLeaksNothing: raw HTTP calls that succeed, time out
// (cancelled upstream), die mid-answer or are too large leave no
// goroutine behind once the gateway, its listeners and the upstream are
// closed (every response body is closed; nothing is left reading).
//
// The calls that must answer run on a gateway without call_timeout; only
// the call that hangs runs on one with a short call_timeout (it never
// answers, so the timeout is the event it waits for). A 50 ms timeout
// for all of them failed the quick calls under load.
func TestRawHTTPCallLeaksNothing(t *testing.T) {
	// Runs last: after the gateways, their listeners and the upstreams
	// were closed by the cleanups registered below.
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, false, ServerConfig{}, &Options{MaxResultBytes: 1 << 12})
	f.up.set("dies", func(w http.ResponseWriter, _ *http.Request, _ json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})
	for _, c := range []struct{ tool, args, want string }{
		{"echo", `{"k":1}`, `{\"k\":1}`},
		{"dies", `{}`, "may have run"},
		{"big", `{"n":8192}`, "exceeds limits.max_result_bytes"},
	} {
		if got := f.call(t, "l-"+c.tool, c.tool, c.args); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q in it", c.tool, got, c.want)
		}
	}
	if n := rawHTTPCalls(f.g); n != 3 {
		t.Errorf("%d raw HTTP calls, want 3", n)
	}

	h := newRawHTTPFixture(t, false, ServerConfig{CallTimeout: 50 * time.Millisecond}, nil)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h.up.set("hang", func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	if got := h.call(t, "l-hang", "hang", `{}`); !strings.Contains(got, "call_timeout") {
		t.Errorf("hang: %q, want call_timeout in it", got)
	}
	<-h.up.other // the hang's notifications/cancelled
	if n := rawHTTPCalls(h.g); n != 1 {
		t.Errorf("%d raw HTTP calls, want 1", n)
	}
}

// dialCountedFixture is a rawHTTPFixture in front of a go-sdk HTTP
// upstream (newUpstreamServer) answering in JSON or with event streams,
// and the count of the connections that upstream accepted.
func dialCountedFixture(t *testing.T, jsonAnswers bool) (*rawHTTPFixture, *atomic.Int64) {
	t.Helper()
	dials := new(atomic.Int64)
	s := newUpstreamServer(nil)
	ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: jsonAnswers}))
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dials.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return rawHTTPFixtureOf(t, ServerConfig{URL: ts.URL}, nil), dials
}

// TestRawHTTPCallReusesConnections: after a raw call's answer the rest of
// its event stream is read (drain), so the connection goes back to the
// pool: sequential calls do not open a connection each. (Closing the body
// right after the answer, before the stream's end arrived, opened a new
// connection for 7 of 50 calls.)
func TestRawHTTPCallReusesConnections(t *testing.T) {
	f, dials := dialCountedFixture(t, false)
	f.call(t, "first", "echo", `{}`)
	u := f.g.ups["up"]
	u.drains.Wait()
	before := dials.Load()
	const calls = 50
	for i := range calls {
		if got := f.call(t, fmt.Sprint("c-", i), "echo", `{"i":1}`); !strings.Contains(got, `{\"i\":1}`) {
			t.Fatalf("call %d: %q", i, got)
		}
		u.drains.Wait()
	}
	if n := dials.Load() - before; n > 2 {
		t.Errorf("%d new upstream connections for %d sequential calls, want the pooled one reused", n, calls)
	}
	if n := rawHTTPCalls(f.g); n != calls+1 {
		t.Errorf("%d raw HTTP calls, want %d", n, calls+1)
	}
}

// TestRawHTTPJSONAnswerNeedsNoDrain: a JSON answer is read to its end, so
// its body is closed at once (the connection is pooled) without a
// goroutine reading the rest in the background, which each call started
// before (issue 13).
func TestRawHTTPJSONAnswerNeedsNoDrain(t *testing.T) {
	f, dials := dialCountedFixture(t, true)
	u := f.g.ups["up"]
	f.call(t, "first", "echo", `{}`)
	u.drains.Wait()
	before, started := dials.Load(), u.drainsStarted.Load()
	const calls = 20
	for i := range calls {
		if got := f.call(t, fmt.Sprint("c-", i), "echo", `{"i":1}`); !strings.Contains(got, `{\"i\":1}`) {
			t.Fatalf("call %d: %q", i, got)
		}
	}
	if n := u.drainsStarted.Load() - started; n != 0 {
		t.Errorf("%d background drains for %d JSON answers, want none", n, calls)
	}
	if n := dials.Load() - before; n > 1 {
		t.Errorf("%d new upstream connections for %d sequential calls, want the pooled one reused", n, calls)
	}
	if n := rawHTTPCalls(f.g); n != calls+1 {
		t.Errorf("%d raw HTTP calls, want %d", n, calls+1)
	}
}

// TestRawHTTPCallPerAgentSession: with servers.<name>.sessions: per_agent
// an HTTP upstream's raw call goes out on the agent session's own upstream
// session (its Mcp-Session-Id, not the shared session's).
func TestRawHTTPCallPerAgentSession(t *testing.T) {
	f := newRawHTTPFixture(t, false, ServerConfig{Sessions: SessionsPerAgent}, nil)
	if got := f.call(t, "p-1", "echo", `{"p":1}`); !strings.Contains(got, `{\"p\":1}`) {
		t.Fatalf("answer %q", got)
	}
	shared, err := f.g.ups["up"].session()
	if err != nil {
		t.Fatal(err)
	}
	calls := f.up.takeCalls()
	if len(calls) != 1 || !strings.HasPrefix(calls[0].id, `"tg-h`) {
		t.Fatalf("tools/call POSTs %+v, want one raw call", calls)
	}
	if sid := calls[0].header.Get("Mcp-Session-Id"); sid == "" || sid == shared.cs.ID() {
		t.Errorf("raw call on session %q, want the agent's own (the shared one is %q)", sid, shared.cs.ID())
	}
}
