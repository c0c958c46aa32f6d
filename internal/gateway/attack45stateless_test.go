package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// TestCancelToStatelessUpstreamWithoutPropagation (branch attack45): an
// agent's cancel of a call to a stateless HTTP upstream that cannot see it
// (go-sdk StreamableHTTPOptions.Stateless without
// PropagateRequestCancellation: its handler's context ends with its POST
// only when that option is set, and a notifications/cancelled POST lands
// in a session of its own) is answered at once as cancelled, over stdio
// and HTTP, and the call is never sent again: the upstream's handler runs
// to its end, once, and its late result goes nowhere. What toolgate can do
// it does (the upstream POST is aborted); the rest is the upstream's
// (docs/protocol.md, "An agent's cancel and a stateless HTTP upstream"). This held on ca0a3f75.
func TestCancelToStatelessUpstreamWithoutPropagation(t *testing.T) {
	var runs atomic.Int32
	started, finish, finished := make(chan struct{}, 4), make(chan struct{}), make(chan error, 4)
	s := mcp.NewServer(&mcp.Implementation{Name: "stateless-slow", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: objectSchema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		runs.Add(1)
		started <- struct{}{}
		select {
		case <-ctx.Done():
			finished <- context.Cause(ctx)
			return nil, ctx.Err()
		case <-finish:
			finished <- nil
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
		}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)

	g := newGateway(t, []ServerConfig{{Name: "up", URL: ts.URL}}, allowAll(), nil)
	waitStarted := func(t *testing.T) {
		t.Helper()
		select {
		case <-started:
		case <-time.After(testWait):
			t.Fatal("the slow call never reached the upstream")
		}
	}
	// Let the handler finish by itself, and check it was not cancelled.
	runsToItsEnd := func(t *testing.T) {
		t.Helper()
		finish <- struct{}{}
		select {
		case cause := <-finished:
			if cause != nil {
				t.Errorf("the upstream handler was cancelled (%v): the upstream saw the cancel after all", cause)
			}
		case <-time.After(testWait):
			t.Fatal("the handler did not finish")
		}
	}
	t.Run("stdio", func(t *testing.T) {
		a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"})
		a.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up__slow","arguments":{}}}`)
		waitStarted(t)
		a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
		if got := a.answers(5)[5]; got.Error == nil && got.Result["isError"] != true {
			t.Errorf("the cancelled call's answer %+v, want an error", got)
		}
		runsToItsEnd(t)
	})
	t.Run("http", func(t *testing.T) {
		cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__slow", Arguments: map[string]any{}})
			errc <- err
		}()
		waitStarted(t)
		cancel()
		select {
		case err := <-errc:
			if err == nil {
				t.Error("the cancelled call returned no error")
			}
		case <-time.After(testWait):
			t.Fatal("the cancelled call did not return")
		}
		runsToItsEnd(t)
	})
	if n := runs.Load(); n != 2 {
		t.Errorf("the upstream ran %d calls, want 2 (one per agent, never again)", n)
	}
}
