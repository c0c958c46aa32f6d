package gate

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
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

// TestSessionHeldCallCountedAsApprove: a call the deployment policy
// allows but its session's require_approval sends to a human counts as
// "approve" (it counted as "allow"), and one a grant then allows as
// "grant"; a call the session does not hold stays "allow".
func TestSessionHeldCallCountedAsApprove(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := newClock()
	holder := policy.NewHolder(allowAll())
	db := newFixture(t, time.Minute, nil).db
	sessAp := allowAll().Approval
	sessAp.Mode = policy.ModeRetry
	g := New(db, holder, &Options{Now: clk.now, ServerExists: knownServers, SessionApproval: sessAp, RetryWait: time.Nanosecond, Metrics: telemetry.NewMetrics(reg)})
	f := &fixture{db: db, gate: g}
	_, p := mustSession(t, g, host, session.NewSession{
		Tools:           []string{"fs"},
		RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}},
	})
	c := sessionCall(p, "fs", "write_file")
	gr := grantVia(t, f, c, alice, approval.GrantTerms{TTL: time.Hour})
	c2 := c
	c2.Arguments = []byte(`{"path":"/b"}`)
	if a := g.Admit(t.Context(), c2); !a.Allowed || a.Grant != gr.ID {
		t.Fatalf("session call under the grant: %+v", a)
	}
	if a := g.Admit(t.Context(), sessionCall(p, "fs", "read_file")); !a.Allowed {
		t.Fatalf("session read: %+v, want allowed", a)
	}
	for effect, want := range map[string]float64{"approve": 2, telemetry.EffectGrant: 1, "allow": 1} {
		if got := counterValue(t, reg, "toolgate_tool_calls_total", map[string]string{"server": "fs", "effect": effect}); got != want {
			t.Errorf("effect %s counted %v, want %v", effect, got, want)
		}
	}
}
