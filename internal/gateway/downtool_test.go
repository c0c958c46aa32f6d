package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// decidedLog is a gate.Recorder keeping what it is told.
type decidedLog struct {
	mu sync.Mutex
	ds []gate.Decided
}

func (l *decidedLog) Decided(_ context.Context, d gate.Decided) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ds = append(l.ds, d)
}

// of returns the records of server's calls.
func (l *decidedLog) of(server string) []gate.Decided {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []gate.Decided
	for _, d := range l.ds {
		if d.Server == server {
			out = append(out, d)
		}
	}
	return out
}

// closedPortURL is the URL of an MCP endpoint on a local port nothing
// listens on (with a query that must never be shown).
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr + "/mcp?key=s3cret" //nolint:gosec // G101: a made-up credential, to see it removed
}

// downFixture is a gateway behind a real gate (SQLite, a policy denying
// every tool of "hidden", Tasks and session views) with upstreams "up" (a
// live HTTP server), "gone" (a stdio command that does not exist), "web"
// (an HTTP URL whose port is closed) and "hidden" (a missing command, all
// of whose tools the policy denies).
type downFixture struct {
	gt     *gate.Gate
	g      *Gateway
	base   string
	rec    *decidedLog
	narrow string // token of a session narrowed to up__echo
}

// narrowSession creates on gt a session of "host" narrowed to tools and
// returns its token and an auth function that knows it besides testAuth's
// tokens.
func narrowSession(t *testing.T, gt *gate.Gate, tools ...string) (string, func(string) (approval.Principal, bool)) {
	t.Helper()
	s, tok, err := gt.CreateSession(t.Context(), approval.Principal{ID: "host", Kind: "human"}, session.NewSession{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	narrowed := approval.Principal{ID: s.Principal, Kind: "agent", SessionID: string(s.ID)}
	return tok, func(token string) (approval.Principal, bool) {
		if token == tok {
			return narrowed, true
		}
		return testAuth(token)
	}
}

func newDownFixture(t *testing.T) *downFixture {
	t.Helper()
	key, err := seal.NewKey(bytes.Repeat([]byte{9}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	rec := &decidedLog{}
	pol := policy.NewHolder(&policy.Policy{Default: policy.Allow, Rules: []policy.Rule{{Name: "no hidden", Server: "hidden", Effect: policy.Deny}}})
	gt := gate.New(sqlitetest.Open(t), pol, &gate.Options{Key: key, Recorder: rec})
	f := &downFixture{gt: gt, rec: rec}
	tok, auth := narrowSession(t, gt, "up__echo")
	f.narrow = tok
	f.g = newGateway(t, []ServerConfig{
		{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))},
		{Name: "gone", Command: "/nonexistent/toolgate-test-server", Optional: true},
		{Name: "web", URL: closedPortURL(t), Optional: true},
		{Name: "hidden", Command: "/nonexistent/toolgate-hidden-server", Optional: true},
	}, gt, &Options{Sessions: gt, Tasks: gt, HealthInterval: time.Hour, RestartMin: time.Hour})
	h, err := f.g.Handler(auth, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	f.base = ts.URL
	for _, name := range []string{"gone", "web", "hidden"} {
		waitState(t, f.g, name, StateReconnecting)
	}
	return f
}

// wantUnknown checks that a go-sdk call's answer is the JSON-RPC error
// "unknown tool: name".
func wantUnknown(t *testing.T, name string, res *mcp.CallToolResult, err error) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || we.Message != "unknown tool: "+name+unknownToolHint {
		t.Errorf("%s: %+v %v, want the JSON-RPC error unknown tool", name, res, err)
	}
}

// wantUnavailable checks that text is the unavailable answer for server.
func wantUnavailable(t *testing.T, server, text string) {
	t.Helper()
	for _, want := range []string{`upstream "` + server + `" is unavailable: reconnecting since `, "the call was not sent and nothing was run",
		"toolgate tries to connect again at least every 1h0m0s"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s: answer %q does not say %q", server, text, want)
		}
	}
	if strings.Contains(text, "s3cret") {
		t.Errorf("%s: answer %q shows the URL's query", server, text)
	}
}

// TestDownUpstreamToolIsUnavailable: a go-sdk agent (2025-11-25 session)
// calling a tool of a stdio upstream whose command does not exist, and of
// an HTTP upstream whose port is closed, is told that upstream is
// unavailable (an isError result; nothing sent), and the refusal is in the
// audit trail. A name that is truly unknown on an up server, a tool of a
// down server the policy hides, and a down server's tool called from a
// session narrowed without it are "unknown tool", and not recorded.
func TestDownUpstreamToolIsUnavailable(t *testing.T) {
	f := newDownFixture(t)
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"n": 1}}); err != nil || res.IsError {
		t.Fatalf("up__echo: %+v %v", res, err)
	}
	for _, c := range []struct{ server, name string }{
		{"gone", "gone__read_text_file"},
		{"web", "web__fetch"},
		{"web", "web__a__b"}, // a tool name with the separator in it
	} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.name, Arguments: map[string]any{"path": "/etc/passwd"}})
		if err != nil || !res.IsError {
			t.Errorf("%s: %+v %v, want an isError result", c.name, res, err)
			continue
		}
		wantUnavailable(t, c.server, textOf(t, res))
	}
	for _, name := range []string{"up__nosuch", "hidden__read_text_file", "nosuch__x", "gone__", "gone"} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name})
		wantUnknown(t, name, res, err)
	}
	narrow := connectHTTP(t, f.base, f.narrow, nil, nil)
	res, err := narrow.CallTool(t.Context(), &mcp.CallToolParams{Name: "gone__read_text_file"})
	wantUnknown(t, "gone__read_text_file", res, err)

	gone, web := f.rec.of("gone"), f.rec.of("web")
	if len(gone) != 1 || len(web) != 2 {
		t.Fatalf("audit records: gone %+v, web %+v; want 1 and 2", gone, web)
	}
	d := gone[0]
	if d.Allowed || d.Rule != "" || d.Tool != "read_text_file" || d.Principal.ID != "alice" || string(d.Arguments) != `{"path":"/etc/passwd"}` ||
		!strings.Contains(d.Reason, `upstream "gone" is unavailable`) {
		t.Errorf("gone's audit record = %+v", d)
	}
	if web[1].Tool != "a__b" {
		t.Errorf("web's second record names tool %q, want a__b", web[1].Tool)
	}
	if h := f.rec.of("hidden"); len(h) != 0 {
		t.Errorf("hidden's calls were recorded: %+v", h)
	}
	for _, d := range f.rec.of("up") {
		if d.Tool == "nosuch" {
			t.Errorf("up__nosuch was recorded: %+v", d)
		}
	}
}

