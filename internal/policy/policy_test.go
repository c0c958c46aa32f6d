package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var defaults = Approval{Timeout: 5 * time.Minute, Mode: ModeHold, Approvals: 1, ValidFor: 10 * time.Minute}

func newPolicy(def Effect, rules ...Rule) *Policy {
	return &Policy{Default: def, Approval: defaults, Rules: rules}
}

// permutations returns every ordering of rules.
func permutations(rules []Rule) [][]Rule {
	if len(rules) <= 1 {
		return [][]Rule{append([]Rule(nil), rules...)}
	}
	var out [][]Rule
	for i := range rules {
		rest := append(append([]Rule(nil), rules[:i]...), rules[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]Rule{rules[i]}, p...))
		}
	}
	return out
}

func TestPrecedenceIgnoresOrder(t *testing.T) {
	allow := Rule{Name: "allow-all", Effect: Allow}
	approve := Rule{Name: "approve-fs", Server: "fs", Effect: Approve}
	deny := Rule{Name: "deny-delete", Tools: []string{"*delete*"}, Effect: Deny}
	other := Rule{Name: "deny-other", Server: "other", Effect: Deny}
	cases := []struct {
		name      string
		rules     []Rule
		def       Effect
		call      Call
		want      Effect
		wantRule  string
		wantMatch []string // as a set; order is checked separately
	}{
		{"deny beats approve and allow", []Rule{allow, approve, deny, other}, Allow, Call{Server: "fs", Tool: "delete_file"}, Deny, "deny-delete", []string{"allow-all", "approve-fs", "deny-delete"}},
		{"approve beats allow", []Rule{allow, approve, deny, other}, Allow, Call{Server: "fs", Tool: "write_file"}, Approve, "approve-fs", []string{"allow-all", "approve-fs"}},
		{"allow when only allow matches", []Rule{allow, approve, deny, other}, Deny, Call{Server: "git", Tool: "status"}, Allow, "allow-all", []string{"allow-all"}},
		{"default deny when nothing matches", []Rule{approve, other}, Deny, Call{Server: "git", Tool: "status"}, Deny, DefaultRule, nil},
		{"default allow when nothing matches", []Rule{approve, other}, Allow, Call{Server: "git", Tool: "status"}, Allow, DefaultRule, nil},
		{"an allow rule beats a default deny", []Rule{allow}, Deny, Call{Server: "x", Tool: "y"}, Allow, "allow-all", []string{"allow-all"}},
		{"a deny rule beats a default allow", []Rule{deny}, Allow, Call{Server: "x", Tool: "bulk_delete"}, Deny, "deny-delete", []string{"deny-delete"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, rules := range permutations(c.rules) {
				p := newPolicy(c.def, rules...)
				d, err := p.Evaluate(c.call)
				if err != nil {
					t.Fatalf("Evaluate: %v", err)
				}
				if d.Effect != c.want || d.Rule != c.wantRule {
					t.Errorf("order %v: got %s by %q, want %s by %q", names(rules), d.Effect, d.Rule, c.want, c.wantRule)
				}
				// Matched is in file order: the order of rules, filtered.
				var want []string
				for _, r := range rules {
					for _, m := range c.wantMatch {
						if r.Name == m {
							want = append(want, m)
						}
					}
				}
				if diff := cmp.Diff(want, d.Matched); diff != "" {
					t.Errorf("order %v: Matched (-want +got):\n%s", names(rules), diff)
				}
			}
		})
	}
}

func names(rules []Rule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Name)
	}
	return out
}

