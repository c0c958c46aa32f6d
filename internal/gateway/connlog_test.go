package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAgentConnectionLogsOneTaggedInfoLine (fixes49): every agent session
// logged the go-sdk's "server connecting", "server session connected" and
// "session initialized" at INFO (two without a session id, none with the
// principal), and every request of a 2026-07-28 agent three lines: an
// operator with 100 agents read 300 lines saying nothing of who. The
// SDK's lines are DEBUG now; toolgate's one INFO line "agent session
// started" carries the session id, principal and client, never the token.
func TestAgentConnectionLogsOneTaggedInfoLine(t *testing.T) {
	logs := &logBuffer{}
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(newHooks()))}}, allowAll(), &Options{Logger: logs.logger()})
	base := serveHTTP(t, g, nil)
	mark := len(logs.String())
	connect := func(o *mcp.ClientSessionOptions) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "desk-agent", Version: "2.1"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{token: aliceToken, next: http.DefaultTransport}}}, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		return cs
	}

	cs := connect(era2025)
	sid := cs.ID()
	_ = cs.Close()
	logs.waitCount(t, `msg="server session disconnected"`, 1)
	// A 2026-07-28 agent: no session, one SDK connection per request.
	modern := connect(nil)
	_ = modern.Close()
	logs.waitCount(t, `msg="server session disconnected"`, 2)

	var info []string
	for line := range strings.Lines(logs.String()[mark:]) {
		if strings.Contains(line, aliceToken) {
			t.Errorf("a log line carries the agent's token: %q", line)
		}
		if !strings.Contains(line, "level=DEBUG") {
			info = append(info, line)
		}
	}
	want := `level=INFO msg="agent session started" session_id=` + sid + ` principal=alice protocol_version=2025-11-25 client=desk-agent client_version=2.1`
	if len(info) != 1 || !strings.Contains(info[0], want) {
		t.Errorf("the INFO lines of two agent connections:\n%s\nwant one, with %q", strings.Join(info, ""), want)
	}
}
