package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestStdioExitFailsCallsAndRestarts(t *testing.T) {
	// Case C08 "die": every call in flight fails when the child exits, and
	// the child is restarted. The agent gets isError results that name the
	// upstream and say it is unavailable (issue 9, item 8).
	// A long grace, so the exit status is known even on a loaded machine.
	shared := stdioServer("up")
	shared.Sessions = SessionsShared // the shared session is restarted; per-agent ones are reopened on use
	g := newGateway(t, []ServerConfig{shared}, allowAll(), &Options{RestartMin: 10 * time.Millisecond, TerminateGrace: 10 * time.Second})
	ev := newClientEvents()
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, ev, nil)
	first := waitUpstream(t, g, "up", nil)

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	sleeping := make(chan answer, 1)
	params := &mcp.CallToolParams{Name: "up__sleep"}
	params.SetProgressToken("s")
	go func() {
		res, err := cs.CallTool(t.Context(), params)
		sleeping <- answer{res, err}
	}()
	receive(t, ev.progress, 1) // the sleep call runs upstream

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__die"})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), `upstream "up" is unavailable`) || !strings.Contains(textOf(t, res), "exit status 3") {
		t.Errorf("die: %v %+v, want an isError result naming the upstream, unavailable and exit status 3", err, res)
	}
	if a := <-sleeping; a.err != nil || !a.res.IsError || !strings.Contains(textOf(t, a.res), `upstream "up" is unavailable`) {
		t.Errorf("call in flight: %v %+v, want an isError result naming the upstream as unavailable", a.err, a.res)
	}

	second := waitUpstream(t, g, "up", first)
	if second.proc == first.proc {
		t.Fatal("not restarted")
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"after": "restart"}})
	if err != nil || textOf(t, res) != `{"after":"restart"}` {
		t.Fatalf("call after restart: %v", err)
	}
	if err := g.Ready(); err != nil {
		t.Errorf("Ready after restart: %v", err)
	}
}

func TestStdioStderrDrained(t *testing.T) {
	// Case C08 "noisy": 256 KiB on stderr (four pipe buffers) do not wedge
	// the child; the lines reach the log.
	var logs logBuffer
	g := newGateway(t, []ServerConfig{stdioServer("up")}, allowAll(), &Options{Logger: logs.logger()})
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__noisy"})
	if err != nil {
		t.Fatal(err)
	}
	if textOf(t, res) != "done" {
		t.Errorf("result %q", textOf(t, res))
	}
	logs.waitFor(t, `msg="upstream stderr" server=up line=nnnnnnnn`)
}

func TestCloseStopsChild(t *testing.T) {
	g, err := New(t.Context(), []ServerConfig{stdioServer("up")}, allowAll(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := waitUpstream(t, g, "up", nil)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.proc.exited:
	default:
		t.Error("the child still runs after Close")
	}
	if err := g.Ready(); err == nil {
		t.Error("Ready after Close: nil")
	}
}

func TestUpstreamDownAtStart(t *testing.T) {
	missing := ServerConfig{Name: "gone", Command: "/nonexistent/toolgate-test-server"}
	g := newGateway(t, []ServerConfig{missing, {Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(),
		&Options{RestartMin: time.Hour})
	err := g.Ready()
	if err == nil || !strings.Contains(err.Error(), `"gone"`) || strings.Contains(err.Error(), `"up"`) {
		t.Errorf("Ready = %v, want an error naming gone only", err)
	}
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo"}); err != nil {
		t.Errorf("the connected upstream is unusable: %v", err)
	}
}

// receivedMethods records the methods an in-process upstream server receives,
// per MCP session, so a test can wait until a session is quiet.
type receivedMethods struct {
	mu   sync.Mutex
	seen map[string][]string // by session id
	ch   chan struct{}       // closed and replaced on every record
}

func newReceivedMethods(s *mcp.Server) *receivedMethods {
	l := &receivedMethods{seen: map[string][]string{}, ch: make(chan struct{})}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			l.mu.Lock()
			sid := req.GetSession().ID()
			l.seen[sid] = append(l.seen[sid], method)
			close(l.ch)
			l.ch = make(chan struct{})
			l.mu.Unlock()
			return res, err
		}
	})
	return l
}

