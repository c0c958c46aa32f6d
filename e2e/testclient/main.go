// Command testclient is a one-shot MCP agent for toolgate's end-to-end
// tests: it connects to a Streamable HTTP endpoint with a bearer token,
// calls one tool, prints the outcome and exits. Tests run it as a separate
// process so that they can kill it (SIGKILL) while its call is held.
//
//	testclient -mcp URL -tool NAME [-args JSON]
//
// The bearer token comes from $TESTCLIENT_TOKEN. On a tool result it prints
// one line, "ok <text>" or "isError <text>" (the joined text content), and
// exits 0; a connection or JSON-RPC error goes to stderr with exit status 1,
// and a usage error exits 2.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	endpoint := flag.String("mcp", "", "Streamable HTTP endpoint, http://host:port/mcp")
	tool := flag.String("tool", "", "name of the tool to call")
	args := flag.String("args", "{}", "tool arguments, a JSON object, sent as given")
	flag.Parse()
	if *endpoint == "" || *tool == "" || flag.NArg() > 0 || !json.Valid([]byte(*args)) {
		fmt.Fprintln(os.Stderr, "usage: testclient -mcp URL -tool NAME [-args JSON]")
		return 2
	}
	res, err := call(ctx, *endpoint, os.Getenv("TESTCLIENT_TOKEN"), *tool, json.RawMessage(*args))
	if err != nil {
		fmt.Fprintln(os.Stderr, "testclient:", err)
		return 1
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	word := "ok"
	if res.IsError {
		word = "isError"
	}
	fmt.Printf("%s %s\n", word, b.String())
	return 0
}

// bearer adds "Authorization: Bearer token" to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func call(ctx context.Context, endpoint, token, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-testclient", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: bearer{token}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // the restart tests are about 2025-era sessions
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", tool, err)
	}
	if res == nil {
		return nil, errors.New("call returned no result")
	}
	return res, nil
}
