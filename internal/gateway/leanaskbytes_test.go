package gateway

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newHTMLAskServer is an upstream whose tool "html" asks its client for a
// sampling and an elicitation whose texts hold <, > and &.
func newHTMLAskServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "html", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "html", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			//lint:ignore SA1019 a test of sampling through the gateway.
			if _, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, SystemPrompt: "<s> & </s>",
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "<b>a & b</b>"}}}}); err != nil {
				return nil, fmt.Errorf("sampling: %w", err)
			}
			if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "<q> & </q>"}); err != nil {
				return nil, fmt.Errorf("elicitation: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	return s
}

// TestLeanAskSameBytesAsSDKPath (fixes20): the lean front encoded the
// sampling and elicitation requests it writes on a lean call's stream with
// json.Marshal, which escapes <, > and & (\u003c…), while the SDK path's
// jsonrpc2 encodes without HTML escaping: the same request reached the
// agent as other bytes on the lean path. Both now send the same bytes (but
// for the id, which is the front's own).
func TestLeanAskSameBytesAsSDKPath(t *testing.T) {
	ids := regexp.MustCompile(`"id":("` + leanAskPrefix + `[A-Z0-9]+"|[0-9]+)`)
	var got [2][]string
	for i, lean := range []bool{true, false} {
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newHTMLAskServer())}}, leanGate(t), nil)
		trail := &leanTrail{}
		g.leanHook = trail.hook
		base := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: !lean})
		cs, wire := connectTeeAgent(t, base, &agentRecord{})
		if lean {
			waitInitialized(t, g, cs.ID())
		}
		trail.take()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__html", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("lean %v: %+v %v", lean, res, err)
		}
		if tr := trail.take(); lean != (len(tr) == 1 && tr[0]) {
			t.Fatalf("lean %v: trail %v", lean, tr)
		}
		for line := range strings.Lines(wire.String()) {
			data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
			if ok && (strings.Contains(data, `"method":"`+methodCreateMessage+`"`) || strings.Contains(data, `"method":"`+methodElicit+`"`)) {
				got[i] = append(got[i], ids.ReplaceAllString(data, `"id":ID`))
			}
		}
	}
	if len(got[0]) != 2 || len(got[1]) != 2 {
		t.Fatalf("requests seen: lean %q, SDK %q; want the sampling and the elicitation on each", got[0], got[1])
	}
	for j := range got[0] {
		if got[0][j] != got[1][j] {
			t.Errorf("the request differs between the paths:\nlean: %s\nSDK:  %s", got[0][j], got[1][j])
		}
	}
}
