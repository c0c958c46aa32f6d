package policy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// This file is issue 12's property test of grants: over random policies,
// grants and calls, a grant never allows a call that the policy would
// deny or allow anyway (it only ever replaces an approve), nor a call
// outside its principal, tenant, server, tool or predicate, nor after its
// expiry, revocation or max uses, nor in place of more approvers than
// approved it. An oracle written apart from the evaluator (below) says for
// each grant whether it must apply; the evaluator must pick a grant exactly
// when the oracle finds one.

// propNow is the time of every generated call.
var propNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// argKind is the kind of a generated argument value.
type argKind int

const (
	argMissing argKind = iota
	argInt
	argHugeInt // beyond int64: an evaluation error wherever it is read
	argDouble
	argString
)

type argVal struct {
	kind argKind
	i    int64
	f    float64
	s    string
}

func (v argVal) json() string {
	switch v.kind {
	case argInt:
		return fmt.Sprint(v.i)
	case argHugeInt:
		return "9223372036854775808"
	case argDouble:
		return fmt.Sprintf("%.1f", v.f) // x.5: exact, shortest form
	case argString:
		return fmt.Sprintf("%q", v.s)
	}
	return ""
}

// truth is a three-valued outcome: true, false, or an evaluation error.
type truth int

const (
	tFalse truth = iota
	tTrue
	tErr
)

// and is CEL's commutative &&: false wins over an error, an error over
// true.
func and(a, b truth) truth {
	switch {
	case a == tFalse || b == tFalse:
		return tFalse
	case a == tErr || b == tErr:
		return tErr
	}
	return tTrue
}

func boolTruth(b bool) truth {
	if b {
		return tTrue
	}
	return tFalse
}

// numCmp is the oracle of `args.n <op> k`: an error unless n is an int or
// a double (missing: no such key; huge: not an int64; string: no overload).
func numCmp(n argVal, op string, k int64) truth {
	var x float64
	switch n.kind {
	case argInt:
		x = float64(n.i) // small values: exact
	case argDouble:
		x = n.f
	default:
		return tErr
	}
	switch op {
	case "<=":
		return boolTruth(x <= float64(k))
	case ">":
		return boolTruth(x > float64(k))
	}
	panic(op)
}

func strEq(s argVal, want string) truth {
	switch s.kind {
	case argMissing, argHugeInt:
		return tErr
	case argString:
		return boolTruth(s.s == want)
	}
	return tFalse // int == string: false in CEL (heterogeneous equality)
}

// predicate is a generated grant predicate with its oracle.
type predicate struct {
	src    string
	oracle func(c propCall) truth
}

func genPredicate(r *rand.Rand) predicate {
	k := int64(r.IntN(12))
	switch r.IntN(8) {
	case 0, 1:
		return predicate{"", func(propCall) truth { return tTrue }}
	case 2:
		return predicate{fmt.Sprintf("args.n <= %d", k), func(c propCall) truth { return numCmp(c.n, "<=", k) }}
	case 3:
		return predicate{`args.s == "u"`, func(c propCall) truth { return strEq(c.s, "u") }}
	case 4:
		return predicate{fmt.Sprintf(`args.n > %d && args.s == "u"`, k), func(c propCall) truth {
			return and(numCmp(c.n, ">", k), strEq(c.s, "u"))
		}}
	case 5:
		return predicate{fmt.Sprintf(`has(args.n) && args.n <= %d`, k), func(c propCall) truth {
			if c.n.kind == argMissing {
				return tFalse
			}
			return numCmp(c.n, "<=", k)
		}}
	case 6:
		return predicate{`args.missing == 1`, func(propCall) truth { return tErr }}
	}
	return predicate{`principal.id == "p1"`, func(c propCall) truth { return boolTruth(c.principal.ID == "p1") }}
}

type propCall struct {
	principal Principal
	server    string
	tool      string
	n, s      argVal
}

