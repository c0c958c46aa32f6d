package gateway

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/procs"
)

// TestHTTPFrontCountsRequestsInFlight: the HTTP front counts the POSTs it
// serves in Options.Load (for procs.Follow), and counts each out when it
// is served; the client's GET stream, open for the whole session, is not
// counted.
func TestHTTPFrontCountsRequestsInFlight(t *testing.T) {
	load := &procs.Load{}
	g := newGateway(t, []ServerConfig{stdioServer("up")}, allowAll(), &Options{Load: load})
	waitUpstream(t, g, "up", nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{"a":1}`)})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if _, peak := load.InFlight(); peak < 1 {
		t.Fatalf("most in flight after the call: %d, want at least 1", peak)
	}
	// The call's POST is counted until its handler returns, a moment
	// after the client has the answer: waited for, not read at once.
	waitLoadZero(t, load)
}
