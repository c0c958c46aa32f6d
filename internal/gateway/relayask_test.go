package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBorrowedQuestionAgentRefusalAskedOnce: an agent that answers a
// borrowed question (elicitation) with an error of code -32005 whose text
// reads like the SDK's own refusal to write ("rejected by transport: write
// to closed stream") answered it: the question reached it, and its human
// may have seen it. It must not be put to the agent a second time on the
// session's stream (origin.viaSDK re-sends only what the SDK refused to
// write), and the agent's error goes back to the upstream.
func TestBorrowedQuestionAgentRefusalAskedOnce(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "front", Version: "1"}, nil)
	inCall := make(chan context.Context, 1)
	sessions := make(chan *mcp.ServerSession, 1)
	release := make(chan struct{})
	mcp.AddTool(srv, &mcp.Tool{Name: "t", InputSchema: objectSchema}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		sessions <- req.Session
		inCall <- ctx
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()

	var asked atomic.Int32
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return nil, &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport: write to closed stream"}
		},
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}})
		called <- err
	}()
	ss, ctx := <-sessions, <-inCall // a request in flight: its stream is open
	defer func() {
		close(release)
		if err := <-called; err != nil {
			t.Error(err)
		}
	}()
	o := &origin{ss: ss, ctx: ctx, borrowed: true, standalone: t.Context(), log: slog.New(slog.DiscardHandler)}
	_, err = o.ask(t.Context(), methodElicit, &mcp.ElicitParams{Message: "approve the transfer?", RequestedSchema: objectSchema}, nil)
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != codeRejected {
		t.Errorf("ask = %v, want the agent's own error", err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the agent was asked %d times, want once (it answered the first)", n)
	}
}
