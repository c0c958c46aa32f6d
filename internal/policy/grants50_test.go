package policy

import (
	"strings"
	"testing"
	"time"
)

// TestGrantsFalse (branch grants50): an approve rule's approval.grants:
// false forbids grants for the calls it matches, whatever other approve
// rules match them; no grant matches such a call, and the revision, the
// explanation and the narrowing check see the key.
func TestGrantsFalse(t *testing.T) {
	p := base()
	p.Rules = append(p.Rules, Rule{Name: "big pay", Server: "pay", Tools: []string{"refund"}, When: "args.amount > 100",
		Effect: Approve, Approval: &Approval{Grants: ptr(false)}})
	now := time.Now()
	g := Grant{ID: "g1", Principal: "agent", Server: "pay", Tool: "refund", ExpiresAt: now.Add(time.Hour),
		ApprovedBy: []GrantApprover{{ID: "bob", Groups: []string{"ops"}}, {ID: "carol", Groups: []string{"ops"}}}}
	call := func(args string) Call {
		return Call{Principal: Principal{ID: "agent"}, Server: "pay", Tool: "refund", Arguments: []byte(args), Now: now, Grants: []Grant{g}}
	}
	big, err := p.Evaluate(call(`{"amount":50000,"to":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	// "pay" (grants allowed) and "big pay" (grants: false) both match a big
	// refund: the decision forbids grants, and the grant does not admit it.
	if big.Effect != Approve || big.Grant != "" || big.Approval.GrantsAllowed() || big.Approval.Approvals != 2 {
		t.Errorf("big refund with a grant: %+v, want approve (2 approvals) with grants forbidden", big)
	}
	if id, _ := mustCompile(t, p).MatchGrant(call(`{"amount":50000}`), big.Approval); id != "" {
		t.Errorf("MatchGrant with grants forbidden = %q, want none", id)
	}
	// A small refund only "pay" matches: the grant admits it.
	if d, err := p.Evaluate(call(`{"amount":50}`)); err != nil || d.Effect != Allow || d.Grant != "g1" {
		t.Errorf("small refund with a grant: %+v, %v; want allowed by g1", d, err)
	}
	x := mustCompile(t, p).Explain(call(`{"amount":50000}`))
	if x.Approval == nil || x.Approval.Grants {
		t.Errorf("explain: approval %+v, want grants false", x.Approval)
	}

	// Revision: the key changes it; grants: true at the policy level is the default's.
	q := base()
	if Revision(p) == Revision(base()) {
		t.Error("grants: false did not change the revision")
	}
	q.Approval.Grants = ptr(true)
	if Revision(q) != Revision(base()) {
		t.Error("policy-level grants: true changed the revision")
	}

	// Narrowing: turning grants off narrows, turning them on widens.
	off := base()
	off.Rules[2].Approval.Grants = ptr(false)
	if ok, why := Narrows(base(), off); !ok || !strings.Contains(strings.Join(why, "\n"), "grants turned off") {
		t.Errorf("grants: false on a kept rule: ok %v, %q; want narrowing", ok, why)
	}
	if ok, why := Narrows(off, base()); ok || !strings.Contains(strings.Join(why, "\n"), "grants turned on") {
		t.Errorf("grants back on: ok %v, %q; want widening", ok, why)
	}
	polOff := base()
	polOff.Approval.Grants = ptr(false)
	if ok, _ := Narrows(base(), polOff); !ok {
		t.Error("policy.approval.grants: false does not narrow")
	}
	if ok, _ := Narrows(polOff, base()); ok {
		t.Error("policy.approval.grants back on does not widen")
	}
}
