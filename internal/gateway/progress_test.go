package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
)

type progressSeen struct {
	Token    any
	Progress float64
	Total    float64
	Message  string
}

func receive(t *testing.T, ch <-chan *mcp.ProgressNotificationParams, n int) []progressSeen {
	t.Helper()
	var got []progressSeen
	for range n {
		select {
		case p := <-ch:
			got = append(got, progressSeen{Token: p.ProgressToken, Progress: p.Progress, Total: p.Total, Message: p.Message})
		case <-time.After(testWait):
			t.Fatalf("got %d progress notifications, want %d", len(got), n)
		}
	}
	return got
}

func TestProgressRelay(t *testing.T) {
	// Upstream progress reaches the agent under the agent's own token.
	h := newHooks()
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, allowAll(), nil)
	ev := newClientEvents()
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, ev, nil)

	params := &mcp.CallToolParams{Name: "up__progress"}
	params.SetProgressToken("agent-tok")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), params)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	got := receive(t, ev.progress, 2)
	close(h.release)
	res := <-done
	want := []progressSeen{
		{Token: "agent-tok", Progress: 0, Total: 2, Message: "working"},
		{Token: "agent-tok", Progress: 1, Total: 2, Message: "working"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	// The upstream saw the gateway's token, not the agent's.
	if txt := textOf(t, res); txt == "token agent-tok" || txt == "token <nil>" {
		t.Errorf("upstream got progress token %q, want a gateway token", txt)
	}
}

func TestKeepAlives(t *testing.T) {
	// A held call with a progress token gets keep-alives 1, 2; upstream
	// progress then continues past them.
	h := newHooks()
	gk := gatekeeperFunc(func(ctx context.Context, c gate.Call) gate.Admission {
		if c.KeepAlive == nil {
			return gate.Admission{Message: "no KeepAlive"}
		}
		c.KeepAlive(ctx, "waiting for approval 0190 (1)")
		c.KeepAlive(ctx, "")
		return gate.Admission{Allowed: true}
	})
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gk, nil)
	ev := newClientEvents()
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, ev, nil)

	params := &mcp.CallToolParams{Name: "up__progress"}
	params.SetProgressToken(7)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), params)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	got := receive(t, ev.progress, 4)
	close(h.release)
	if res := <-done; res.IsError {
		t.Fatalf("call refused: %s", textOf(t, res))
	}
	want := []progressSeen{
		{Token: float64(7), Progress: 1, Message: "waiting for approval 0190 (1)"},
		{Token: float64(7), Progress: 2, Message: keepAliveMessage},
		{Token: float64(7), Progress: 3, Total: 5, Message: "working"},
		{Token: float64(7), Progress: 4, Total: 5, Message: "working"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

func TestNoProgressWithoutToken(t *testing.T) {
	keepAlive := make(chan bool, 1)
	gk := gatekeeperFunc(func(ctx context.Context, c gate.Call) gate.Admission {
		keepAlive <- c.KeepAlive != nil
		return gate.Admission{Allowed: true}
	})
	h := newHooks()
	close(h.release)
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gk, nil)
	ev := newClientEvents()
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, ev, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__progress"})
	if err != nil {
		t.Fatal(err)
	}
	if <-keepAlive {
		t.Error("KeepAlive set for a call without a progress token")
	}
	if txt := textOf(t, res); txt != "token <nil>" {
		t.Errorf("upstream got a progress token: %q", txt)
	}
	select {
	case p := <-ev.progress:
		t.Errorf("progress without a token: %+v", p)
	default:
	}
}

// wireProgress returns the notifications/progress messages in raw
// Streamable HTTP response bytes, in wire order.
func wireProgress(t *testing.T, raw string) []progressSeen {
	t.Helper()
	var out []progressSeen
	for line := range strings.Lines(raw) {
		line = strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var msg struct {
			Method string                         `json:"method"`
			Params mcp.ProgressNotificationParams `json:"params"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("captured message %s: %v", line, err)
		}
		if msg.Method == "notifications/progress" {
			p := msg.Params
			out = append(out, progressSeen{Token: p.ProgressToken, Progress: p.Progress, Total: p.Total, Message: p.Message})
		}
	}
	return out
}

func TestProgressBurstBeforeResult(t *testing.T) {
	// An upstream that sends n progress notifications and returns at once:
	// every one of them reaches the agent, in order, before the result. The
	// SDK delivers the upstream's result before it runs the handlers of the
	// notifications that preceded it, so this fails unless the gateway takes
	// progress from the wire in order and drains it before returning.
	const n = 20
	tests := []struct {
		name string
		up   func(t *testing.T) ServerConfig
	}{
		{name: "http", up: func(t *testing.T) ServerConfig {
			t.Helper()
			return ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}
		}},
		{name: "stdio", up: func(*testing.T) ServerConfig { return stdioServer("up") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, []ServerConfig{tt.up(t)}, allowAll(), nil)
			waitUpstream(t, g, "up", nil)
			capture := &tee{}
			cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, func(rt http.RoundTripper) http.RoundTripper {
				capture.next = rt
				return capture
			})
			var want []progressSeen
			for i := 1; i <= n; i++ {
				want = append(want, progressSeen{Token: "agent-tok", Progress: float64(i), Total: n, Message: fmt.Sprintf("step %d", i)})
			}
			for call := range 3 {
				before := len(capture.String())
				params := &mcp.CallToolParams{Name: "up__burst", Arguments: map[string]any{"n": n}}
				params.SetProgressToken("agent-tok")
				res, err := cs.CallTool(t.Context(), params)
				if err != nil {
					t.Fatal(err)
				}
				if txt := textOf(t, res); txt != "done" {
					t.Fatalf("result %q", txt)
				}
				// The client has read the result, so everything sent before
				// it is in the capture.
				got := wireProgress(t, capture.String()[before:])
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("call %d: progress before the result (-want +got):\n%s", call, diff)
				}
			}
			if n := perAgentRawCalls(g, "up"); tt.name == "stdio" && n != 3 {
				t.Errorf("%d calls went the raw way (rawcall.go), want all 3", n)
			}
		})
	}
}

// queuedRoute registers a route for token, sent on the session scope,
// with a queue but no forwarding goroutine, so a test can inspect what was
// queued.
func queuedRoute(r *progressRoutes, token string, scope *progressScope) *callProgress {
	p := &callProgress{upstreamToken: token, queue: make(chan queuedProgress, relayQueue), forwarding: true}
	p.bindTo(scope)
	r.routes[token] = p
	return p
}

func queuedValues(p *callProgress) []float64 {
	var out []float64
	for len(p.queue) > 0 {
		out = append(out, (<-p.queue).n.Progress)
	}
	return out
}

func TestSSETeeRelaysProgress(t *testing.T) {
	// Progress on a tools/call's event stream is queued as its events pass,
	// in order, up to the result.
	r := newProgressRoutes(time.Minute, slog.New(slog.DiscardHandler))
	p := queuedRoute(r, "toolgate-1", &progressScope{sid: "s"})
	prog := func(tok string, v int) string {
		return fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%q,\"progress\":%d}}\n\n", tok, v)
	}
	stream := prog("toolgate-1", 1) + prog("other", 7) + prog("toolgate-1", 2) +
		"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[]}}\n\n" + prog("toolgate-1", 3)
	s := &slot{}
	tee := &sseTee{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), s: s, id: json.RawMessage("5"), max: 1 << 20, routes: r,
		post: true, call: p}
	if _, err := io.ReadAll(tee); err != nil {
		t.Fatal(err)
	}
	if s.result() == nil {
		t.Error("result not captured")
	}
	if diff := cmp.Diff([]float64{1, 2}, queuedValues(p)); diff != "" {
		t.Errorf("queued from the wire (-want +got):\n%s", diff)
	}
}

func TestProgressQueueFull(t *testing.T) {
	// Nothing is dropped within the bound; past it the drops are counted.
	r := newProgressRoutes(time.Minute, slog.New(slog.DiscardHandler))
	scope := &progressScope{sid: "s"}
	p := queuedRoute(r, "toolgate-1", scope)
	for i := range relayQueue + 5 {
		r.relayWire(scope, json.RawMessage(fmt.Sprintf(`{"progressToken":"toolgate-1","progress":%d}`, i+1)))
	}
	if got := len(p.queue); got != relayQueue {
		t.Errorf("queued %d, want %d", got, relayQueue)
	}
	if p.dropped != 5 {
		t.Errorf("dropped %d, want 5", p.dropped)
	}
}
