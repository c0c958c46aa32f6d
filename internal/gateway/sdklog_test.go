package gateway

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUndeliverableListChangedIsNotAWarning: an agent session without a
// standalone GET stream cannot receive tools/list_changed; the go-sdk logs
// each such attempt as a WARN. Through toolgate's SDK logger it is a DEBUG
// record (still there, with the SDK's words), and other records keep
// their level.
func TestUndeliverableListChangedIsNotAWarning(t *testing.T) {
	logs := &logBuffer{}
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(newHooks()))}}, allowAll(), &Options{Logger: logs.logger()})
	base := serveHTTP(t, g, nil)
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: aliceToken, next: http.DefaultTransport}}, DisableStandaloneSSE: true}, era2025)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	waitInitialized(t, g, cs.ID())

	g.SessionsChanged()
	logs.waitFor(t, "rejected by transport")
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "rejected by transport") && !strings.Contains(line, "level=DEBUG") {
			t.Errorf("an undeliverable list_changed was logged as %q, want level DEBUG", line)
		}
	}
}

func TestSDKLoggerKeepsOtherRecords(t *testing.T) {
	logs := &logBuffer{}
	l := sdkLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Warn("calling notifications/tools/list_changed: rejected by transport: undelivered message")
	l.Warn("calling notifications/progress: session is closed", "k", "v")
	l.Info("calling notifications/tools/list_changed: rejected by transport (info)")
	got := logs.String()
	if strings.Contains(got, "undelivered message") {
		t.Errorf("a DEBUG record passed an INFO handler: %q", got)
	}
	if !strings.Contains(got, `level=WARN msg="calling notifications/progress: session is closed" k=v`) {
		t.Errorf("another warning was changed or dropped: %q", got)
	}
	if !strings.Contains(got, "level=INFO") {
		t.Errorf("an INFO record was changed or dropped: %q", got)
	}
	if sdkLogger(nil) != nil {
		t.Error("sdkLogger(nil) is not nil")
	}
}
