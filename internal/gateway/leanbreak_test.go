package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestLeanCallDispatchesTheRewrittenArguments: with Options.Rewrite set,
// the gate decides on the rewritten argument bytes, so the upstream must get
// those bytes, on the lean front as on the SDK path (a lean call once sent
// the agent's own bytes, which no policy had seen).
func TestLeanCallDispatchesTheRewrittenArguments(t *testing.T) {
	for _, disable := range []bool{false, true} {
		db := sqlitetest.Open(t)
		pol := policy.NewHolder(&policy.Policy{Default: policy.Allow,
			Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute}})
		gt := gate.New(db, pol, &gate.Options{})
		h := newHooks()
		trail := &leanTrail{}
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gt, &Options{
			Rewrite: func(_, _ string, _ json.RawMessage) json.RawMessage { return json.RawMessage(`{"rewritten":true}`) },
		})
		g.leanHook = trail.hook
		cs := connectHTTP(t, serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: disable}), aliceToken, nil, nil)
		if !disable {
			waitInitialized(t, g, cs.ID())
		}
		trail.take()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{"agent":"bytes"}`)})
		if err != nil || res.IsError {
			t.Fatalf("lean off %v: %v %+v", disable, err, res)
		}
		if got := textOf(t, res); got != `{"rewritten":true}` {
			t.Errorf("lean off %v: the upstream got %s, want the rewritten arguments the gate decided on", disable, got)
		}
		if got := trail.take(); !disable && (len(got) != 1 || !got[0]) {
			t.Errorf("lean trail %v, want [true]", got)
		}
	}
}
