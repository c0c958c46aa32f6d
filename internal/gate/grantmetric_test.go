package gate

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/approval"
	"toolgate/internal/telemetry"
)

// TestGrantedCallCountedAsGrant: toolgate_tool_calls_total says what
// decided a call (newuser4): the call that asked for the approval and the
// re-send that ran through it are "approve", a call a grant allowed in
// place of an approval is "grant", not "approve".
func TestGrantedCallCountedAsGrant(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := newClock()
	f := newFixture(t, time.Hour, &Options{Now: clk.now, RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour, Metrics: telemetry.NewMetrics(reg)})
	f.pol.p.Store(retryPolicy(time.Hour))
	g := grantVia(t, f, writeArgs("/tmp/a"), alice, approval.GrantTerms{TTL: time.Hour})
	if a := f.gate.Admit(t.Context(), writeArgs("/tmp/b")); !a.Allowed || a.Grant != g.ID {
		t.Fatalf("call within the grant: %+v, want allowed by grant %s", a, g.ID)
	}
	count := func(effect string) float64 {
		return counterValue(t, reg, "toolgate_tool_calls_total", map[string]string{"server": "fs", "effect": effect})
	}
	if got := count("approve"); got != 2 {
		t.Errorf("effect approve counted %v, want 2 (the held call and its re-send through the approval)", got)
	}
	if got := count(telemetry.EffectGrant); got != 1 {
		t.Errorf("effect grant counted %v, want 1 (the call the grant allowed)", got)
	}
}
