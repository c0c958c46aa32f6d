package policy

import (
	"strings"
	"testing"
)

// TestGrantsKeyChangesTheRevision (review50b): a policy that differs from
// another only by grants: false, on a rule or in policy.approval, has
// another revision (TestGrantsFalse compared policies that also differ by
// a rule, so it passed with the key left out of the revision); grants:
// true in policy.approval is the default's own value and keeps it.
func TestGrantsKeyChangesTheRevision(t *testing.T) {
	onRule := base()
	onRule.Rules[2].Approval.Grants = ptr(false)
	if Revision(onRule) == Revision(base()) {
		t.Error(`rule "pay" with grants: false has the revision of the same policy without the key`)
	}
	onPolicy := base()
	onPolicy.Approval.Grants = ptr(false)
	if Revision(onPolicy) == Revision(base()) {
		t.Error("policy.approval.grants: false has the revision of the same policy without the key")
	}
	if Revision(onPolicy) == Revision(onRule) {
		t.Error("grants: false on a rule and in policy.approval have one revision")
	}
	// A rule whose approval sets nothing but grants.
	only := func(a *Approval) *Policy {
		p := base()
		p.Rules = append(p.Rules, Rule{Name: "push", Server: "git", Tools: []string{"push"}, Effect: Approve, Approval: a})
		return p
	}
	if Revision(only(&Approval{Grants: ptr(false)})) == Revision(only(&Approval{})) {
		t.Error("a rule's approval: {grants: false} has the revision of approval: {}")
	}
	dflt := base()
	dflt.Approval.Grants = ptr(true)
	if Revision(dflt) != Revision(base()) {
		t.Error("policy.approval.grants: true changed the revision")
	}
}

// TestAddedRuleAllowingGrantsWidens (review50b): with default approve and
// policy.approval.grants: false, an added approve rule that says grants:
// true lets calls that only the default decided (no grants) be admitted by
// grants: widening. One that inherits the default's grants: false does
// not widen on that account.
func TestAddedRuleAllowingGrantsWidens(t *testing.T) {
	old := base()
	old.Approval.Grants = ptr(false)
	added := func(g *bool) *Policy {
		n := base()
		n.Approval.Grants = ptr(false)
		n.Rules = append(n.Rules, Rule{Name: "git push", Server: "git", Tools: []string{"push"}, Effect: Approve, Approval: &Approval{Grants: g}})
		return n
	}
	ok, why := Narrows(old, added(ptr(true)))
	if ok || !strings.Contains(strings.Join(why, "\n"), "it allows grants, which the default forbids") {
		t.Errorf("added rule with grants: true under a default that forbids them: ok %v, %q; want widening", ok, why)
	}
	if ok, why := Narrows(old, added(nil)); !ok {
		t.Errorf("added rule inheriting grants: false: ok %v, %q; want narrowing", ok, why)
	}
	if ok, why := Narrows(old, added(ptr(false))); !ok {
		t.Errorf("added rule with grants: false: ok %v, %q; want narrowing", ok, why)
	}
}
