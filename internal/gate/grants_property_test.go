package gate

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestGrantPropertiesThroughTheGate is issue 12's grant property test run
// through the whole gate, with a real store, real sessions and grants made
// the way approvers make them (an approval with terms attached): over
// random policies, grants, sessions, clocks and calls, a call is allowed by
// a grant only when no deny rule and no session exclusion refuses it, the
// decision without grants would have asked for an approval, the grant is
// the caller's for exactly that server and tool, it was not revoked,
// expired or used up when the call came, its predicate holds for the
// arguments (by an oracle written apart from CEL), and enough of its
// approvers could approve the call now; every use is counted once, and no
// grant is ever used more than its max_uses. Conversely, a call that needs
// approval and that some grant covers by all these rules is never left
// waiting.
func TestGrantPropertiesThroughTheGate(t *testing.T) {
	const rounds, callsPerRound = 40, 15
	r := rand.New(rand.NewPCG(2026, 12))
	clk := &tickingClock{clock: newClock()}
	db := sqlitetest.Open(t)
	holder := policy.NewHolder(grantingPolicy(1))
	sessAp := grantingPolicy(1).Approval
	g := New(db, holder, &Options{
		Now: clk.now, RetryWait: time.Nanosecond, ServerExists: knownServers, SessionApproval: sessAp,
		GrantMaxTTL: 2 * time.Hour, MaxPendingPerPrincipal: 100000, MaxPending: 100000,
	})

	// Callers: two agents (one acting for bob) and two sessions with random
	// tool sets and requirements, made once.
	callers := []approval.Principal{
		{ID: "a1", Kind: "agent", OnBehalfOf: "bob"},
		{ID: "a2", Kind: "agent", Groups: []string{"ops"}},
	}
	for range 2 {
		req := session.NewSession{Tools: pick(r, []string{"fs"}, []string{"fs__write_file", "pay"}, []string{"pay__transfer"}, []string{"fs", "pay"})}
		if r.IntN(2) == 0 {
			req.RequireApproval = map[string]session.Requirement{"fs": {All: true}}
		}
		_, p := mustSession(t, g, host, req)
		callers = append(callers, p)
	}
	reviewers := []approval.Principal{
		{ID: "alice", Kind: "human", Groups: []string{"ops"}},
		{ID: "bob-approver", Kind: "human", Groups: []string{"ops"}},
		{ID: "carol", Kind: "human", Groups: []string{"fin"}},
		{ID: "bob", Kind: "human", Groups: []string{"ops"}}, // a1 acts for bob: never counts for a1
	}
	targets := [][2]string{{"fs", "write_file"}, {"fs", "delete_file"}, {"pay", "transfer"}}
	preds := map[string]gatePredicate{} // by grant id
	var used, made, denied, excluded int

	for round := range rounds {
		// Grants, made under a policy that asks for 1 or 2 approvals.
		quorum := 1 + r.IntN(2)
		holder.Store(grantingPolicy(quorum))
		for range 1 + r.IntN(3) {
			c := randomCall(r, callers, targets)
			first := g.Admit(t.Context(), c)
			if first.Allowed || first.ApprovalID == "" {
				if first.Allowed {
					first.Finish(t.Context(), approval.OutcomeOK)
				}
				continue
			}
			p := randomGatePredicate(r)
			terms := approval.GrantTerms{When: p.src, TTL: time.Duration(5+r.IntN(60)) * time.Minute, MaxUses: int64(r.IntN(4))}
			var gr *grant.Grant
			for _, rv := range pickN(r, reviewers, quorum) {
				_, got, err := g.ApproveWithGrant(t.Context(), first.ApprovalID, rv, "", "", terms)
				if err != nil {
					break // self review, or already settled by an earlier deny: no grant
				}
				gr = got
			}
			if gr != nil {
				preds[gr.ID] = p
				made++
			}
		}

		// A random policy, then calls on a moving clock.
		pol := randomGatePolicy(r)
		holder.Store(pol)
		for range callsPerRound {
			if r.IntN(5) == 0 {
				clk.add(time.Duration(r.IntN(4)) * time.Minute)
			}
			if r.IntN(12) == 0 {
				revokeOne(t, r, g, db)
			}
			c := randomCall(r, callers, targets)
			before := grantsByID(t, db)
			if len(before) > 0 && r.IntN(3) > 0 {
				// Aim at a grant's principal, server and tool, so that grants
				// come close to applying often.
				ids := slices.Sorted(maps.Keys(before))
				gr := before[pick(r, ids...)]
				for _, p := range callers {
					if p.ID == gr.Principal {
						c.Principal = p
					}
				}
				c.Server, c.Tool = gr.Server, gr.Tool
			}
			pc := g.policyCall(c, c.Arguments)
			base, err := holder.Evaluate(pc)
			if err != nil {
				t.Fatal(err)
			}
			chain, exclusion := session.Chain(nil), ""
			if c.Principal.SessionID != "" {
				ch, err := db.Chain(t.Context(), session.ID(c.Principal.SessionID))
				chain, exclusion = ch, sessionRefusal(ch, err, c)
			}
			need, asks := base.Approval, base.Effect == policy.Approve && !base.NoEligibleApprovers
			if base.Effect == policy.Allow && exclusion == "" && chain.RequiresApproval(c.Server, c.Tool) {
				need, asks = sessAp, true
			}
			now := clk.now()
			adm := g.Admit(t.Context(), c)
			where := fmt.Sprintf("round %d: call %s by %s on %s__%s, policy %+v, base %s (%s), admission %+v",
				round, c.Arguments, c.Principal.ID, c.Server, c.Tool, pol.Rules, base.Effect, base.Rule, adm)
			switch {
			case exclusion != "":
				excluded++
				if adm.Allowed {
					t.Fatalf("a session exclusion (%s) was allowed: %s", exclusion, where)
				}
			case base.Effect == policy.Deny:
				denied++
				if adm.Allowed {
					t.Fatalf("a denied call was allowed: %s", where)
				}
			}
			if adm.Allowed && adm.Grant == "" && adm.ApprovalID == "" && asks {
				t.Fatalf("a call that needs approval ran without an approval or a grant: %s", where)
			}
			after := grantsByID(t, db)
			for id, ga := range after {
				want := before[id].Uses
				if id == adm.Grant {
					want++
				}
				if ga.Uses != want {
					t.Fatalf("grant %s went from %d to %d uses (granted: %q): %s", id, before[id].Uses, ga.Uses, adm.Grant, where)
				}
				if ga.MaxUses > 0 && ga.Uses > ga.MaxUses {
					t.Fatalf("grant %s used %d times, max %d", id, ga.Uses, ga.MaxUses)
				}
			}
			// An approval of an earlier round this call attached to, whose
			// approvals no longer meet the quorum of the policy in force
			// (quorum51), is invalidated first: the call is refused with
			// that reason, and its re-send gets the grant's chance.
			requorum := adm.ApprovalID != "" && strings.Contains(adm.Message, "approval invalidated: policy now requires")
			if adm.Grant == "" && !adm.Allowed && asks && exclusion == "" && !requorum {
				// No grant was used and nothing ran: no grant may have applied.
				for _, gr := range before {
					if gr.Principal == c.Principal.ID && gr.Server == c.Server && gr.Tool == c.Tool && gr.Usable(now) &&
						preds[gr.ID].oracle(c.Arguments) == tTrue && eligible(gr, c.Principal, need.Approvers) >= need.Approvals {
						t.Fatalf("grant %+v applies, but the call was not allowed: %s", gr, where)
					}
				}
			}
			if adm.Grant == "" {
				if adm.Allowed {
					adm.Finish(t.Context(), approval.OutcomeOK)
				}
				continue
			}
			used++
			gr := before[adm.Grant]
			switch {
			case !asks:
				t.Fatalf("grant %s used for a call that needed no approval: %s", gr.ID, where)
			case gr.Principal != c.Principal.ID || gr.Server != c.Server || gr.Tool != c.Tool:
				t.Fatalf("grant %+v used for another caller or tool: %s", gr, where)
			case !gr.Usable(now):
				t.Fatalf("grant %+v used while %s at %v: %s", gr, gr.State(now), now, where)
			case preds[gr.ID].oracle(c.Arguments) != tTrue:
				t.Fatalf("grant %s used outside its predicate %q: %s", gr.ID, gr.When, where)
			case eligible(gr, c.Principal, need.Approvers) < need.Approvals:
				t.Fatalf("grant %+v, approved by too few eligible approvers, stood in for %d: %s", gr, need.Approvals, where)
			}
		}
	}
	t.Logf("%d grants made, %d uses, %d denied and %d excluded calls", made, used, denied, excluded)
	if made < rounds/2 || used < rounds/2 || denied < rounds/2 || excluded < rounds/4 {
		t.Errorf("generator too narrow: %d grants, %d uses, %d denied, %d excluded", made, used, denied, excluded)
	}
}