// TestDownUpstreamToolIsUnavailable2026: the same for 2026-07-28 agents,
// plain (the lean front hands the unknown name to the SDK path) and with
// the Tasks extension (tasks.go): a complete isError result, not a task;
// a hidden server's tool stays an invalid-params error.
func TestDownUpstreamToolIsUnavailable2026(t *testing.T) {
	f := newDownFixture(t)
	tasks := func(body string) string {
		return strings.Replace(body, `clientCapabilities":{}`, `clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, 1)
	}
	for i, c := range []struct {
		server, name string
		task         bool
	}{
		{"gone", "gone__read_text_file", false},
		{"web", "web__fetch", false},
		{"gone", "gone__read_text_file", true},
		{"web", "web__fetch", true},
	} {
		body := modernCallBody(string(rune('1'+i)), c.name, `{"path":"/etc/passwd"}`, "")
		if c.task {
			body = tasks(body)
		}
		st, _, b := modernPost(t, f.base, c.name, body, nil)
		var msg struct {
			Result *struct {
				ResultType string `json:"resultType"`
				IsError    bool   `json:"isError"`
				Content    []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if st != http.StatusOK || json.Unmarshal(firstMessage(b), &msg) != nil || msg.Result == nil ||
			msg.Result.ResultType != "complete" || !msg.Result.IsError || len(msg.Result.Content) != 1 {
			t.Errorf("%s (task %v): %d %s, want a complete isError result", c.name, c.task, st, b)
			continue
		}
		wantUnavailable(t, c.server, msg.Result.Content[0].Text)
	}
	for _, task := range []bool{false, true} {
		body := modernCallBody("9", "hidden__x", `{}`, "")
		if task {
			body = tasks(body)
		}
		st, _, b := modernPost(t, f.base, "hidden__x", body, nil)
		// 400: a 2026-07-28 invalid-params error's status (SEP-2243).
		if st != http.StatusBadRequest || !bytes.Contains(b, []byte(`"code":-32602,"message":"unknown tool: hidden__x`+unknownToolHint+`"`)) {
			t.Errorf("hidden__x (task %v): %d %s, want unknown tool", task, st, b)
		}
	}
	if n, m := len(f.rec.of("gone")), len(f.rec.of("web")); n != 2 || m != 2 {
		t.Errorf("audit records: gone %d, web %d; want 2 each", n, m)
	}
}

// firstMessage is the JSON of an answer body: itself, or the data of its
// first SSE event.
func firstMessage(b []byte) []byte {
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			return bytes.TrimSpace(rest)
		}
	}
	return b
}

// TestUnavailableHidesTheURLQuery: a listed tool of an HTTP upstream whose
// configured URL carries a credential in its query, called once the
// upstream is gone, is answered "is unavailable" without the query (the
// connect error quotes the URL; it was passed to the agent as it was).
func TestUnavailableHidesTheURLQuery(t *testing.T) {
	up := startRestartable(t, newUpstreamServer(nil))
	g := newGateway(t, []ServerConfig{{Name: "pay", URL: up.url() + "?key=s3cret"}}, allowAll(), //nolint:gosec // G101: a made-up credential, to see it removed
		&Options{HealthInterval: 50 * time.Millisecond})
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	waitState(t, g, "pay", StateConnected)
	up.stop()
	waitState(t, g, "pay", StateReconnecting)
	// The session's error is a connect attempt's once one has failed.
	for u := g.ups["pay"]; ; {
		u.mu.Lock()
		msg, changed := u.downErr.Error(), u.changed
		u.mu.Unlock()
		if strings.Contains(msg, "s3cret") {
			break
		}
		select {
		case <-changed:
		case <-time.After(testWait):
			t.Fatalf("no connect attempt failed: %s", msg)
		}
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "pay__echo", Arguments: map[string]any{"n": 1}})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), `upstream "pay" is unavailable`) {
		t.Fatalf("call with pay down: %+v %v", res, err)
	}
	if text := textOf(t, res); strings.Contains(text, "s3cret") || !strings.Contains(text, up.url()) {
		t.Errorf("answer %q: want the URL without its query", text)
	}
}
