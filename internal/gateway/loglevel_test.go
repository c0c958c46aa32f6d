package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSharedLogLevelNotOvertaken: toolgate sets a shared upstream's log
// level from two places — when the session starts (the floor it read
// then) and when an agent lowers the floor. If the first request reaches
// the upstream after the second, the upstream is left at the older, higher
// level and the agent never gets the debug messages it asked for (a
// TestLogLevelPerAgent failure under load). The upstream here holds every
// request for "info" back until it has seen one for "debug" (or 2 s).
func TestSharedLogLevelNotOvertaken(t *testing.T) {
	var (
		mu        sync.Mutex
		sawDebug  = make(chan struct{})
		debugOnce sync.Once
		levels    []string
	)
	mcpH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newFeatureServer("http", nil) }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"logging/setLevel"`)) {
			switch {
			case bytes.Contains(body, []byte(`"level":"info"`)):
				select {
				case <-sawDebug:
				case <-time.After(2 * time.Second):
				}
				mu.Lock()
				levels = append(levels, "info")
				mu.Unlock()
			case bytes.Contains(body, []byte(`"level":"debug"`)):
				mu.Lock()
				levels = append(levels, "debug")
				mu.Unlock()
				defer debugOnce.Do(func() { close(sawDebug) })
			}
		}
		mcpH.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	g := newGateway(t, []ServerConfig{{Name: "up", URL: ts.URL}}, allowAll(), nil)
	base := serveHTTP(t, g, nil)
	rec := &agentRecord{}
	opts, _ := capableClient("alice", rec, true)
	cs := connectAgent(t, base, aliceToken, opts, nil)
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__log", Arguments: map[string]any{"tag": "alice"}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return slices.Contains(rec.get(&rec.logs), "error-alice") })
	mu.Lock()
	sent := slices.Clone(levels)
	mu.Unlock()
	if got, want := rec.get(&rec.logs), []string{"debug-alice", "error-alice"}; !slices.Equal(got, want) {
		t.Errorf("alice at level debug got %q, want %q (levels the upstream applied, in order: %q)", got, want, sent)
	}
}