// tickingClock is a settable clock that also moves a millisecond on every
// reading, so that waits bounded by it (a retry-mode re-send waiting
// RetryWait) end.
type tickingClock struct{ *clock }

func (c *tickingClock) now() time.Time {
	c.add(time.Millisecond)
	return c.clock.now()
}

// grantingPolicy asks for quorum approvals of every call, in retry mode.
func grantingPolicy(quorum int) *policy.Policy {
	return &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Hour, Mode: policy.ModeRetry, Approvals: quorum, ValidFor: time.Hour}}
}

func randomGatePolicy(r *rand.Rand) *policy.Policy {
	p := grantingPolicy(pick(r, 1, 1, 2))
	p.Default = pick(r, policy.Approve, policy.Approve, policy.Approve, policy.Allow, policy.Deny)
	if r.IntN(3) == 0 {
		p.Approval.Approvers = []string{pick(r, "group:ops", "alice", "carol")}
	}
	for i := range r.IntN(3) {
		rule := policy.Rule{Name: fmt.Sprintf("r%d", i), Server: pick(r, "fs", "pay", ""), Effect: pick(r, policy.Deny, policy.Allow, policy.Approve, policy.Approve)}
		if r.IntN(2) == 0 {
			rule.Tools = []string{pick(r, "write_file", "delete_file", "transfer", "*e*")}
		}
		if r.IntN(3) == 0 {
			rule.When = pick(r, "args.n <= 3", `args.s == "v"`)
		}
		if rule.Effect == policy.Approve && r.IntN(2) == 0 {
			rule.Approval = &policy.Approval{Approvals: 1 + r.IntN(2)}
		}
		p.Rules = append(p.Rules, rule)
	}
	return p
}

