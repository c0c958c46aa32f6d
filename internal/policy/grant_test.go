package policy

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// grantFor returns a grant for agent-1 on pay transfer, approved by alice
// (group ops), valid until propNow+1h.
func grantFor(id, when string) Grant {
	return Grant{ID: id, Principal: "agent-1", Server: "pay", Tool: "transfer", When: when, ExpiresAt: propNow.Add(time.Hour),
		ApprovedBy: []GrantApprover{{ID: "alice", Groups: []string{"ops"}}}}
}

// TestGrantCases walks through the rules of MatchGrant one by one, as a
// reader of docs/policy.md would check them.
func TestGrantCases(t *testing.T) {
	approveAll := newPolicy(Approve)
	cases := []struct {
		name    string
		p       *Policy
		args    string
		grants  []Grant
		want    Effect
		grant   string
		errRule string // a RuleError expected for this rule
	}{
		{"a grant replaces the approval", approveAll, `{"amount":5}`, []Grant{grantFor("g1", "")}, Allow, "g1", ""},
		{"the first matching grant is used", approveAll, `{"amount":5}`, []Grant{grantFor("g1", "args.amount > 10"), grantFor("g2", "args.amount <= 10")}, Allow, "g2", ""},
		{"a deny rule wins", newPolicy(Approve, Rule{Name: "frozen", Server: "pay", Effect: Deny}), `{}`, []Grant{grantFor("g1", "")}, Deny, "", ""},
		{"an allow needs no grant", newPolicy(Allow), `{}`, []Grant{grantFor("g1", "")}, Allow, "", ""},
		{"a predicate error never matches", approveAll, `{"amount":"5"}`, []Grant{grantFor("g1", "args.amount <= 10")}, Approve, "", "grant g1"},
		{"a missing key never matches", approveAll, `{}`, []Grant{grantFor("g1", "args.amount <= 10")}, Approve, "", "grant g1"},
		{"two approvals need two approvers", newPolicy(Approve, Rule{Name: "two", Server: "pay", Effect: Approve, Approval: &Approval{Approvals: 2}}),
			`{}`, []Grant{grantFor("g1", "")}, Approve, "", ""},
		{"approvers the rule no longer names do not count", newPolicy(Approve, Rule{Name: "fin", Server: "pay", Effect: Approve, Approval: &Approval{Approvers: []string{"group:fin"}}}),
			`{}`, []Grant{grantFor("g1", "")}, Approve, "", ""},
		{"approvers named by group count", newPolicy(Approve, Rule{Name: "ops", Server: "pay", Effect: Approve, Approval: &Approval{Approvers: []string{"group:ops"}}}),
			`{}`, []Grant{grantFor("g1", "")}, Allow, "g1", ""},
		{"nobody can approve: no grant either", newPolicy(Approve,
			Rule{Name: "a", Server: "pay", Effect: Approve, Approval: &Approval{Approvers: []string{"alice"}}},
			Rule{Name: "b", Server: "pay", Effect: Approve, Approval: &Approval{Approvers: []string{"bob"}}}),
			`{}`, []Grant{grantFor("g1", "")}, Approve, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := mustCompile(t, tc.p)
			c := transfer(tc.args)
			c.Grants, c.Now = tc.grants, propNow
			d := eval(t, e, c)
			if d.Effect != tc.want || d.Grant != tc.grant {
				t.Errorf("decision %s by grant %q, want %s by %q (%+v)", d.Effect, d.Grant, tc.want, tc.grant, d)
			}
			if tc.errRule != "" && !slices.ContainsFunc(d.Errors, func(e RuleError) bool { return e.Rule == tc.errRule }) {
				t.Errorf("errors %v lack one for %q", d.Errors, tc.errRule)
			}
		})
	}
}

func TestGrantNeedsTime(t *testing.T) {
	e := mustCompile(t, newPolicy(Approve))
	c := transfer(`{}`)
	c.Grants = []Grant{grantFor("g1", "")}
	if d := eval(t, e, c); d.Effect != Approve || d.Grant != "" {
		t.Errorf("a call without Now matched a grant: %+v", d)
	}
}

func TestHolderMatchGrant(t *testing.T) {
	c := transfer(`{"amount":3}`)
	c.Grants, c.Now = []Grant{grantFor("g1", "args.amount < 5")}, propNow
	if id, _ := NewHolder(newPolicy(Allow)).MatchGrant(c, defaults); id != "g1" {
		t.Errorf("MatchGrant = %q, want g1", id)
	}
	if id, _ := NewHolder(nil).MatchGrant(c, defaults); id != "" {
		t.Errorf("MatchGrant with no policy = %q, want none", id)
	}
}

// TestGrantsMatchToolCallsOnly: a resource read or prompt get never
// matches a tool's grant, even when a caller fills Tool with the same name.
func TestGrantsMatchToolCallsOnly(t *testing.T) {
	e := mustCompile(t, newPolicy(Approve))
	for _, k := range []Kind{KindResource, KindPrompt} {
		c := transfer(`{}`)
		c.Kind, c.Resource, c.Prompt = k, "transfer", "transfer"
		c.Grants, c.Now = []Grant{grantFor("g1", "")}, propNow
		if id, _ := e.MatchGrant(c, defaults); id != "" {
			t.Errorf("%s call matched grant %q", k, id)
		}
	}
}

func TestCheckGrantPredicate(t *testing.T) {
	for src, want := range map[string]string{
		"":                        "",
		"args.amount <= 100":      "",
		`tool == "transfer"`:      "",
		"args.amount <=":          "Syntax error",
		"principal.id":            "must evaluate to a bool",
		"principal.grups == []":   "undefined field",
		strings.Repeat("a", 4097): "at most 4096",
	} {
		err := CheckGrantPredicate(src)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckGrantPredicate(%.20q) = %v", src, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckGrantPredicate(%.20q) = %v, want %q", src, err, want)
		}
	}
}
