package policy

import (
	"strings"
	"testing"
)

// TestMonitorMode checks monitor mode: a monitored rule never decides; the
// decision says what it would have done when that is stricter; a rule
// with monitor: false stays enforced under policy.enforce: false.
func TestMonitorMode(t *testing.T) {
	off, on := ptr(false), ptr(true)
	cases := []struct {
		name        string
		policy      *Policy
		call        Call
		want        Effect
		wantRule    string
		wantMonitor Monitor
	}{
		{
			name:        "monitored deny: the call proceeds, would_deny",
			policy:      newPolicy(Allow, Rule{Name: "no delete", Tools: []string{"delete"}, Effect: Deny, Monitor: on}),
			call:        Call{Server: "fs", Tool: "delete"},
			want:        Allow,
			wantRule:    DefaultRule,
			wantMonitor: Monitor{Verdict: WouldDeny, Rule: "no delete"},
		},
		{
			name:        "monitored approve over an allow rule: would_hold",
			policy:      newPolicy(Deny, Rule{Name: "reads", Effect: Allow}, Rule{Name: "watch", Tools: []string{"read"}, Effect: Approve, Monitor: on}),
			call:        Call{Server: "fs", Tool: "read"},
			want:        Allow,
			wantRule:    "reads",
			wantMonitor: Monitor{Verdict: WouldHold, Rule: "watch"},
		},
		{
			name:        "a monitored deny does not stop an enforced approval",
			policy:      newPolicy(Approve, Rule{Name: "no write", Tools: []string{"write"}, Effect: Deny, Monitor: on}),
			call:        Call{Server: "fs", Tool: "write"},
			want:        Approve,
			wantRule:    DefaultRule,
			wantMonitor: Monitor{Verdict: WouldDeny, Rule: "no write"},
		},
		{
			name:     "nothing to report when the enforced decision is as strict",
			policy:   newPolicy(Allow, Rule{Name: "d1", Effect: Deny}, Rule{Name: "d2", Effect: Deny, Monitor: on}),
			call:     Call{Server: "fs", Tool: "x"},
			want:     Deny,
			wantRule: "d1",
		},
		{
			name: "enforce: false puts the default in monitor mode",
			policy: func() *Policy {
				p := newPolicy(Deny)
				p.Enforce = off
				return p
			}(),
			call:        Call{Server: "fs", Tool: "x"},
			want:        Allow,
			wantRule:    DefaultRule,
			wantMonitor: Monitor{Verdict: WouldDeny, Rule: DefaultRule},
		},
		{
			name: "enforce: false, rules without monitor: false are monitored",
			policy: func() *Policy {
				p := newPolicy(Allow, Rule{Name: "hold writes", Tools: []string{"write"}, Effect: Approve})
				p.Enforce = off
				return p
			}(),
			call:        Call{Server: "fs", Tool: "write"},
			want:        Allow,
			wantRule:    DefaultRule,
			wantMonitor: Monitor{Verdict: WouldHold, Rule: "hold writes"},
		},
		{
			name: "enforce: false, monitor: false keeps a rule enforced",
			policy: func() *Policy {
				p := newPolicy(Allow,
					Rule{Name: "never delete", Tools: []string{"delete"}, Effect: Deny, Monitor: off},
					Rule{Name: "trial", Tools: []string{"delete"}, Effect: Approve})
				p.Enforce = off
				return p
			}(),
			call:     Call{Server: "fs", Tool: "delete"},
			want:     Deny,
			wantRule: "never delete",
		},
		{
			name: "monitored approve rules do not change enforced approval parameters",
			policy: newPolicy(Allow,
				Rule{Name: "two", Effect: Approve, Approval: &Approval{Approvals: 2}},
				Rule{Name: "three", Effect: Approve, Approval: &Approval{Approvals: 3}, Monitor: on}),
			call:     Call{Server: "fs", Tool: "x"},
			want:     Approve,
			wantRule: "two",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := eval(t, mustCompile(t, c.policy), c.call)
			if d.Effect != c.want || d.Rule != c.wantRule || d.Monitor != c.wantMonitor {
				t.Errorf("got %s by %q, monitor %+v; want %s by %q, monitor %+v", d.Effect, d.Rule, d.Monitor, c.want, c.wantRule, c.wantMonitor)
			}
			if d.Effect == Approve && d.Approval.Approvals != 2 && c.name == "monitored approve rules do not change enforced approval parameters" {
				t.Errorf("approvals %d, want 2 (the monitored rule's 3 must not count)", d.Approval.Approvals)
			}
		})
	}
}

// TestMonitorValidation checks that monitor is refused on allow rules and
// that InMonitorMode lists what is monitored.
func TestMonitorValidation(t *testing.T) {
	p := newPolicy(Allow, Rule{Name: "a", Effect: Allow, Monitor: ptr(true)})
	if errs := p.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "monitor: only deny and approve rules") {
		t.Errorf("Validate = %v", errs)
	}
	p = newPolicy(Allow, Rule{Name: "d", Effect: Deny, Monitor: ptr(true)}, Rule{Name: "e", Effect: Deny, Monitor: ptr(false)})
	if got := p.InMonitorMode(); len(got) != 1 || !strings.Contains(got[0], `"d"`) {
		t.Errorf("InMonitorMode = %q", got)
	}
	p.Enforce = ptr(false)
	if got := p.InMonitorMode(); len(got) != 2 || !strings.Contains(got[0], "policy.enforce is false") {
		t.Errorf("InMonitorMode = %q", got)
	}
	if got := newPolicy(Allow).InMonitorMode(); got != nil {
		t.Errorf("InMonitorMode of an enforced policy = %q", got)
	}
}