func (c propCall) arguments() string {
	var parts []string
	if c.n.kind != argMissing {
		parts = append(parts, `"n":`+c.n.json())
	}
	if c.s.kind != argMissing {
		parts = append(parts, `"s":`+c.s.json())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// approversPool are the principals that may have approved a grant; p1 is
// also a caller (self-approval must never count) and bob is the person
// some callers act for.
var approversPool = []GrantApprover{
	{ID: "alice", Groups: []string{"ops"}},
	{ID: "bob", Groups: []string{"ops"}},
	{ID: "carol", Groups: []string{"fin"}},
	{ID: "P1", Groups: []string{"ops"}}, // the caller p1, spelt in another case
	{ID: "dave"},
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func genCall(r *rand.Rand) propCall {
	c := propCall{
		principal: Principal{ID: pick(r, "p1", "p2"), Tenant: pick(r, "", "t")},
		server:    pick(r, "a", "b"),
		tool:      pick(r, "x", "y", "xz"),
	}
	if r.IntN(2) == 0 {
		c.principal.OnBehalfOf = "bob"
	}
	if r.IntN(2) == 0 {
		c.principal.Groups = []string{"ops"}
	}
	switch r.IntN(6) {
	case 0:
		c.n = argVal{kind: argMissing}
	case 1:
		c.n = argVal{kind: argHugeInt}
	case 2:
		c.n = argVal{kind: argDouble, f: float64(r.IntN(20)) - 4.5}
	case 3:
		c.n = argVal{kind: argString, s: "7"}
	default:
		c.n = argVal{kind: argInt, i: int64(r.IntN(20) - 5)}
	}
	switch r.IntN(4) {
	case 0:
		c.s = argVal{kind: argMissing}
	case 1:
		c.s = argVal{kind: argInt, i: 3}
	default:
		c.s = argVal{kind: argString, s: pick(r, "u", "v")}
	}
	return c
}

type propGrant struct {
	Grant
	pred predicate
}

// genGrant makes grant i, usually for c's principal, tenant, server and
// tool (so that grants often come close to applying), sometimes for
// another.
func genGrant(r *rand.Rand, i int, c propCall) propGrant {
	p := genPredicate(r)
	g := Grant{
		ID:        fmt.Sprintf("g%d", i),
		Principal: c.principal.ID,
		Tenant:    c.principal.Tenant,
		Server:    c.server,
		Tool:      c.tool,
		When:      p.src,
		ExpiresAt: propNow.Add(time.Duration(r.IntN(6)-1) * time.Minute), // -1m .. +4m: some expired, one at now
		MaxUses:   int64(r.IntN(3)),
		Uses:      int64(r.IntN(3)),
		Revoked:   r.IntN(8) == 0,
	}
	switch r.IntN(8) {
	case 0:
		g.Principal = pick(r, "p1", "p2")
	case 1:
		g.Tenant = pick(r, "", "t")
	case 2:
		g.Server = pick(r, "a", "b")
	case 3:
		g.Tool = pick(r, "x", "y", "xz")
	}
	for range 1 + r.IntN(3) {
		g.ApprovedBy = append(g.ApprovedBy, pick(r, approversPool...))
	}
	return propGrant{Grant: g, pred: p}
}

func genPolicy(r *rand.Rand) *Policy {
	p := &Policy{Default: pick(r, Allow, Deny, Approve), Approval: defaults}
	p.Approval.Approvals = 1 + r.IntN(2)
	if r.IntN(3) == 0 {
		p.Approval.Approvers = []string{pick(r, "group:ops", "alice", "carol")}
	}
	for i := range r.IntN(5) {
		rule := Rule{
			Name:   fmt.Sprintf("r%d", i),
			Server: pick(r, "", "a", "b"),
			Effect: pick(r, Allow, Deny, Approve, Approve),
		}
		switch r.IntN(4) {
		case 0:
			rule.Tools = []string{"x"}
		case 1:
			rule.Tools = []string{"x*"}
		case 2:
			rule.Tools = []string{"y"}
		}
		if r.IntN(3) == 0 {
			rule.When = pick(r, "args.n <= 3", `args.s == "v"`, "args.missing > 0")
		}
		if r.IntN(5) == 0 {
			rule.Principals = []string{pick(r, "p1", "group:ops")}
		}
		if rule.Effect == Approve && r.IntN(2) == 0 {
			rule.Approval = &Approval{Approvals: 1 + r.IntN(3)}
			if r.IntN(2) == 0 {
				rule.Approval.Approvers = []string{pick(r, "group:ops", "group:fin", "alice", "bob")}
			}
		}
		if rule.Effect != Allow && r.IntN(6) == 0 {
			on := true
			rule.Monitor = &on
		}
		p.Rules = append(p.Rules, rule)
	}
	return p
}

// oracleEligible counts the distinct approvers of g who could approve a
// call by p whose approvers list is list: written apart from
// Grant.eligibleApprovers on purpose.
func oracleEligible(g Grant, p Principal, list []string) int {
	ok := map[string]bool{}
	for _, a := range g.ApprovedBy {
		lower := strings.ToLower(a.ID)
		if a.ID == "" || lower == strings.ToLower(p.ID) || (p.OnBehalfOf != "" && lower == strings.ToLower(p.OnBehalfOf)) {
			continue
		}
		named := len(list) == 0
		for _, s := range list {
			if s == a.ID {
				named = true
			}
			for _, grp := range a.Groups {
				if s == "group:"+grp {
					named = true
				}
			}
		}
		if named {
			ok[a.ID] = true
		}
	}
	return len(ok)
}

// oracleApplies says whether grant g must be able to stand in for the
// approval base decided for c.
func oracleApplies(g propGrant, c propCall, base Decision) bool {
	if g.Revoked || !propNow.Before(g.ExpiresAt) || (g.MaxUses > 0 && g.Uses >= g.MaxUses) {
		return false
	}
	if g.Principal != c.principal.ID || g.Tenant != c.principal.Tenant || g.Server != c.server || g.Tool != c.tool {
		return false
	}
	if oracleEligible(g.Grant, c.principal, base.Approval.Approvers) < max(base.Approval.Approvals, 1) {
		return false
	}
	return g.pred.oracle(c) == tTrue
}

func TestGrantProperties(t *testing.T) {
	const policies, callsPerPolicy = 1000, 10
	const iterations = policies * callsPerPolicy
	r := rand.New(rand.NewPCG(12, 2026))
	var (
		p                          *Policy
		e                          *Evaluator
		replaced, approves, denied int
	)
	for it := range iterations {
		if it%callsPerPolicy == 0 {
			p = genPolicy(r)
			e = mustCompile(t, p)
		}
		c := genCall(r)
		var gs []propGrant
		for i := range 1 + r.IntN(3) {
			gs = append(gs, genGrant(r, i, c))
		}
		call := Call{Server: c.server, Tool: c.tool, Principal: c.principal, Arguments: []byte(c.arguments())}
		base := eval(t, e, call)
		call.Now = propNow
		for _, g := range gs {
			call.Grants = append(call.Grants, g.Grant)
		}
		got := eval(t, e, call)
		where := func() string {
			return fmt.Sprintf("iteration %d: policy %+v\ncall %+v args %s\ngrants %+v\nbase %+v\ngot %+v", it, p, c, c.arguments(), call.Grants, base, got)
		}
		if base.Effect == Deny {
			denied++
		}
		if base.Effect != Approve || base.NoEligibleApprovers {
			if got.Effect != base.Effect || got.Grant != "" {
				t.Fatalf("a grant changed a %s decision:\n%s", base.Effect, where())
			}
			continue
		}
		approves++
		var must []string // grants the oracle says apply, in order
		for _, g := range gs {
			if oracleApplies(g, c, base) {
				must = append(must, g.ID)
			}
		}
		switch {
		case len(must) == 0 && (got.Grant != "" || got.Effect != Approve):
			t.Fatalf("no grant may apply, but the decision is %s by grant %q:\n%s", got.Effect, got.Grant, where())
		case len(must) > 0 && (got.Grant != must[0] || got.Effect != Allow):
			t.Fatalf("grant %s must apply (first of %v), but the decision is %s by grant %q:\n%s", must[0], must, got.Effect, got.Grant, where())
		}
		if got.Grant != "" {
			replaced++
			if got.Rule != base.Rule {
				t.Fatalf("a grant changed the rule it stood in for from %q to %q:\n%s", base.Rule, got.Rule, where())
			}
		}
	}
	// The generator must reach every branch often enough to mean something.
	t.Logf("%d calls: %d denied, %d approve decisions, %d replaced by a grant", iterations, denied, approves, replaced)
	if denied < iterations/20 || approves < iterations/10 || replaced < iterations/100 {
		t.Errorf("generator too narrow: %d denied, %d approve, %d replaced of %d", denied, approves, replaced, iterations)
	}
}
