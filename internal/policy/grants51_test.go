package policy

import "testing"

// TestGrantsForbiddenWithoutArguments (grants51): what the gate asks when
// grant terms come for a request held under an older revision. An enforced
// approve rule saying grants: false that may select the call forbids them
// whatever its When (the arguments are not kept: fail closed), and a rule
// naming groups counts for every caller (the groups are not kept); a
// monitored rule, a rule for another principal, another tool, an allowed
// rule do not; the default counts only for a request it held.
func TestGrantsForbiddenWithoutArguments(t *testing.T) {
	no := ptr(false)
	call := Call{Principal: Principal{ID: "agent"}, Server: "pay", Tool: "refund"}
	cases := []struct {
		name     string
		change   func(p *Policy)
		rule     string
		want     bool
		wantRule string
	}{
		{"rules allow grants", func(*Policy) {}, "pay", false, ""},
		{"argument-dependent rule forbids", func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "big", Server: "pay", Tools: []string{"refund"}, When: "args.amount > 100", Effect: Approve, Approval: &Approval{Grants: no}})
		}, "pay", true, "big"},
		{"inherited from the policy's approval", func(p *Policy) { p.Approval.Grants = no }, "pay", true, "pay"},
		{"default holds and forbids", func(p *Policy) {
			p.Approval.Grants = no
			p.Rules = p.Rules[:2]
		}, DefaultRule, true, DefaultRule},
		{"default forbids but a rule held it and allows", func(p *Policy) {
			p.Approval.Grants = no
			p.Rules[2].Approval.Grants = ptr(true)
		}, "pay", false, ""},
		{"monitored rule", func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "big", Server: "pay", Tools: []string{"refund"}, Effect: Approve, Monitor: ptr(true), Approval: &Approval{Grants: no}})
		}, "pay", false, ""},
		{"another principal's rule", func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "big", Server: "pay", Principals: []string{"other"}, Effect: Approve, Approval: &Approval{Grants: no}})
		}, "pay", false, ""},
		{"this principal's rule", func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "big", Server: "pay", Principals: []string{"agent"}, Effect: Approve, Approval: &Approval{Grants: no}})
		}, "pay", true, "big"},
		{"a group's rule counts", func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "big", Server: "pay", Principals: []string{"group:interns"}, Effect: Approve, Approval: &Approval{Grants: no}})
		}, "pay", true, "big"},
		{"another tool's rule", func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "big", Server: "pay", Tools: []string{"charge"}, Effect: Approve, Approval: &Approval{Grants: no}})
		}, "pay", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.change(p)
			got, rule := mustCompile(t, p).GrantsForbidden(call, tc.rule)
			if got != tc.want || rule != tc.wantRule {
				t.Errorf("GrantsForbidden = %v, %q; want %v, %q", got, rule, tc.want, tc.wantRule)
			}
			if h, _ := NewHolder(p).GrantsForbidden(call, tc.rule); h != tc.want {
				t.Errorf("Holder.GrantsForbidden = %v, want %v", h, tc.want)
			}
		})
	}
	if got, _ := (&Policy{Default: "maybe"}).GrantsForbidden(call, DefaultRule); !got {
		t.Error("a policy that does not compile: grants allowed, want forbidden")
	}
	if got, _ := mustCompile(t, base()).GrantsForbidden(Call{Kind: KindResource, Server: "pay", Resource: "x"}, "pay"); got {
		t.Error("a resource: forbidden, want false (grants remember tool calls only)")
	}
}

// TestGrantAdmitsAnyArguments (grants51): `--grant-when true` admits any
// arguments and is described so, like no predicate; a predicate reading
// the call does not.
func TestGrantAdmitsAnyArguments(t *testing.T) {
	for src, want := range map[string]bool{
		"": true, "  ": true, "true": true, "(true)": true, "1 == 1": true, `"a" == "a"`: true,
		"args.n > 10 || true": true, "true || args.n > 10": true,
		"false": false, "args.n < 10": false, "args.n > 10 && true": false, "true && args.path != ''": false,
		"args.n <": false, "1": false,
	} {
		if got := GrantAdmitsAnyArguments(src); got != want {
			t.Errorf("GrantAdmitsAnyArguments(%q) = %v, want %v", src, got, want)
		}
	}
}
