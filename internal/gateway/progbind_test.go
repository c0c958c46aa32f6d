package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addProgressForgeTools adds the tools of the progress binding tests
// (attack19) to an upstream: gated sends progress 1 "started" under its
// call's token, blocks until the named pipe at its argument path is
// closed by the test, sends progress 2 "own" and returns; forge sends
// progress 5 "forged" under the token of its argument, as a careless or
// hostile upstream would under another agent's call's token it saw.
func addProgressForgeTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "gated", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Path string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			tok := req.Params.GetProgressToken()
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "started"})
			f, err := os.Open(a.Path)
			if err != nil {
				return nil, err
			}
			_, _ = f.Read(make([]byte, 1))
			_ = f.Close()
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2, Message: "own"})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "gated"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "forge", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Token string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: a.Token, Progress: 5, Message: "forged"})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "forged"}}}, nil
		})
}

// upstreamProgressTokens returns the tokens of the gateway's progress
// routes: what the upstreams of the calls in flight saw.
func upstreamProgressTokens(g *Gateway) []string {
	g.routes.mu.Lock()
	defer g.routes.mu.Unlock()
	var out []string
	for tok := range g.routes.routes {
		out = append(out, tok)
	}
	return out
}

// connectEra connects an agent to base in the 2025 era or, modern, in
// 2026-07-28's. A modern agent with no ev has no notification handlers.
func connectEra(t *testing.T, base, token string, ev *clientEvents, modern bool) *mcp.ClientSession {
	t.Helper()
	if !modern {
		return connectHTTP(t, base, token, ev, nil)
	}
	var opts *mcp.ClientOptions
	if ev != nil {
		opts = ev.options()
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent-2026", Version: "1"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("connect 2026 agent: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != modernVersion {
		t.Fatalf("negotiated %s, want %s", v, modernVersion)
	}
	return cs
}

// TestUpstreamProgressBoundToItsCall (attack19): the progress routes are
// the gateway's and took an upstream's notifications/progress by its
// token alone, from any upstream session. An upstream that serves several
// agents and saw agent A's token (every call's token, on a shared session;
// on per-agent sessions of one server, each process or HTTP session its
// own) sent progress under it while serving agent B's call, and A's agent
// got it, message and all, under its own token; A's own progress after it
// was then dropped as not increasing. Progress is now taken only from the
// upstream session the call was sent on and, over HTTP, only from the
// event stream of the call's own POST. Agent A's calls go the lean and the
// SDK path, in the 2025 and the 2026-07-28 era; B's forge is a 2025 call.
func TestUpstreamProgressBoundToItsCall(t *testing.T) {
	ups := []struct {
		name string
		cfg  func(t *testing.T) ServerConfig
	}{
		{"stdio per-agent", func(*testing.T) ServerConfig {
			sc := stdioServer("up")
			sc.Sessions = SessionsPerAgent
			return sc
		}},
		{"http shared", func(t *testing.T) ServerConfig {
			t.Helper()
			return ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil)), Sessions: SessionsShared}
		}},
	}
	for _, up := range ups {
		for _, lean := range []bool{true, false} {
			for _, modern := range []bool{false, true} {
				name := up.name + map[bool]string{true: " lean", false: " sdk"}[lean] + map[bool]string{true: " 2026", false: " 2025"}[modern]
				t.Run(name, func(t *testing.T) {
					f := newLeanProgFixture(t, up.cfg(t), nil, time.Hour, &HTTPOptions{DisableLeanCalls: !lean, DropGrace: time.Hour})
					evA := newClientEvents()
					a := connectEra(t, f.base, aliceToken, evA, modern)
					b := connectHTTP(t, f.base, bobToken, nil, nil)
					if lean {
						if !modern {
							waitInitialized(t, f.g, a.ID())
						}
						waitInitialized(t, f.g, b.ID())
					}
					path := mkfifo(t)
					params := &mcp.CallToolParams{Name: "up__gated", Arguments: map[string]any{"path": path}}
					params.SetProgressToken("a-tok")
					done := make(chan callAnswer, 1)
					go func() {
						res, err := a.CallTool(context.WithoutCancel(t.Context()), params)
						done <- callAnswer{res, err}
					}()
					got := receive(t, evA.progress, 1)
					toks := upstreamProgressTokens(f.g)
					if len(toks) != 1 {
						t.Fatalf("progress routes %q, want A's call's alone", toks)
					}
					res, err := b.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__forge", Arguments: map[string]any{"token": toks[0]}})
					if err != nil || res.IsError {
						t.Fatalf("forge: %+v %v", res, err)
					}
					// Read off the wire before forge's result: dropped and counted by then.
					if n := f.g.routes.foreign.Load(); n != 1 {
						t.Errorf("%d notifications dropped as another call's, want 1", n)
					}
					w, err := os.OpenFile(path, os.O_WRONLY, 0) //nolint:gosec // G304: the test's own named pipe
					if err != nil {
						t.Fatal(err)
					}
					_ = w.Close()
					got = append(got, receive(t, evA.progress, 1)...)
					r := <-done
					if r.err != nil || r.res.IsError {
						t.Fatalf("A's call: %+v %v", r.res, r.err)
					}
					want := []progressSeen{{Token: "a-tok", Progress: 1, Message: "started"}, {Token: "a-tok", Progress: 2, Message: "own"}}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("agent A's progress (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// TestUpstreamProgressOnTheSessionStream: an upstream that answers POSTs
// with JSON sends a call's progress on its session's standalone GET stream
// (notes §4); that stream is the session the call was sent on, so the
// progress still reaches the caller (the binding of attack19 keeps it).
func TestUpstreamProgressOnTheSessionStream(t *testing.T) {
	for _, lean := range []bool{true, false} {
		h := newHooks()
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newUpstreamServer(h) },
			&mcp.StreamableHTTPOptions{JSONResponse: true}))
		t.Cleanup(ts.Close)
		g := newGateway(t, []ServerConfig{{Name: "up", URL: ts.URL}}, allowAll(), nil)
		ev := newClientEvents()
		cs := connectHTTP(t, serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: !lean}), aliceToken, ev, nil)
		params := &mcp.CallToolParams{Name: "up__progress"}
		params.SetProgressToken("agent-tok")
		done := make(chan callAnswer, 1)
		go func() {
			res, err := cs.CallTool(t.Context(), params)
			done <- callAnswer{res, err}
		}()
		got := receive(t, ev.progress, 2)
		close(h.release)
		if r := <-done; r.err != nil || r.res.IsError {
			t.Fatalf("lean %v: %+v %v", lean, r.res, r.err)
		}
		want := []progressSeen{
			{Token: "agent-tok", Progress: 0, Total: 2, Message: "working"},
			{Token: "agent-tok", Progress: 1, Total: 2, Message: "working"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("lean %v: progress (-want +got):\n%s", lean, diff)
		}
	}
}

// TestProgressQueueBoundedInBytes (attack19): the relay queue of one call
// held relayQueue notifications whatever their size, each up to
// limits.max_result_bytes (64 MiB): an upstream sending large progress
// messages to a caller that reads slowly made toolgate hold 256 of them
// (16 GiB) for one call. What waits is now bounded in bytes as well; past
// the bound notifications are dropped and counted like a full queue's.
func TestProgressQueueBoundedInBytes(t *testing.T) {
	r := newProgressRoutes(time.Minute, slog.New(slog.DiscardHandler))
	scope := &progressScope{sid: "s"}
	p := queuedRoute(r, "toolgate-1", scope)
	msg := strings.Repeat("m", 64<<10)
	const sent = 64 // 4 MiB of messages
	for i := range sent {
		r.relayWire(scope, json.RawMessage(fmt.Sprintf(`{"progressToken":"toolgate-1","progress":%d,"message":%q}`, i+1, msg)))
	}
	held := len(p.queue) * len(msg)
	if held > relayQueueBytes+len(msg) {
		t.Errorf("%d notifications (%d bytes of messages) wait for a caller that does not read, want at most %d bytes", len(p.queue), held, relayQueueBytes)
	}
	if p.dropped != sent-len(p.queue) {
		t.Errorf("dropped %d, want %d (the ones not queued)", p.dropped, sent-len(p.queue))
	}
}