// waitFor waits until session sid has been served every one of methods, a
// method listed n times at least n times.
func (l *receivedMethods) waitFor(t *testing.T, sid string, methods ...string) {
	t.Helper()
	for {
		l.mu.Lock()
		ok := true
		for _, m := range methods {
			ok = ok && count(l.seen[sid], m) >= count(methods, m)
		}
		ch := l.ch
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-time.After(testWait):
			t.Fatalf("upstream session %s never received %v", sid, methods)
		}
	}
}

func count(list []string, s string) int {
	n := 0
	for _, e := range list {
		if e == s {
			n++
		}
	}
	return n
}

func TestHTTPUpstreamSessionExpired(t *testing.T) {
	// Case C03: the upstream restarted and answers 404 to the old session id.
	// The gateway re-initialises and the call runs exactly once.
	h := newHooks()
	srv := newUpstreamServer(h)
	methods := newReceivedMethods(srv)
	newHandler := func() http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	var current atomic.Pointer[http.Handler]
	swap := func(hd http.Handler) { current.Store(&hd) }
	swap(newHandler())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)

	// No health checks: a ping must not be what meets the 404 first.
	g := newGateway(t, []ServerConfig{{Name: "pay", URL: ts.URL}}, allowAll(), &Options{RestartMin: time.Hour, HealthInterval: time.Hour})
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	call := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "pay__echo", Arguments: map[string]any{"n": 1}})
	}
	if _, err := call(); err != nil {
		t.Fatal(err)
	}
	old := waitUpstream(t, g, "pay", nil)

	swap(newHandler()) // the backend "restarts": old sessions are unknown
	res, err := call()
	if err != nil {
		t.Fatalf("call after the upstream restart: %v", err)
	}
	if textOf(t, res) != `{"n":1}` {
		t.Errorf("result %q", textOf(t, res))
	}
	if n := h.count("echo"); n != 2 {
		t.Errorf("upstream ran echo %d times, want 2 (once per call)", n)
	}
	now := waitUpstream(t, g, "pay", nil)
	if now == old {
		t.Error("the upstream session was not replaced")
	}

	// A new session sends logging/setLevel and tools/list on its own, in
	// the background. Whichever request meets the 404 below first ends the
	// session; for the agent's call to be the one (so that it retries and
	// reports that re-initialising failed), the new session must be quiet
	// first. (This wait is what made the test fail 2 of 30 runs under
	// -race: the background tools/list met the 404 first, the upstream was
	// down before the call, and the call said so instead.) logging/setLevel
	// comes twice: connect sends it before the session is published, run
	// again after (an agent's setLevel in between would be missed); waiting
	// for one let the second meet the 404 first (branch flake18: 3 of 150).
	methods.waitFor(t, now.cs.ID(), "logging/setLevel", "logging/setLevel", "tools/list")

	// If re-initialising fails, the agent gets an isError result at once.
	var notFoundMu sync.Mutex
	var notFound []string
	swap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		notFoundMu.Lock()
		notFound = append(notFound, r.Method+" "+string(b))
		notFoundMu.Unlock()
		http.NotFound(w, r)
	}))
	res, err = call()
	defer func() {
		if t.Failed() {
			notFoundMu.Lock()
			t.Logf("requests answered 404: %q", notFound)
			notFoundMu.Unlock()
			methods.mu.Lock()
			t.Logf("methods the new session served: %q", methods.seen[now.cs.ID()])
			methods.mu.Unlock()
		}
	}()
	if err != nil {
		t.Fatalf("call with a dead upstream: %v, want an isError result saying re-initialising failed", err)
	}
	if got := textOf(t, res); !res.IsError || !strings.Contains(got, `upstream "pay" is unavailable: its session expired and re-initialising failed`) {
		t.Errorf("call with a dead upstream: isError=%v %q, want an isError result saying re-initialising failed", res.IsError, got)
	}
}

