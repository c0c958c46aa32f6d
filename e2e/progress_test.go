package e2e

import (
	"bufio"
	"context"
	"encoding/json"
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
	deadline := time.After(waitFor(t))
	for {
		if got := l.list(); len(got) >= n {
			return got
		}
		select {
		case <-l.more:
		case <-deadline:
			t.Fatalf("got %d progress notifications after %v, want at least %d: %+v", len(l.list()), waitFor(t), n, l.list())
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

// wireProgress returns the notifications/progress messages in raw
// Streamable HTTP response bytes (SSE "data:" lines or JSON bodies), in wire
// order. Everything the gateway sent on a call's stream before the call's
// result is in the capture once the call has returned, so unlike the
// client's notification handler (which may run after CallTool returns) this
// is complete.
func wireProgress(t *testing.T, raw string) []mcp.ProgressNotificationParams {
	t.Helper()
	var out []mcp.ProgressNotificationParams
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "data:"))
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
			out = append(out, msg.Params)
		}
	}
	return out
}

// TestProgressBeforeResultIsRelayed has the upstream send a burst of progress
// notifications and then its result at once: every notification the
// upstream sent before its result must reach the client, before the result,
// under the client's token.
func TestProgressBeforeResultIsRelayed(t *testing.T) {
	g, _ := startUpstreamGateway(t, `
policy:
  default: allow
`)
	raw := new(syncBuffer)
	cs := g.connect(t, nil, raw)
	const n = 20
	for i := range 3 {
		before := len(raw.String())
		token := "burst-" + string(rune('a'+i))
		r := await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{
			Name:      "t__progress",
			Arguments: json.RawMessage(`{"n":20}`),
			Meta:      mcp.Meta{"progressToken": token},
		}))
		if got := mustOK(t, r); got != "done" {
			t.Fatalf("progress call returned %q", got)
		}
		got := wireProgress(t, raw.String()[before:])
		checkProgress(t, got, token)
		if len(got) != n {
			t.Errorf("call %d: %d of the upstream's %d progress notifications reached the client before the result", i, len(got), n)
		}
	}
}
