package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBorrowedQuestionAfterItsRequestWasAnswered: a per-agent upstream
// asks for roots on its own (the filesystem server does right after it
// starts) while the agent's first call is in flight, so the question
// borrows that call's stream. When the call is answered before the
// question is written, the SDK refuses the write ("rejected by transport:
// write to closed stream"); the question must then go on the agent
// session's standalone stream and get the agent's roots, not fail the
// upstream's roots/list (TestFilesystemRoots flaked on exactly this).
func TestBorrowedQuestionAfterItsRequestWasAnswered(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "front", Version: "1"}, nil)
	handled := make(chan context.Context, 1)
	mcp.AddTool(srv, &mcp.Tool{Name: "t", InputSchema: objectSchema}, func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		handled <- ctx
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	sessions := make(chan *mcp.ServerSession, 1)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" {
				select {
				case sessions <- req.GetSession().(*mcp.ServerSession):
				default:
				}
			}
			return next(ctx, method, req)
		}
	})
	// The SDK writes the head of the agent's standalone stream (its GET)
	// while it registers the stream, under the stream's lock, which a
	// write to the stream takes: once the head is written, a message of
	// no request goes out on that stream.
	standalone := make(chan struct{})
	var once sync.Once
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w = &headWritten{ResponseWriter: w, written: func() { once.Do(func() { close(standalone) }) }}
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()

	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}},
	})
	//lint:ignore SA1019 roots are deprecated only from 2026-07-28; this agent speaks 2025-11-25.
	c.AddRoots(&mcp.Root{URI: "file:///agent-root"})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	ss := <-sessions
	select { // the client's standalone stream is open
	case <-standalone:
	case <-time.After(time.Until(nearDeadline(t))):
		t.Fatal("the agent never opened its standalone stream (GET)")
	}

	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	answered := <-handled // the context of a request now answered

	o := &origin{ss: ss, ctx: answered, borrowed: true, log: slog.New(slog.DiscardHandler)}
	var wire *jsonrpc.Error
	if _, err := o.ask(t.Context(), methodListRoots, (*mcp.ListRootsParams)(nil), nil); !errors.As(err, &wire) || wire.Code != codeRejected {
		t.Fatalf("without a standalone context: %v, want the SDK's refusal to write on the answered request's stream", err)
	}
	o.standalone = t.Context()
	res, err := o.ask(t.Context(), methodListRoots, (*mcp.ListRootsParams)(nil), nil)
	if err != nil {
		t.Fatalf("roots/list on an answered request's stream: %v, want it sent on the session's stream", err)
	}
	if r, ok := res.(*mcp.ListRootsResult); !ok || len(r.Roots) != 1 || r.Roots[0].URI != "file:///agent-root" {
		t.Errorf("roots = %+v, want the agent's one root", res)
	}
}

// headWritten is a ResponseWriter that calls written when the response's
// head is written with 200.
type headWritten struct {
	http.ResponseWriter
	written func()
}

func (w *headWritten) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	if code == http.StatusOK {
		w.written()
	}
}

// Unwrap lets http.ResponseController reach the writer's Flush.
func (w *headWritten) Unwrap() http.ResponseWriter { return w.ResponseWriter }
