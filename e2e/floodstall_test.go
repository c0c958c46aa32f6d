package e2e

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOneByteFloodAtTheCap (listen37): a client without a token that
// opens as many agent connections as listen.max_conns_mcp and sends one
// byte of a request line on each (then nothing) does not lock agents out:
// once those requests have stalled (a second after their byte, nothing
// since), a new agent connection closes one of them to make room, and the
// agent's allowed call is answered. Before, every new connection was
// answered 503 until read_header_timeout (10 s), and again each time the
// client opened its connections anew.
func TestOneByteFloodAtTheCap(t *testing.T) {
	const capConns = 32
	bin, err := testFloodBin()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	g := startGateway(t, `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
  max_conns_mcp: 32
  read_header_timeout: 5m
storage:
  driver: sqlite
  path: `+q(filepath.Join(dir, "toolgate.db"))+`
`+principalsYAML+upstreamServer(record)+leanPolicy, nil)
	mcpURL, err := url.Parse(g.MCP)
	if err != nil {
		t.Fatal(err)
	}
	f := startFlood(t, bin, mcpURL.Host, capConns, "-one-byte")
	t.Logf("testflood: %s", f.waitReady(t))
	// The stalled requests' grace (1 s from their byte): the case, not a
	// wait for an event. read_header_timeout (5m) closes none of them.
	time.Sleep(1500 * time.Millisecond)

	cs := g.connect(t, nil, nil)
	ch := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"during":"one-byte flood"}`)})
	if got := mustOK(t, awaitWithin(t, ch, floodWait)); got != `{"during":"one-byte flood"}` {
		t.Errorf("the allowed call returned %q", got)
	}
	m := scrapeMetrics(t, g.Admin)
	if series := `toolgate_http_connections_shed_total{how="evicted",listener="mcp"}`; m[series] == 0 {
		t.Errorf("%s = 0: no stalled connection was closed to make room", series)
	}
}