func TestDecidingRuleIsFirstOfItsEffect(t *testing.T) {
	p := newPolicy(Allow,
		Rule{Name: "a1", Effect: Allow},
		Rule{Name: "d1", Effect: Deny},
		Rule{Name: "d2", Effect: Deny},
	)
	d, err := p.Evaluate(Call{Server: "s", Tool: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Rule != "d1" {
		t.Errorf("Rule = %q, want d1", d.Rule)
	}
}

func TestCombineApprovals(t *testing.T) {
	call := Call{Server: "pay", Tool: "transfer"}
	ap := func(name string, a *Approval) Rule {
		return Rule{Name: name, Server: "pay", Effect: Approve, Approval: a}
	}
	cases := []struct {
		name   string
		policy *Policy
		want   Decision
	}{
		{
			name:   "default approve uses policy defaults",
			policy: newPolicy(Approve),
			want:   Decision{Effect: Approve, Rule: DefaultRule, TimeoutRule: DefaultRule, Approval: defaults},
		},
		{
			name:   "one rule without overrides inherits everything",
			policy: newPolicy(Allow, ap("r", nil)),
			want:   Decision{Effect: Approve, Rule: "r", TimeoutRule: "r", Matched: []string{"r"}, Approval: defaults},
		},
		{
			name:   "zero override fields inherit",
			policy: newPolicy(Allow, ap("r", &Approval{Approvals: 2})),
			want: Decision{Effect: Approve, Rule: "r", TimeoutRule: "r", Matched: []string{"r"},
				Approval: Approval{Timeout: 5 * time.Minute, Mode: ModeHold, Approvals: 2, ValidFor: 10 * time.Minute}},
		},
		{
			name: "largest approvals, shortest timeout and valid_for, first mode",
			policy: newPolicy(Allow,
				ap("a", &Approval{Approvals: 2, Timeout: 10 * time.Minute, Mode: ModeRetry}),
				ap("b", &Approval{Approvals: 3, Timeout: 2 * time.Minute, Mode: ModeHold, ValidFor: time.Minute}),
				ap("c", &Approval{Timeout: 20 * time.Minute}),
			),
			want: Decision{Effect: Approve, Rule: "a", TimeoutRule: "b", Matched: []string{"a", "b", "c"},
				Approval: Approval{Timeout: 2 * time.Minute, Mode: ModeRetry, Approvals: 3, ValidFor: time.Minute}},
		},
		{
			name: "mode of the first approve rule even if it inherits",
			policy: newPolicy(Allow,
				Rule{Name: "allow-first", Effect: Allow},
				ap("inherits-hold", nil),
				ap("retry", &Approval{Mode: ModeRetry}),
			),
			want: Decision{Effect: Approve, Rule: "inherits-hold", TimeoutRule: "inherits-hold", Matched: []string{"allow-first", "inherits-hold", "retry"}, Approval: defaults},
		},
		{
			name: "approvers intersect; an empty list does not narrow",
			policy: newPolicy(Allow,
				ap("anyone", nil),
				ap("ops", &Approval{Approvers: []string{"group:ops", "alice", "bob", "alice"}}),
				ap("anyone-too", &Approval{Approvals: 1}),
				ap("sec", &Approval{Approvers: []string{"bob", "carol", "group:ops"}}),
			),
			want: Decision{Effect: Approve, Rule: "anyone", TimeoutRule: "anyone", Matched: []string{"anyone", "ops", "anyone-too", "sec"},
				Approval: Approval{Timeout: 5 * time.Minute, Mode: ModeHold, Approvals: 1, ValidFor: 10 * time.Minute, Approvers: []string{"group:ops", "bob"}}},
		},
		{
			name: "disjoint approvers: nobody is eligible",
			policy: newPolicy(Allow,
				ap("alice", &Approval{Approvers: []string{"alice"}}),
				ap("ops", &Approval{Approvers: []string{"group:ops"}}),
			),
			want: Decision{Effect: Approve, Rule: "alice", TimeoutRule: "alice", Matched: []string{"alice", "ops"}, NoEligibleApprovers: true,
				Approval: Approval{Timeout: 5 * time.Minute, Mode: ModeHold, Approvals: 1, ValidFor: 10 * time.Minute}},
		},
		{
			name: "policy default approvers are inherited and intersected",
			policy: &Policy{Default: Allow,
				Approval: Approval{Timeout: time.Minute, Mode: ModeHold, Approvals: 1, ValidFor: time.Minute, Approvers: []string{"group:ops"}},
				Rules: []Rule{
					ap("inherit", nil),
					ap("narrow", &Approval{Approvers: []string{"group:ops", "alice"}}),
				}},
			want: Decision{Effect: Approve, Rule: "inherit", TimeoutRule: "inherit", Matched: []string{"inherit", "narrow"},
				Approval: Approval{Timeout: time.Minute, Mode: ModeHold, Approvals: 1, ValidFor: time.Minute, Approvers: []string{"group:ops"}}},
		},
		{
			name: "deny still wins over a combined approval",
			policy: newPolicy(Allow,
				ap("a", &Approval{Approvals: 2}),
				Rule{Name: "d", Tools: []string{"transfer"}, Effect: Deny},
			),
			want: Decision{Effect: Deny, Rule: "d", Matched: []string{"a", "d"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if errs := c.policy.Validate(); errs != nil {
				t.Fatalf("Validate: %v", errs)
			}
			got, err := c.policy.Evaluate(call)
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("Decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCombineIsOrderIndependentExceptMode(t *testing.T) {
	rules := []Rule{
		{Name: "a", Effect: Approve, Approval: &Approval{Approvals: 2, Timeout: 3 * time.Minute, Approvers: []string{"x", "y", "z"}}},
		{Name: "b", Effect: Approve, Approval: &Approval{Approvals: 1, Timeout: time.Minute, ValidFor: 2 * time.Minute, Approvers: []string{"z", "y"}}},
		{Name: "c", Effect: Approve, Approval: &Approval{Approvals: 4, Timeout: 7 * time.Minute}},
	}
	for _, order := range permutations(rules) {
		d, err := newPolicy(Deny, order...).Evaluate(Call{Server: "s", Tool: "t"})
		if err != nil {
			t.Fatal(err)
		}
		a := d.Approval
		if a.Approvals != 4 || a.Timeout != time.Minute || a.ValidFor != 2*time.Minute || len(a.Approvers) != 2 || d.NoEligibleApprovers {
			t.Errorf("order %v: %+v", names(order), d)
		}
	}
}

// TestC05 checks that the same tool name on two servers gets each server's
// own effect.
func TestC05SameToolOnTwoServers(t *testing.T) {
	p := newPolicy(Allow,
		Rule{Name: "outlook send", Server: "outlook", Tools: []string{"send_email"}, Effect: Deny},
		Rule{Name: "gmail send", Server: "gmail", Tools: []string{"send_email"}, Effect: Approve},
	)
	cases := []struct {
		call     Call
		want     Effect
		wantRule string
	}{
		{Call{Server: "outlook", Tool: "send_email"}, Deny, "outlook send"},
		{Call{Server: "gmail", Tool: "send_email"}, Approve, "gmail send"},
		{Call{Server: "gmail", Tool: "read_email"}, Allow, DefaultRule},
		{Call{Server: "yahoo", Tool: "send_email"}, Allow, DefaultRule},
	}
	for _, c := range cases {
		d, err := p.Evaluate(c.call)
		if err != nil {
			t.Fatal(err)
		}
		if d.Effect != c.want || d.Rule != c.wantRule {
			t.Errorf("%+v: got %s by %q, want %s by %q", c.call, d.Effect, d.Rule, c.want, c.wantRule)
		}
	}
}

// TestC06 checks that a rule for one server never applies to another whose
// name differs only in punctuation, case or a suffix, and that rules never
// see the exposed "<server>__<tool>" alias.
func TestC06NoLeakAcrossServers(t *testing.T) {
	p := newPolicy(Approve,
		Rule{Name: "foo-bar all", Server: "foo-bar", Tools: []string{"*"}, Effect: Allow},
		Rule{Name: "fs reads", Server: "fs", Tools: []string{"read_*"}, Effect: Allow},
		Rule{Name: "alias-shaped", Tools: []string{"fs__*", "foo-bar__evil"}, Effect: Allow},
	)
	cases := []struct {
		call Call
		want Effect
	}{
		{Call{Server: "foo-bar", Tool: "evil"}, Allow},
		{Call{Server: "foo_bar", Tool: "evil"}, Approve},
		{Call{Server: "foobar", Tool: "evil"}, Approve},
		{Call{Server: "foo.bar", Tool: "evil"}, Approve},
		{Call{Server: "FOO-BAR", Tool: "evil"}, Approve},
		{Call{Server: "foo-bar2", Tool: "evil"}, Approve},
		{Call{Server: "xfoo-bar", Tool: "evil"}, Approve},
		{Call{Server: "foo", Tool: "bar__evil"}, Approve},
		// A tool glob is scoped to its server.
		{Call{Server: "fs", Tool: "read_file"}, Allow},
		{Call{Server: "fs-2", Tool: "read_file"}, Approve},
		{Call{Server: "f", Tool: "s__read_file"}, Approve},
		// Rules see the real tool name, not the alias: an alias-shaped
		// pattern matches only a real tool of that literal name.
		{Call{Server: "fs", Tool: "write_file"}, Approve},
		{Call{Server: "foo-bar", Tool: "evil"}, Allow},
	}
	for _, c := range cases {
		d, err := p.Evaluate(c.call)
		if err != nil {
			t.Fatal(err)
		}
		if d.Effect != c.want {
			t.Errorf("%+v: got %s (rule %q, matched %v), want %s", c.call, d.Effect, d.Rule, d.Matched, c.want)
		}
	}
}

func TestMatchingSemantics(t *testing.T) {
	cases := []struct {
		name string
		rule Rule
		call Call
		want bool
	}{
		{"empty server and tools match anything", Rule{}, Call{Server: "a", Tool: "b"}, true},
		{"empty tool entry matches any tool", Rule{Server: "a", Tools: []string{""}}, Call{Server: "a", Tool: "zz"}, true},
		{"any of several tool globs", Rule{Tools: []string{"read_*", "list_*"}}, Call{Server: "a", Tool: "list_directory"}, true},
		{"none of several tool globs", Rule{Tools: []string{"read_*", "list_*"}}, Call{Server: "a", Tool: "write_file"}, false},
		{"server glob", Rule{Server: "git*"}, Call{Server: "github", Tool: "x"}, true},
		{"server glob matches any suffix", Rule{Server: "git*"}, Call{Server: "gitlab-ci", Tool: "x"}, true},
		{"server exact is whole-name", Rule{Server: "git"}, Call{Server: "github", Tool: "x"}, false},
		{"tool match is case-sensitive", Rule{Tools: []string{"Read"}}, Call{Server: "a", Tool: "read"}, false},
		{"slash in tool name", Rule{Tools: []string{"files*"}}, Call{Server: "a", Tool: "files/read"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.rule.Name, c.rule.Effect = "r", Allow
			d, err := newPolicy(Deny, c.rule).Evaluate(c.call)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Effect == Allow; got != c.want {
				t.Errorf("matched = %v, want %v", got, c.want)
			}
		})
	}
}

func TestEvaluateErrorsDeny(t *testing.T) {
	cases := []struct {
		name    string
		policy  *Policy
		call    Call
		wantErr string
	}{
		{"bad server glob", newPolicy(Allow, Rule{Server: "[", Effect: Allow}), Call{Server: "x", Tool: "y"}, "rules[0]"},
		{"bad tool glob after a match", newPolicy(Allow, Rule{Name: "r", Tools: []string{"*", "[z"}, Effect: Allow}), Call{Server: "x", Tool: "y"}, `rules[0] "r"`},
		{"bad glob in a rule that would not match", newPolicy(Allow, Rule{Server: "other", Effect: Allow}, Rule{Tools: []string{"x["}, Effect: Deny}), Call{Server: "x", Tool: "y"}, "rules[1]"},
		{"invalid effect on a matching rule", newPolicy(Allow, Rule{Effect: "alow"}), Call{Server: "x", Tool: "y"}, `effect "alow"`},
		{"invalid default", newPolicy("", Rule{Server: "z", Effect: Allow}), Call{Server: "x", Tool: "y"}, "default"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := c.policy.Evaluate(c.call)
			if err == nil {
				t.Fatalf("Evaluate = %+v, want an error", d)
			}
			if d.Effect != Deny {
				t.Errorf("Effect = %q with error, want deny", d.Effect)
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error %q does not mention %q", err, c.wantErr)
			}
		})
	}
	_, err := newPolicy(Allow, Rule{Tools: []string{"["}, Effect: Allow}).Evaluate(Call{Server: "a", Tool: "b"})
	if !errors.Is(err, ErrBadPattern) {
		t.Errorf("bad glob error %v does not wrap ErrBadPattern", err)
	}
}

func TestEvaluateDoesNotAlias(t *testing.T) {
	p := newPolicy(Approve, Rule{Name: "r", Effect: Approve, Approval: &Approval{Approvers: []string{"a", "b"}}})
	p.Approval.Approvers = []string{"x"}
	d, _ := p.Evaluate(Call{Server: "s", Tool: "t"})
	d.Approval.Approvers[0] = "mutated"
	if p.Rules[0].Approval.Approvers[0] != "a" {
		t.Errorf("Evaluate's result aliases the rule's approvers")
	}
	p.Rules = nil
	d, _ = p.Evaluate(Call{Server: "s", Tool: "t"})
	d.Approval.Approvers[0] = "mutated"
	if p.Approval.Approvers[0] != "x" {
		t.Errorf("Evaluate's result aliases the policy's approvers")
	}
}

func TestRuleNames(t *testing.T) {
	p := newPolicy(Deny, Rule{Effect: Allow, Server: "a"}, Rule{Name: "named", Effect: Allow, Server: "b"}, Rule{Effect: Allow})
	d, err := p.Evaluate(Call{Server: "a", Tool: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Decision{Effect: Allow, Rule: "rule[0]", Matched: []string{"rule[0]", "rule[2]"}}, d); diff != "" {
		t.Errorf("Decision (-want +got):\n%s", diff)
	}
	if p.Rules[0].Name != "" {
		t.Errorf("Evaluate modified the policy")
	}
	p.Normalize()
	if diff := cmp.Diff([]string{"rule[0]", "named", "rule[2]"}, names(p.Rules)); diff != "" {
		t.Errorf("Normalize (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	valid := func() *Policy {
		return newPolicy(Approve,
			Rule{Name: "reads", Server: "fs", Tools: []string{"read_*"}, Effect: Allow},
			Rule{Effect: Approve, Approval: &Approval{Approvals: 2, Approvers: []string{"group:ops"}}},
		)
	}
	cases := []struct {
		name   string
		mutate func(p *Policy)
		want   []string // one substring per expected error, in order
	}{
		{"valid", func(*Policy) {}, nil},
		{"bad default", func(p *Policy) { p.Default = "maybe" }, []string{`default "maybe"`}},
		{"empty default", func(p *Policy) { p.Default = "" }, []string{`default ""`}},
		{"zero approval defaults", func(p *Policy) { p.Approval = Approval{} }, []string{"approval.timeout", "approval.mode", "approval.approvals", "approval.valid_for"}},
		{"bad default approvers", func(p *Policy) { p.Approval.Approvers = []string{"", "group:", " bob"} }, []string{"approval.approvers[0]", "approval.approvers[1]", "approval.approvers[2]"}},
		{"bad rule effect", func(p *Policy) { p.Rules[0].Effect = "alow" }, []string{`rules[0] "reads": effect "alow"`}},
		{"bad globs", func(p *Policy) { p.Rules[0].Server = "f["; p.Rules[0].Tools = []string{"ok", "[]"} }, []string{`rules[0] "reads": server`, `rules[0] "reads": tools[1]`}},
		{"duplicate names", func(p *Policy) { p.Rules[1].Name = "reads" }, []string{`rules[1] "reads": name "reads" is also used by rules[0]`}},
		{"explicit name colliding with a default name", func(p *Policy) { p.Rules[0].Name = "rule[1]" }, []string{`rules[1]: name "rule[1]" is also used by rules[0]`}},
		{"reserved name", func(p *Policy) { p.Rules[0].Name = "default" }, []string{`rules[0] "default": name "default" is reserved`}},
		{"approval on an allow rule", func(p *Policy) { p.Rules[0].Approval = &Approval{Approvals: 2} }, []string{`rules[0] "reads": approval is set but effect is "allow"`}},
		{"bad overrides", func(p *Policy) {
			p.Rules[1].Approval = &Approval{Timeout: -1, Mode: "wait", Approvals: -2, ValidFor: -time.Second, Approvers: []string{""}}
		}, []string{"rules[1]: approval.timeout", "rules[1]: approval.mode", "rules[1]: approval.approvals", "rules[1]: approval.valid_for", "rules[1]: approval.approvers[0]"}},
		{"chat_approval on an allow rule", func(p *Policy) { p.Rules[0].ChatApproval = true }, []string{`rules[0] "reads": chat_approval is set but effect is "allow"`}},
		{"chat_approval on an approve rule is valid", func(p *Policy) { p.Rules[1].ChatApproval = true }, nil},
		{"retry mode is valid", func(p *Policy) { p.Approval.Mode = ModeRetry; p.Rules[1].Approval.Mode = ModeRetry }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := valid()
			c.mutate(p)
			errs := p.Validate()
			if len(errs) != len(c.want) {
				t.Fatalf("Validate = %d errors %v, want %d", len(errs), errs, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], w)
				}
			}
		})
	}
}

func TestChatApproval(t *testing.T) {
	p := newPolicy(Approve,
		Rule{Name: "pay", Server: "pay", Effect: Approve, ChatApproval: true},
		Rule{Name: "fs", Server: "fs", Effect: Approve},
		Rule{Name: "reads", Effect: Allow},
	)
	for rule, want := range map[string]bool{
		"pay": true, "fs": false, "reads": false, DefaultRule: false,
		"session require_approval": false, "": false, "PAY": false,
	} {
		if got := p.ChatApproval(rule); got != want {
			t.Errorf("ChatApproval(%q) = %v, want %v", rule, got, want)
		}
	}
}
