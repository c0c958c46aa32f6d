package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// TestStdioCancelReachesStatelessUpstream (branch attack44): a stdio
// agent's notifications/cancelled reaches the handler of a stateless HTTP
// upstream (go-sdk, StreamableHTTPOptions.Stateless) that speaks
// 2026-07-28 and sets PropagateRequestCancellation: toolgate's session
// with it is of that revision, cancelling the call aborts its POST, and
// the SDK ends the handler's context with the POST. The SDK client's
// notifications/cancelled does not (it lands in a new stateless session).
// This held on 8308deeb. What cannot reach such an upstream's handler,
// whatever toolgate does (measured here, not asserted): without
// PropagateRequestCancellation, or on a session toolgate initialized at
// 2025-11-25 (an upstream that speaks both revisions: the SDK propagates
// only a 2026-07-28 request's end), the handler runs on until it ends by
// itself.
func TestStdioCancelReachesStatelessUpstream(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	closed := make(chan struct{})
	s := mcp.NewServer(&mcp.Implementation{Name: "stateless-slow", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{modernVersion}})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: objectSchema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			ended <- context.Cause(ctx)
		case <-closed: // the test ended (failed)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ended by the test's end"}}}, nil
		}
		return nil, ctx.Err()
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(closed) })

	g := newGateway(t, []ServerConfig{{Name: "up", URL: ts.URL}}, allowAll(), nil)
	a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"})
	a.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up__slow","arguments":{}}}`)
	select {
	case <-started:
	case <-time.After(testWait):
		t.Fatal("the slow call never reached the upstream")
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	select {
	case cause := <-ended:
		t.Logf("the upstream handler's context ended: %v", cause)
	case <-time.After(testWait):
		t.Fatal("the upstream handler's context did not end")
	}
	if got := a.answers(5)[5]; got.Error == nil && got.Result["isError"] != true {
		t.Errorf("the cancelled call's answer %+v, want an error", got)
	}
}
