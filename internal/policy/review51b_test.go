package policy

import (
	"strings"
	"testing"
	"time"
)

// TestGrantAdmitsAnyArgumentsOnlyWithinTheCostLimit (review51b): a
// predicate that folds to true but costs more than CostLimit to evaluate
// admits nothing at use (the evaluation stops with an error), so it is not
// described as admitting "any arguments"; and the check does not run it
// (folding it had no bound: a few nested comprehensions over constant
// lists took seconds per grants list row, more nesting hours).
func TestGrantAdmitsAnyArgumentsOnlyWithinTheCostLimit(t *testing.T) {
	list := "[" + strings.Repeat("0,", 49) + "0]" // 50 elements: 50³ iterations > CostLimit
	src := list + ".all(a, " + list + ".all(b, " + list + ".all(c, true)))"
	if err := CheckGrantPredicate(src); err != nil {
		t.Fatalf("CheckGrantPredicate: %v (the predicate is valid)", err)
	}
	e, err := Compile(&Policy{Default: Approve})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000, 0)
	c := Call{Server: "pay", Tool: "refund", Principal: Principal{ID: "agent"}, Now: now, Arguments: []byte(`{"n":1}`),
		Grants: []Grant{{ID: "g1", Principal: "agent", Server: "pay", Tool: "refund", When: src, ExpiresAt: now.Add(time.Hour),
			ApprovedBy: []GrantApprover{{ID: "alice"}}}}}
	id, errs := e.MatchGrant(c, Approval{})
	if id != "" || len(errs) != 1 || !strings.Contains(errs[0].Err.Error(), "cost limit") {
		t.Fatalf("MatchGrant = %q, %v; want no grant and the cost limit's error", id, errs)
	}
	if GrantAdmitsAnyArguments(src) {
		t.Errorf("GrantAdmitsAnyArguments = true for a predicate that admits no call (cost over the limit)")
	}
	// Within the limit, and for the argument-dependent side of an or, the
	// folding still says so; an unbounded comprehension over args does
	// not (a large list stops it at use).
	small := "[0, 1].all(a, [0, 1].all(b, true))"
	for src, want := range map[string]bool{small: true, "args.n > 10 || " + small: true, "args.items.all(x, x > 0) || true": false} {
		if got := GrantAdmitsAnyArguments(src); got != want {
			t.Errorf("GrantAdmitsAnyArguments(%q) = %v, want %v", src, got, want)
		}
	}
}

// TestGrantsForbiddenByTheDefaultOnceTheHoldingRuleIsGone (review51b): a
// request held by a rule that allowed grants, under a policy whose
// approval says grants: false, asks again after a reload that removed (or
// renamed) that rule: the call now falls to the default, which forbids
// grants, so grant terms are refused. On 89d66645 only a request held by
// the default itself was checked against the default, and the grant was
// made (inert at use, live again if grants came back).
func TestGrantsForbiddenByTheDefaultOnceTheHoldingRuleIsGone(t *testing.T) {
	call := Call{Principal: Principal{ID: "agent"}, Server: "pay", Tool: "refund"}
	held := base()
	held.Approval.Grants = ptr(false)
	held.Rules[2].Approval.Grants = ptr(true) // rule "pay" allows grants
	if no, rule := mustCompile(t, held).GrantsForbidden(call, "pay"); no {
		t.Fatalf("under the policy that held it: forbidden by %q, want allowed", rule)
	}
	for name, change := range map[string]func(p *Policy){
		"removed":          func(p *Policy) { p.Rules = p.Rules[:2] },
		"renamed":          func(p *Policy) { p.Rules[2].Name = "pay-v2" },
		"monitored":        func(p *Policy) { p.Rules[2].Monitor = ptr(true) },
		"another caller's": func(p *Policy) { p.Rules[2].Principals = []string{"other"} },
	} {
		t.Run(name, func(t *testing.T) {
			p := base()
			p.Approval.Grants = ptr(false)
			p.Rules[2].Approval.Grants = ptr(true)
			change(p)
			if no, rule := mustCompile(t, p).GrantsForbidden(call, "pay"); !no || rule != DefaultRule {
				t.Errorf("GrantsForbidden = %v, %q; want true, %q (the call falls to the default)", no, rule, DefaultRule)
			}
		})
	}
	// A default that allows grants, or does not approve, forbids nothing.
	p := base()
	p.Rules = p.Rules[:2]
	if no, rule := mustCompile(t, p).GrantsForbidden(call, "pay"); no {
		t.Errorf("default allows grants: forbidden by %q", rule)
	}
}
