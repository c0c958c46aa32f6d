package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressLog collects the progress notifications a client session
// receives. Its methods are safe for concurrent use.
type progressLog struct {
	mu   sync.Mutex
	got  []mcp.ProgressNotificationParams
	more chan struct{} // gets a value (non-blocking) on every notification
}

func newProgressLog() *progressLog { return &progressLog{more: make(chan struct{}, 1)} }

// handler is a ClientOptions.ProgressNotificationHandler; it never blocks.
func (l *progressLog) handler(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	l.mu.Lock()
	l.got = append(l.got, *r.Params)
	l.mu.Unlock()
	select {
	case l.more <- struct{}{}:
	default:
	}
}

func (l *progressLog) list() []mcp.ProgressNotificationParams {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]mcp.ProgressNotificationParams(nil), l.got...)
}

// waitCount waits until at least n notifications arrived and returns them.
func (l *progressLog) waitCount(t *testing.T, n int) []mcp.ProgressNotificationParams {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		if got := l.list(); len(got) >= n {
			return got
		}
		select {
		case <-l.more:
		case <-deadline:
			t.Fatalf("got %d progress notifications after %v, want at least %d: %+v", len(l.list()), waitFor, n, l.list())
		}
	}
}

// checkProgress fails unless every notification carries token and the
// values strictly increase.
func checkProgress(t *testing.T, got []mcp.ProgressNotificationParams, token string) {
	t.Helper()
	for i, p := range got {
		if p.ProgressToken != token {
			t.Errorf("notification %d has progress token %#v, want %q", i, p.ProgressToken, token)
		}
		if i > 0 && p.Progress <= got[i-1].Progress {
			t.Errorf("notification %d has progress %v after %v: values must strictly increase", i, p.Progress, got[i-1].Progress)
		}
	}
}

// TestEverythingProgressRelay calls the npm everything server's long-running
// operation through the gateway and checks that the upstream's progress
// reaches the client under the client's own progress token.
func TestEverythingProgressRelay(t *testing.T) {
	n := findNPM(t)
	cfg := gatewayConfig(filepath.Join(t.TempDir(), "toolgate.db"), `
servers:
  ev:
    command: `+q(n.node)+`
    args: [`+q(n.script(t, "mcp-server-everything"))+`, stdio]
    call_timeout: 60s
policy:
  default: allow
`)
	g := startGateway(t, cfg, nil)
	prog := newProgressLog()
	cs := g.connect(t, &mcp.ClientOptions{ProgressNotificationHandler: prog.handler}, nil)

	var tool string
	for tl, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if strings.HasPrefix(tl.Name, "ev__") && strings.Contains(strings.ToLower(tl.Name), "long") {
			tool = tl.Name
		}
	}
	if tool == "" {
		t.Fatal("tools/list has no ev__ long-running operation tool")
	}
	t.Logf("long-running tool: %s", tool)

	start := time.Now()
	const steps = 4
	r := await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{
		Name:      tool,
		Arguments: map[string]any{"duration": 1, "steps": steps},
		Meta:      mcp.Meta{"progressToken": "my-token"},
	}))
	out := mustOK(t, r)
	elapsed(t, "everything long-running operation (1s, 4 steps)", start)
	if !strings.Contains(out, "completed") {
		t.Errorf("result = %q, want the operation's completion message", out)
	}
	// Every step's notification was sent upstream before the result; wait
	// for all of them (the client may hand the result over before it has
	// run the notification handler for the last one).
	got := prog.waitCount(t, steps)
	checkProgress(t, got, "my-token")
	if len(got) != steps {
		t.Errorf("got %d progress notifications, want %d (one per step): %+v", len(got), steps, got)
	}
	for i, p := range got {
		if p.Total != 0 && p.Total < p.Progress {
			t.Errorf("notification %d: progress %v past total %v", i, p.Progress, p.Total)
		}
	}
}
