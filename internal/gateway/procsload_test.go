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
	if n, peak := load.InFlight(); n != 0 || peak < 1 {
		t.Fatalf("in flight after the call: %d (most %d), want 0 (most at least 1)", n, peak)
	}
}
