package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInitializeOnAReleasedSessionSaysSo (truth51): an initialize re-sent
// on an agent session that ended and whose per-agent state is being
// released is refused without being served, saying the session is being
// closed and to start a new one; on a7b144b1 it said "gateway shutting
// down" while the gateway went on. Once Close began it says that.
func TestInitializeOnAReleasedSessionSaysSo(t *testing.T) {
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(newHooks()))}}, allowAll(), nil)
	base := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: true})
	connectAgent(t, base, aliceToken, nil, nil)
	var ss *mcp.ServerSession
	for s := range g.server.Sessions() {
		ss = s
	}
	if ss == nil {
		t.Fatal("no agent session on the gateway's SDK server")
	}
	// sessionEnded's first step: the session is marked as being released.
	g.watchMu.Lock()
	if _, ok := g.watched[ss]; !ok {
		g.watchMu.Unlock()
		t.Fatal("the agent session is not watched")
	}
	g.watched[ss] = false
	g.watchMu.Unlock()

	g.carriers.put("truth51", &carrier{ctx: t.Context()})
	t.Cleanup(func() { g.carriers.delete("truth51") })
	req := &mcp.ServerRequest[*mcp.InitializeParams]{Session: ss, Params: &mcp.InitializeParams{ProtocolVersion: "2025-06-18"},
		Extra: &mcp.RequestExtra{Header: http.Header{carrierHeader: {"truth51"}}}}
	served := false
	next := func(context.Context, string, mcp.Request) (mcp.Result, error) {
		served = true
		return &mcp.InitializeResult{}, nil
	}
	_, err := g.initialize(t.Context(), "initialize", req, next)
	if served || !errors.Is(err, errSessionReleasing) || strings.Contains(err.Error(), "shutting down") || !strings.Contains(err.Error(), "start a new session") {
		t.Fatalf("initialize on a session being released: served %v, err %v; want refused, saying the session is being closed", served, err)
	}
	if g.root.Err() != nil {
		t.Fatal("the gateway is closing; the test wants it running")
	}

	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.initialize(t.Context(), "initialize", req, next); served || !errors.Is(err, ErrShutdown) {
		t.Fatalf("initialize after Close: served %v, err %v; want ErrShutdown", served, err)
	}
}
