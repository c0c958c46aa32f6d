package e2e

import (
	"testing"
)

// TestDecisionMetrics scrapes the admin listener's /metrics (no token)
// before and after one approved and one denied held call, and checks the
// exact deltas of the approval metrics.
func TestDecisionMetrics(t *testing.T) {
	g, _ := startUpstreamGateway(t, heldEchoPolicy)
	cs := g.connect(t, nil, nil)
	before := scrapeMetrics(t, g.Admin)

	okCall := callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"m":"approve me"}`))
	a := awaitPendingArgs(t, g.Admin, `{"m":"approve me"}`)
	mustCLI(t, g.Admin, "approve", a.ID)
	mustOK(t, await(t, okCall))

	denied := callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"m":"deny me"}`))
	d := awaitPendingArgs(t, g.Admin, `{"m":"deny me"}`)
	mustCLI(t, g.Admin, "deny", d.ID, "--reason", "metrics test")
	mustIsError(t, await(t, denied))

	after := scrapeMetrics(t, g.Admin)
	for _, c := range []struct {
		series string
		delta  float64
	}{
		{`toolgate_approval_decisions_total{decision="approved"}`, 1},
		{`toolgate_approval_decisions_total{decision="denied"}`, 1},
		{`toolgate_approval_decisions_total{decision="expired"}`, 0},
		{`toolgate_approval_decisions_total{decision="cancelled"}`, 0},
		{`toolgate_approval_requests_total`, 2},
		{`toolgate_tool_calls_total{effect="approve",server="t"}`, 2},
		{`toolgate_approval_wait_seconds_count`, 2},
	} {
		if got := after[c.series] - before[c.series]; got != c.delta {
			t.Errorf("%s went from %v to %v (delta %v), want delta %v", c.series, before[c.series], after[c.series], got, c.delta)
		}
	}
	for _, name := range []string{`toolgate_approval_decisions_total{decision="approved"}`, `toolgate_approval_decisions_total{decision="denied"}`, `toolgate_approvals_pending`} {
		if _, ok := after[name]; !ok {
			t.Errorf("/metrics has no series %s", name)
		}
	}
}