func TestUpstreamDownBeforeTheCall(t *testing.T) {
	// The other order of TestHTTPUpstreamSessionExpired's last step: the
	// session ended before the call (here: the upstream is gone and the
	// reconnect failed); the call is answered at once, naming the upstream.
	srv := newUpstreamServer(nil)
	var current atomic.Pointer[http.Handler]
	swap := func(hd http.Handler) { current.Store(&hd) }
	swap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	g := newGateway(t, []ServerConfig{{Name: "pay", URL: ts.URL}}, allowAll(), &Options{RestartMin: time.Hour, HealthInterval: time.Hour})
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	c := waitUpstream(t, g, "pay", nil)

	swap(http.NotFoundHandler())
	_ = c.cs.Ping(t.Context(), nil) // meets the 404: the session ends, and re-initialising fails
	waitState(t, g, "pay", StateReconnecting)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "pay__echo", Arguments: map[string]any{"n": 1}})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), `upstream "pay" is unavailable: reconnecting since`) {
		t.Errorf("call: %v %+v, want an isError result naming the upstream and its state", err, res)
	}
}

func TestCallOnSessionEndedByAnotherRequest404(t *testing.T) {
	// The third order of TestHTTPUpstreamSessionExpired's last step: the
	// call took the session, then another request met the 404 and the SDK
	// ended the session before the call's POST went out. Nothing reached
	// the upstream: the call is retried after re-initialising (it must not
	// say it may have run).
	srv := newUpstreamServer(nil)
	methods := newReceivedMethods(srv)
	var current atomic.Pointer[http.Handler]
	swap := func(hd http.Handler) { current.Store(&hd) }
	swap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	g := newGateway(t, []ServerConfig{{Name: "pay", URL: ts.URL}}, allowAll(), &Options{RestartMin: time.Hour, HealthInterval: time.Hour})
	c := waitUpstream(t, g, "pay", nil)
	// The ping must be the request that meets the 404. A new session sends
	// logging/setLevel (twice) and tools/list on its own, in the
	// background; one of them meeting the 404 first ended the session and
	// the ping said "client is closing" (2 of 200 runs under -race, branch
	// attack27). Wait until the session is quiet, as
	// TestHTTPUpstreamSessionExpired does.
	methods.waitFor(t, c.cs.ID(), "logging/setLevel", "logging/setLevel", "tools/list")

	swap(http.NotFoundHandler())
	if err := c.cs.Ping(t.Context(), nil); !errors.Is(err, mcp.ErrSessionMissing) {
		t.Fatalf("ping: %v, want the session missing", err)
	}
	_, retry, err := g.ups["pay"].callOnce(t.Context(), c, "echo", json.RawMessage(`{"n":1}`), nil)
	if !retry {
		t.Errorf("call on the ended session: %v, want a retry (nothing was sent)", err)
	}
}

// waitTools waits until the agent's tools/list satisfies ok, re-listing on
// every tools/list_changed.
func waitTools(t *testing.T, cs *mcp.ClientSession, ev *clientEvents, ok func([]string) bool) {
	t.Helper()
	for {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if ok(names) {
			return
		}
		select {
		case <-ev.listChanged:
		case <-time.After(testWait):
			t.Fatalf("tools/list never matched; last %v", names)
		}
	}
}

func TestToolListChanged(t *testing.T) {
	// Case C07: a tool added upstream is announced and callable; once
	// removed upstream, a direct call is refused: no stale route.
	srv := newUpstreamServer(nil)
	g := newGateway(t, []ServerConfig{{Name: "fs", URL: httpUpstream(t, srv)}}, allowAll(), nil)
	ev := newClientEvents()
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, ev, nil)

	srv.AddTool(&mcp.Tool{Name: "drop_all", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "dropped"}}}, nil
	})
	waitTools(t, cs, ev, func(n []string) bool { return slices.Contains(n, "fs__drop_all") })
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs__drop_all"})
	if err != nil || textOf(t, res) != "dropped" {
		t.Fatalf("new tool: %v", err)
	}
	if _, ok := g.ToolDigest("fs", "drop_all"); !ok {
		t.Error("ToolDigest of the new tool: not found")
	}

	srv.RemoveTools("drop_all")
	waitTools(t, cs, ev, func(n []string) bool { return !slices.Contains(n, "fs__drop_all") })
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs__drop_all"})
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != jsonrpc.CodeInvalidParams || wire.Message != "unknown tool: fs__drop_all"+unknownToolHint {
		t.Errorf("removed tool: %v, want an unknown tool error", err)
	}
}
