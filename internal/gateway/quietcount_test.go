package gateway

import (
	"strconv"
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/procs"
)

// TestStdioMessagesAreSeen: each message a stdio agent sends is seen in
// Options.Load (Seen, what execpages.WhenQuiet watches), so a gateway
// serving a stdio agent is not quiet while the agent talks; Follow's
// count of calls in flight is left alone.
func TestStdioMessagesAreSeen(t *testing.T) {
	l := &procs.Load{}
	g := newGateway(t, nil, allowAll(), &Options{Load: l})
	a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"}) // initialize, initialized
	// The answer to a ping means the guard read it, and every line before.
	a.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	a.response(1)
	before := l.Seen()
	if before != 3 {
		t.Fatalf("Seen after initialize, initialized and a ping = %d, want 3", before)
	}
	for id := 2; id <= 4; id++ {
		a.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"ping"}`)
		a.response(id)
	}
	if got := l.Seen(); got != before+3 {
		t.Fatalf("Seen after three pings = %d, want %d", got, before+3)
	}
	if now, most := l.InFlight(); now != 0 || most != 0 {
		t.Fatalf("InFlight = %d, %d: the stdio messages were counted in flight", now, most)
	}
}