func randomCall(r *rand.Rand, callers []approval.Principal, targets [][2]string) Call {
	tg := pick(r, targets...)
	var parts []string
	switch r.IntN(4) {
	case 0:
	case 1:
		parts = append(parts, `"n":"7"`)
	default:
		parts = append(parts, fmt.Sprintf(`"n":%d`, r.IntN(12)-2))
	}
	if r.IntN(3) > 0 {
		parts = append(parts, fmt.Sprintf(`"s":%q`, pick(r, "u", "v")))
	}
	return Call{Principal: pick(r, callers...), Server: tg[0], Tool: tg[1], Arguments: []byte("{" + strings.Join(parts, ",") + "}"), ToolDigest: "sha256:d1"}
}

// truth is a three-valued outcome of a predicate: true, false, or an
// evaluation error (which never matches).
type truth int

const (
	tFalse truth = iota
	tTrue
	tErr
)

// gatePredicate is a grant predicate and its oracle over the arguments
// randomCall makes.
type gatePredicate struct {
	src    string
	oracle func(args []byte) truth
}

func randomGatePredicate(r *rand.Rand) gatePredicate {
	k := r.IntN(10)
	switch r.IntN(5) {
	case 0, 1:
		return gatePredicate{"", func([]byte) truth { return tTrue }}
	case 2:
		return gatePredicate{fmt.Sprintf("args.n <= %d", k), func(args []byte) truth {
			n, ok := intArg(args)
			switch {
			case !ok:
				return tErr // missing, or a string: no overload
			case n <= k:
				return tTrue
			}
			return tFalse
		}}
	case 3:
		return gatePredicate{`args.s == "u"`, func(args []byte) truth {
			switch {
			case strings.Contains(string(args), `"s":"u"`):
				return tTrue
			case strings.Contains(string(args), `"s":`):
				return tFalse
			}
			return tErr
		}}
	}
	return gatePredicate{"args.missing == 1", func([]byte) truth { return tErr }}
}

// intArg returns the integer n of arguments made by randomCall.
func intArg(args []byte) (int, bool) {
	var n int
	i := strings.Index(string(args), `"n":`)
	if i < 0 {
		return 0, false
	}
	if _, err := fmt.Sscanf(string(args[i+4:]), "%d", &n); err != nil {
		return 0, false
	}
	return n, true
}

// eligible counts the approvers of gr who could approve a call by p whose
// approvers list is list.
func eligible(gr grant.Grant, p approval.Principal, list []string) int {
	n := 0
	for _, a := range gr.ApprovedBy {
		if strings.EqualFold(a.ID, p.ID) || strings.EqualFold(a.ID, p.OnBehalfOf) {
			continue
		}
		ok := len(list) == 0
		for _, s := range list {
			ok = ok || s == a.ID || strings.HasPrefix(s, "group:") && slices.Contains(a.Groups, strings.TrimPrefix(s, "group:"))
		}
		if ok {
			n++
		}
	}
	return max(n, 0)
}

func grantsByID(t *testing.T, s store.Store) map[string]grant.Grant {
	t.Helper()
	gs, _, err := s.ListGrants(t.Context(), store.GrantFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]grant.Grant, len(gs))
	for _, g := range gs {
		out[g.ID] = g
	}
	return out
}

func revokeOne(t *testing.T, r *rand.Rand, g *Gate, s store.Store) {
	t.Helper()
	gs, _, err := s.ListGrants(t.Context(), store.GrantFilter{Limit: 1000})
	if err != nil || len(gs) == 0 {
		return
	}
	if _, err := g.RevokeGrant(t.Context(), alice, pick(r, gs...).ID, "property test"); err != nil {
		t.Fatal(err)
	}
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// pickN returns n distinct elements of xs in random order.
func pickN[T any](r *rand.Rand, xs []T, n int) []T {
	idx := r.Perm(len(xs))[:n]
	out := make([]T, n)
	for i, k := range idx {
		out[i] = xs[k]
	}
	return out
}
