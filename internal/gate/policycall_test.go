package gate

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/telemetry"
)

// counting is a policy.Holder that records every call it evaluates.
type counting struct {
	*policy.Holder
	mu    sync.Mutex
	calls []policy.Call
}

func (c *counting) Evaluate(pc policy.Call) (policy.Decision, error) {
	c.mu.Lock()
	c.calls = append(c.calls, pc)
	c.mu.Unlock()
	return c.Holder.Evaluate(pc)
}

func (c *counting) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// TestConsumeReusesTheAdmitDecision checks issue 13's policy goal: a held
// call is evaluated once at admission and, at consume, the admission's
// decision is reused while the policy revision has not moved.
func TestConsumeReusesTheAdmitDecision(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	pol := &counting{Holder: policy.NewHolder(testPolicy(time.Minute))}
	g := New(f.db, pol, &f.gate.opts)

	ch := admitAsync(t.Context(), g, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("admission %+v, want allowed", a)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	if n := pol.count(); n != 1 {
		t.Errorf("%d evaluations for one held call, want 1 (admit; consume reuses it)", n)
	}

	// An allowed call is evaluated once too.
	if a := g.Admit(t.Context(), Call{Principal: agent, Server: "fs", Tool: "read_file", Arguments: []byte(`{}`)}); !a.Allowed {
		t.Fatalf("read: %+v", a)
	}
	if n := pol.count(); n != 2 {
		t.Errorf("%d evaluations after an allowed call, want 2", n)
	}
}

// TestConsumeEvaluatesAgainWhenThePolicyMoved checks that a reload while a
// call is held makes consume evaluate again, and that a deny in the new
// policy invalidates the approval.
func TestConsumeEvaluatesAgainWhenThePolicyMoved(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	pol := &counting{Holder: policy.NewHolder(testPolicy(time.Minute))}
	g := New(f.db, pol, &f.gate.opts)

	ch := admitAsync(t.Context(), g, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	stricter := testPolicy(time.Minute)
	stricter.Rules = append(stricter.Rules, policy.Rule{Name: "no writes", Tools: []string{"write_*"}, Effect: policy.Deny})
	pol.Store(stricter)
	if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if a.Allowed || !strings.Contains(a.Message, "no writes") {
		t.Fatalf("admission %+v, want a refusal naming the new deny rule", a)
	}
	if n := pol.count(); n != 2 {
		t.Errorf("%d evaluations, want 2 (admit, and consume under the new revision)", n)
	}
	got, err := f.db.GetRequest(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != approval.StateInvalidated {
		t.Errorf("state %s, want invalidated", got.State)
	}
}

// TestMonitorModeAdmits checks that a call a monitored rule would deny
// runs, that its admission carries the verdict, and that it is counted.
func TestMonitorModeAdmits(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, time.Minute, &Options{Metrics: telemetry.NewMetrics(reg)})
	p := testPolicy(time.Minute)
	p.Rules = append(p.Rules, policy.Rule{Name: "trial: no reads", Tools: []string{"read_*"}, Effect: policy.Deny, Monitor: ptrTrue()})
	g := New(f.db, policy.NewHolder(p), &f.gate.opts)
	a := g.Admit(t.Context(), Call{Principal: agent, Server: "fs", Tool: "read_file", Arguments: []byte(`{}`)})
	if !a.Allowed || a.Monitor != (policy.Monitor{Verdict: policy.WouldDeny, Rule: "trial: no reads"}) {
		t.Fatalf("admission %+v, want allowed with a would_deny verdict", a)
	}
	if got := counterValue(t, reg, "toolgate_policy_monitor_total", map[string]string{"server": "fs", "verdict": policy.WouldDeny}); got != 1 {
		t.Errorf("toolgate_policy_monitor_total = %v, want 1", got)
	}
	// The call is counted with the effect it got.
	if got := counterValue(t, reg, "toolgate_tool_calls_total", map[string]string{"server": "fs", "effect": "allow"}); got != 1 {
		t.Errorf("toolgate_tool_calls_total{effect=allow} = %v, want 1", got)
	}
	if n, _ := f.db.CountPending(t.Context(), ""); n != 0 {
		t.Errorf("%d pending requests, want 0", n)
	}
}

func ptrTrue() *bool { v := true; return &v }

// counterValue returns the value of the counter name with labels in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestPolicySeesTheCall checks what the gate passes to the policy: the
// principal's groups, tenant and on_behalf_of, the session, the raw
// arguments, and the annotations of Options.Annotations.
func TestPolicySeesTheCall(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	p := testPolicy(time.Minute)
	p.Default = policy.Deny
	p.Rules = append(p.Rules, policy.Rule{Name: "ops small reads", Server: "fs", Tools: []string{"stat"}, Effect: policy.Allow,
		Principals:  []string{"group:ops"},
		Annotations: &policy.AnnotationSelector{ReadOnly: ptrTrue()},
		When:        `principal.tenant == "acme" && principal.on_behalf_of == "bob" && args.n < 3 && session == ""`})
	ro := policy.Annotations{ReadOnly: true}
	opts := f.gate.opts
	opts.Annotations = func(server, tool string) *policy.Annotations {
		if server == "fs" && tool == "stat" {
			return &ro
		}
		return nil
	}
	g := New(f.db, policy.NewHolder(p), &opts)
	ops := approval.Principal{ID: "agent-1", Kind: "agent", Groups: []string{"ops"}, Tenant: "acme", OnBehalfOf: "bob"}
	call := func(who approval.Principal, args string) Admission {
		return g.Admit(t.Context(), Call{Principal: who, Server: "fs", Tool: "stat", Arguments: []byte(args)})
	}
	if a := call(ops, `{"n":2}`); !a.Allowed {
		t.Errorf("ops, n=2: %+v, want allowed", a)
	}
	if a := call(ops, `{"n":3}`); a.Allowed {
		t.Errorf("ops, n=3: allowed, want denied")
	}
	if a := call(agent, `{"n":1}`); a.Allowed {
		t.Errorf("not in ops: allowed, want denied")
	}
	// Without trusted annotations the allow rule cannot match.
	g2 := New(f.db, policy.NewHolder(p), &f.gate.opts)
	if a := g2.Admit(t.Context(), Call{Principal: ops, Server: "fs", Tool: "stat", Arguments: []byte(`{"n":1}`)}); a.Allowed {
		t.Errorf("untrusted annotations: allowed, want denied")
	}
}

// TestUsableHidesDeniedTools checks the tools/list filter: a tool the
// policy denies whatever the arguments is hidden unless list_denied.
func TestUsableHidesDeniedTools(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	p := testPolicy(time.Minute)
	p.Rules = append(p.Rules, policy.Rule{Name: "big deletes", Tools: []string{"purge"}, Effect: policy.Deny, When: "args.n > 10"})
	h := policy.NewHolder(p)
	g := New(f.db, h, &f.gate.opts)
	use, err := g.Usable(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]bool{"read_file": true, "write_file": true, "delete_file": false, "purge": true} {
		if got := use(approval.KindToolCall, "fs", tool); got != want {
			t.Errorf("%s visible = %v, want %v", tool, got, want)
		}
	}
	p2 := testPolicy(time.Minute)
	p2.ListDenied = true
	h.Store(p2)
	if use, _ := g.Usable(t.Context(), agent); !use(approval.KindToolCall, "fs", "delete_file") {
		t.Error("list_denied: true still hides delete_file")
	}
	// A gate over a plain Policy (no Listed method) lists everything.
	plain := New(f.db, testPolicy(time.Minute), &f.gate.opts)
	if use, _ := plain.Usable(t.Context(), agent); !use(approval.KindToolCall, "fs", "delete_file") {
		t.Error("a plain policy hides tools")
	}
}
