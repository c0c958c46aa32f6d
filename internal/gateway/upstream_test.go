package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestStdioExitFailsCallsAndRestarts(t *testing.T) {
	// Case C08 "die": every call in flight fails when the child exits, and
	// the child is restarted.
	// A long grace, so the exit status is known even on a loaded machine.
	shared := stdioServer("up")
	shared.Sessions = SessionsShared // the shared session is restarted; per-agent ones are reopened on use
	g := newGateway(t, []ServerConfig{shared}, allowAll(), &Options{RestartMin: 10 * time.Millisecond, TerminateGrace: 10 * time.Second})
	ev := newClientEvents()
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, ev, nil)
	first := waitUpstream(t, g, "up", nil)

	sleeping := make(chan error, 1)
	params := &mcp.CallToolParams{Name: "up__sleep"}
	params.SetProgressToken("s")
	go func() {
		_, err := cs.CallTool(t.Context(), params)
		sleeping <- err
	}()
	receive(t, ev.progress, 1) // the sleep call runs upstream

	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__die"})
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != CodeUpstreamUnavailable || !strings.Contains(wire.Message, "exit status 3") {
		t.Errorf("die: %v, want a JSON-RPC error %d naming exit status 3", err, CodeUpstreamUnavailable)
	}
	if err := <-sleeping; !errors.As(err, &wire) || wire.Code != CodeUpstreamUnavailable {
		t.Errorf("call in flight: %v, want a JSON-RPC error %d", err, CodeUpstreamUnavailable)
	}

	second := waitUpstream(t, g, "up", first)
	if second.proc == first.proc {
		t.Fatal("not restarted")
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"after": "restart"}})
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

func TestHTTPUpstreamSessionExpired(t *testing.T) {
	// Case C03: the upstream restarted and answers 404 to the old session id.
	// The gateway re-initialises and the call runs exactly once.
	h := newHooks()
	srv := newUpstreamServer(h)
	newHandler := func() http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	var current atomic.Pointer[http.Handler]
	swap := func(hd http.Handler) { current.Store(&hd) }
	swap(newHandler())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)

	g := newGateway(t, []ServerConfig{{Name: "pay", URL: ts.URL}}, allowAll(), &Options{RestartMin: time.Hour})
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
	if now := waitUpstream(t, g, "pay", nil); now == old {
		t.Error("the upstream session was not replaced")
	}

	// If re-initialising fails, the agent gets a JSON-RPC error at once.
	swap(http.NotFoundHandler())
	_, err = call()
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != CodeUpstreamUnavailable || !strings.Contains(wire.Message, "re-initialising failed") {
		t.Errorf("call with a dead upstream: %v, want a JSON-RPC error saying re-initialising failed", err)
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
	if !errors.As(err, &wire) || wire.Code != jsonrpc.CodeInvalidParams || wire.Message != "unknown tool: fs__drop_all" {
		t.Errorf("removed tool: %v, want an unknown tool error", err)
	}
}
