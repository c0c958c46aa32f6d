package policy

import (
	"testing"
)

// selectorBase is base() with rules that carry the issue 12 selectors.
func selectorBase() *Policy {
	p := base()
	p.Rules = append(p.Rules,
		Rule{Name: "small pay", Server: "pay", Tools: []string{"transfer"}, Effect: Allow, When: "args.amount <= 100"},
		Rule{Name: "git reads", Server: "git", Tools: []string{"run"}, Effect: Allow, Command: &CommandMatch{Argument: "command", Match: []string{"git status"}}},
		Rule{Name: "ro", Server: "fs", Effect: Allow, Annotations: &AnnotationSelector{ReadOnly: ptr(true)}},
		Rule{Name: "ops", Server: "sh", Effect: Allow, Principals: []string{"group:ops"}},
		Rule{Name: "trial", Server: "sh", Tools: []string{"rm"}, Effect: Deny, Monitor: ptr(true)},
	)
	return p
}

// TestNarrowsSelectors checks issue 12's narrowing rule: any change of a
// when, command, annotations or principals selector widens unless it is on
// an added deny rule; monitor changes narrow only towards enforcement.
func TestNarrowsSelectors(t *testing.T) {
	cases := []struct {
		name   string
		change func(p *Policy)
		ok     bool
		reason string
	}{
		{name: "when tightened still counts as widening", change: func(p *Policy) { p.Rules[4].When = "args.amount <= 10" }, reason: `rule "small pay": when changed`},
		{name: "when removed", change: func(p *Policy) { p.Rules[4].When = "" }, reason: "when changed"},
		{name: "command pattern added", change: func(p *Policy) { p.Rules[5].Command.Match = append(p.Rules[5].Command.Match, "git log *") }, reason: `rule "git reads": command changed`},
		{name: "command argument changed", change: func(p *Policy) { p.Rules[5].Command.Argument = "cmd" }, reason: "command changed"},
		{name: "command removed", change: func(p *Policy) { p.Rules[5].Command = nil }, reason: "command changed"},
		{name: "annotations changed", change: func(p *Policy) {
			p.Rules[6].Annotations = &AnnotationSelector{ReadOnly: ptr(true), OpenWorld: ptr(false)}
		}, reason: `rule "ro": annotations changed`},
		{name: "principals narrowed still widens", change: func(p *Policy) { p.Rules[7].Principals = []string{"alice"} }, reason: `rule "ops": principals changed`},
		{name: "principals reordered is no change", change: func(p *Policy) { p.Rules[7].Principals = []string{"group:ops", "group:ops"} }, ok: true},
		{name: "added deny with selectors narrows", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "no big", Server: "pay", Effect: Deny, When: "args.amount > 10000", Principals: []string{"group:bots"},
				Command: &CommandMatch{Argument: "memo", Match: []string{"rm *"}}, Annotations: &AnnotationSelector{Destructive: ptr(true)}})
		}, ok: true, reason: `rule "no big" added (deny server "pay" when "args.amount > 10000"`},
		{name: "added approve with when widens", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "big", Server: "pay", Effect: Approve, When: "args.amount > 100"})
		}, reason: "only an added deny rule may carry"},
		{name: "added approve with principals widens", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "bots", Effect: Approve, Principals: []string{"group:bots"}})
		}, reason: "only an added deny rule may carry"},
		{name: "enforcing a monitored rule narrows", change: func(p *Policy) { p.Rules[8].Monitor = nil }, ok: true, reason: `rule "trial": now enforced`},
		{name: "monitoring an enforced rule widens", change: func(p *Policy) { p.Rules[1].Monitor = ptr(true) }, reason: `rule "never delete": now in monitor mode`},
		{name: "enforce false widens", change: func(p *Policy) { p.Enforce = ptr(false) }, reason: "policy.enforce changed from true to false"},
		{name: "list_denied is not about decisions", change: func(p *Policy) { p.ListDenied = true }, ok: true, reason: "policy.list_denied changed from false to true"},
		{name: "added monitored deny narrows", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "watch", Effect: Deny, Monitor: ptr(true)})
		}, ok: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := selectorBase()
			if errs := old.Validate(); errs != nil {
				t.Fatalf("base invalid: %v", errs)
			}
			n := clonePolicy(old)
			c.change(n)
			ok, reasons := Narrows(old, n)
			if ok != c.ok {
				t.Fatalf("Narrows = %v, %q; want %v", ok, reasons, c.ok)
			}
			if c.reason != "" && !containsSub(reasons, c.reason) {
				t.Errorf("reasons %q contain no %q", reasons, c.reason)
			}
		})
	}
	// Enforcing a whole policy narrows.
	old := selectorBase()
	old.Enforce = ptr(false)
	n := clonePolicy(old)
	n.Enforce = nil
	if ok, reasons := Narrows(old, n); !ok || !containsSub(reasons, "policy.enforce changed from false to true") {
		t.Errorf("enforce false→true: %v %q", ok, reasons)
	}
}

// TestRevisionStableForOldPolicies checks that a policy using none of the
// issue 12 keys keeps the revision it had before they existed (stored
// revisions and instances mid-upgrade must agree). The digest was computed
// with the code before issue 12.
func TestRevisionStableForOldPolicies(t *testing.T) {
	p := newPolicy(Approve,
		Rule{Name: "reads", Server: "fs", Tools: []string{"read_*", "list_*"}, Effect: Allow},
		Rule{Tools: []string{"*delete*"}, Effect: Deny},
		Rule{Name: "pay", Server: "pay", Effect: Approve, Approval: &Approval{Approvals: 2, Approvers: []string{"group:ops"}}},
	)
	const want = "sha256:b243e401b42692040d18a7a93edde9f25095a18b5b9c6ac29b3a01817c201562"
	if got := Revision(p); got != want {
		t.Errorf("Revision = %s, want %s", got, want)
	}
	p.Enforce = ptr(true) // the default, written out
	if got := Revision(p); got != want {
		t.Errorf("enforce: true changed the revision to %s", got)
	}
	for i, ch := range []func(q *Policy){
		func(q *Policy) { q.Enforce = ptr(false) },
		func(q *Policy) { q.ListDenied = true },
		func(q *Policy) { q.Rules[0].When = "true" },
		func(q *Policy) { q.Rules[0].Principals = []string{"a"} },
		func(q *Policy) { q.Rules[1].Monitor = ptr(true) },
		func(q *Policy) { q.Rules[0].Annotations = &AnnotationSelector{ReadOnly: ptr(true)} },
		func(q *Policy) { q.Rules[0].Command = &CommandMatch{Argument: "c", Match: []string{"ls"}} },
	} {
		q := clonePolicy(p)
		ch(q)
		if Revision(q) == want {
			t.Errorf("change %d: revision unchanged", i)
		}
	}
}
