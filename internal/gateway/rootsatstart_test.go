package gateway

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rootsAtStartServer is an upstream that, like the filesystem server,
// asks its client for roots as soon as it is initialized, before any call;
// its tool roots_at_start returns what it got.
func rootsAtStartServer() *mcp.Server {
	got := make(chan string, 1)
	s := mcp.NewServer(&mcp.Implementation{Name: "roots-at-start", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(ctx context.Context, req *mcp.InitializedRequest) {
			ss := req.Session
			go func() {
				//lint:ignore SA1019 a test of roots through the gateway.
				res, err := ss.ListRoots(context.WithoutCancel(ctx), nil)
				if err != nil {
					got <- "roots failed: " + err.Error()
					return
				}
				var uris []string
				for _, r := range res.Roots {
					uris = append(uris, r.URI)
				}
				got <- strings.Join(uris, " ")
			}()
		},
	})
	s.AddTool(&mcp.Tool{Name: "roots_at_start", InputSchema: objectSchema},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case v := <-got:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	return s
}

// TestRootsAskedAtInitialization: a per-agent stdio server that asks for
// roots the moment it is initialized (as @modelcontextprotocol/server-
// filesystem does) gets the roots of the agent it serves. Toolgate used to
// look the agent up by the upstream session that Connect had not yet
// returned, so a question that beat Connect's return was refused and the
// server fell back to its own directories (TestFilesystemRoots flaked under
// load). The window is a few microseconds: this test failed on the old code
// reliably only with a delay put between Connect's return and the lookup's
// registration; on a loaded machine it fails without one.
func TestRootsAskedAtInitialization(t *testing.T) {
	up := ServerConfig{Name: "up", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{envUpstream: "stdio-roots-at-start"}}
	g := newGateway(t, []ServerConfig{up}, allowAll(), nil)
	base := serveHTTP(t, g, nil)
	for _, who := range []string{"alice", "bob"} {
		opts, setup := capableClient(who, &agentRecord{}, false)
		token := map[string]string{"alice": aliceToken, "bob": bobToken}[who]
		cs := connectAgent(t, base, token, opts, setup)
		// Several sessions each: each opens its own server process, and
		// each process asks at once.
		for range 3 {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__roots_at_start", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := textOf(t, res), "file:///"+who; got != want {
				t.Fatalf("%s: roots asked at initialization = %q, want %q", who, got, want)
			}
			// A new agent session for the next round.
			_ = cs.Close()
			cs = connectAgent(t, base, token, opts, setup)
		}
		_ = cs.Close()
	}
}
