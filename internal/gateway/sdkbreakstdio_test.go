package gateway

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// envSDKBreakStdio makes the test binary, started as a stdio upstream,
// serve sdkBreakServer instead of running the tests.
const envSDKBreakStdio = "TOOLGATE_SDKBREAK_STDIO"

func init() {
	if os.Getenv(envSDKBreakStdio) == "" {
		return
	}
	if err := sdkBreakServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// sdkBreakServer has "wait", which answers what it reads from the named
// pipe at path, and "stray", which writes to stdout, between the SDK's own
// messages, a line that is not JSON, an answer to an id nobody asked
// under, a message whose "jsonrpc" is not "2.0" and an array, and then
// answers "stray done".
func sdkBreakServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sdkbreak", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "wait", InputSchema: objectSchema}, readFIFO)
	s.AddTool(&mcp.Tool{Name: "stray", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, l := range []string{
			`{"jsonrpc":"2.0","id":987654321,"result":{"content":[]}}`,
			`this line is not JSON-RPC {"jsonrpc":"2.0"`,
			`{"jsonrpc":"1.0","method":"notifications/progress","params":{}}`,
			`[{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`,
		} {
			_, _ = os.Stdout.WriteString(l + "\n") // one Write: never inside the SDK's lines
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stray done"}}}, nil
	})
	return s
}

// TestStdioStrayLinesFailNoCall: a stdio upstream that writes lines the
// go-sdk cannot read (not JSON, a batch, a wrong version) or an answer to
// an id nobody asked under, while two calls are in flight on the SDK path
// (progress tokens), fails none of them: the stray call and the call in
// flight beside it get their results, on the same upstream session (the
// SDK ends a stdio session on a line it cannot decode; toolgate's stdout
// guard skips those lines, and the SDK drops an answer to an unknown id).
func TestStdioStrayLinesFailNoCall(t *testing.T) {
	verifyNoLeaks(t)
	sc := ServerConfig{Name: "up", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{envSDKBreakStdio: "1"}}
	g := newGateway(t, []ServerConfig{sc}, allowAll(), nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	before := waitUpstream(t, g, "up", nil)

	path := mkfifo(t)
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	waited := make(chan answer, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "up__wait", Arguments: map[string]any{"path": path}}
		sdkPathToken(p, "wait")
		res, err := cs.CallTool(context.WithoutCancel(t.Context()), p)
		waited <- answer{res, err}
	}()
	w, err := os.OpenFile(path, os.O_WRONLY, 0) //nolint:gosec // G304: the test's own named pipe
	if err != nil {                             // opened once the upstream opened it: the call is in flight
		t.Fatal(err)
	}
	p := &mcp.CallToolParams{Name: "up__stray"}
	sdkPathToken(p, "stray")
	res, err := cs.CallTool(t.Context(), p)
	if err != nil || res.IsError || textOf(t, res) != "stray done" {
		t.Errorf("the stray call: %v %+v", err, res)
	}
	_, _ = io.WriteString(w, "still here")
	_ = w.Close()
	if a := <-waited; a.err != nil || a.res.IsError || textOf(t, a.res) != "still here" {
		t.Errorf("the call in flight beside it: %v %+v", a.err, a.res)
	}
	if now := waitUpstream(t, g, "up", nil); now != before {
		t.Error("the upstream session was replaced")
	}
}
