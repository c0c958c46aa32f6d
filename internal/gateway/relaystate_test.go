package gateway

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
)

// wrappingStater is a RequestStater whose RelayState marks what it
// wrapped, so that a test sees whether the upstream's state was wrapped
// (its other methods are not called here).
type wrappingStater struct{ RequestStater }

func (wrappingStater) RelayState(_ gate.Call, upstream string) (string, error) {
	return "wrapped(" + strings.Repeat("x", len(upstream)) + ")", nil
}

// TestRelayNeverHandsOutTheUpstreamsRequestState: an upstream's answer
// with a requestState but no inputRequests (an upstream breaking its
// revision, or a state-only round) reaches the agent with toolgate's
// wrapped state, or fails without a key to sign one: the upstream's
// state is never handed out as it is (tools/call and prompts/get).
func TestRelayNeverHandsOutTheUpstreamsRequestState(t *testing.T) {
	const secret = "upstream-secret"
	for _, tc := range []struct {
		name   string
		stater RequestStater
	}{{"with a key", wrappingStater{}}, {"without a key", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Gateway{opts: Options{MRTR: tc.stater}}
			res, err := g.relayResult(gate.Call{}, &mcp.CallToolResult{RequestState: secret})
			var st string
			if res != nil {
				st = res.RequestState
			}
			checkRelayed(t, "tools/call", st, err, tc.stater != nil)
			pr, err := g.relayPrompt(gate.Call{}, &mcp.GetPromptResult{RequestState: secret})
			st = ""
			if pr != nil {
				st = pr.RequestState
			}
			checkRelayed(t, "prompts/get", st, err, tc.stater != nil)

			// A plain answer passes through untouched.
			plain := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
			if got, err := g.relayResult(gate.Call{}, plain); err != nil || got != plain {
				t.Fatalf("plain result: got %v, %v; want it unchanged", got, err)
			}
		})
	}
}

func checkRelayed(t *testing.T, what, state string, err error, signs bool) {
	t.Helper()
	if strings.Contains(state, "upstream-secret") {
		t.Fatalf("%s: the agent got the upstream's requestState %q as it is", what, state)
	}
	if signs && (err != nil || !strings.HasPrefix(state, "wrapped(")) {
		t.Fatalf("%s: state %q, err %v; want the state wrapped", what, state, err)
	}
	if !signs && err == nil {
		t.Fatalf("%s: no error without a key to sign the state (got state %q)", what, state)
	}
}
