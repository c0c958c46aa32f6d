//go:build steptrace

package gateway

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/procs"
)

// TestStepTrace prints, per step of the lean in-path (stepMark), the p25,
// p50 and p75 of the time since the previous step, over calls made one at
// a time through the front to a shared stdio upstream.
func TestStepTrace(t *testing.T) {
	p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
	sc := stdioServer("up")
	sc.Sessions = SessionsShared
	g, err := New(t.Context(), []ServerConfig{sc}, gate.New(nil, policy.NewHolder(p), nil), &Options{Load: &procs.Load{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	h, err := g.Handler(testAuth, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	cs := benchConnect(t, ts.URL+"/mcp", aliceToken)
	for i := range 3000 {
		if i == 200 {
			stepRows()
		}
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs}); err != nil {
			t.Fatal(err)
		}
	}
	rows := stepRows()
	prev := 0
	for _, i := range []int{1, 2, 3, 4, 5, 6, 24, 25, 26, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 27, 28, 22, 23} {
		var d []int64
		for _, r := range rows {
			if r[i] != 0 && r[prev] != 0 {
				d = append(d, r[i]-r[prev])
			}
		}
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		fmt.Printf("step %2d (from %2d): p25 %6.2f p50 %6.2f p75 %6.2f µs (n=%d)\n", i, prev, float64(d[len(d)/4])/1e3, float64(d[len(d)/2])/1e3, float64(d[3*len(d)/4])/1e3, len(d))
		prev = i
	}
}
