package policy

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cel.dev/cel-go/cel"
)

// Grant is a remembered approval as evaluation sees it (issue 12): data
// the gate passes in with a call ([Call.Grants]), read fresh from the store
// for every call whose decision is approve. A grant only ever turns an
// approve decision into an allow, for calls it matches exactly; it never
// touches a deny, an allow or a call that nobody could approve. See
// [Evaluator.MatchGrant] for exactly when it applies.
type Grant struct {
	// ID identifies the grant; an empty ID never matches.
	ID string
	// Principal and Tenant must equal the caller's id and tenant.
	Principal string
	Tenant    string
	// Server and Tool must equal the call's real server and tool names
	// (no globs).
	Server string
	Tool   string
	// When is a CEL predicate with the variables of a rule's when; "" means
	// any arguments. An evaluation error never matches.
	When string
	// ExpiresAt ends the grant: it matches only when Call.Now is before it.
	ExpiresAt time.Time
	// MaxUses caps the uses (0: no cap); Uses counts the uses made. A grant
	// with Uses >= MaxUses > 0 never matches.
	MaxUses int64
	Uses    int64
	// Revoked grants never match.
	Revoked bool
	// ApprovedBy are the approvers who approved the grant, with their groups
	// when they did.
	ApprovedBy []GrantApprover
}

// GrantApprover is one approver of a grant.
type GrantApprover struct {
	ID     string
	Groups []string
}

// maxGrantConditions bounds an Evaluator's cache of compiled grant
// predicates; beyond it predicates are compiled on every use (still
// correct, only slower).
const maxGrantConditions = 1024

// grantCEL is the part of an Evaluator that compiles grant predicates: a
// CEL environment made on first use and a copy-on-write cache of compiled
// predicates by source text. Compiled predicates are pure functions of
// their text, so caching them cannot outlive a revocation: which grants
// exist is read from the store for every call.
type grantCEL struct {
	once   sync.Once
	env    *cel.Env
	envErr error
	conds  atomic.Pointer[map[string]*condition]
	mu     sync.Mutex // serializes writers of conds
}

func (gc *grantCEL) condition(src string) (*condition, error) {
	if m := gc.conds.Load(); m != nil {
		if c, ok := (*m)[src]; ok {
			return c, nil
		}
	}
	gc.once.Do(func() { gc.env, gc.envErr = newCELEnv() })
	if gc.envErr != nil {
		return nil, gc.envErr
	}
	c, err := compileCondition(gc.env, src)
	if err != nil {
		return nil, err
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	old := gc.conds.Load()
	if old != nil && len(*old) >= maxGrantConditions {
		return c, nil
	}
	next := make(map[string]*condition, 1+grantLen(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[src] = c
	gc.conds.Store(&next)
	return c, nil
}

func grantLen(m *map[string]*condition) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// CheckGrantPredicate parses and type-checks a grant's predicate as a
// rule's when is checked at load (same variables, bool result, at most
// MaxExpressionLength characters). "" (any arguments) is valid.
func CheckGrantPredicate(src string) error {
	if src == "" {
		return nil
	}
	env, err := newCELEnv()
	if err != nil {
		return err
	}
	_, err = compileCondition(env, src)
	return err
}

// GrantErrorRule is the RuleError.Rule of an error met evaluating the
// predicate of grant id.
func GrantErrorRule(id string) string { return "grant " + id }

// MatchGrant returns the id of the first grant in c.Grants that allows c in
// place of an approval with parameters need, or "" when none does, with the
// errors met evaluating predicates (each of which made its grant not
// match). A grant allows c only when all of these hold:
//
//   - c is a tool call (Kind "" or KindTool: resources and prompts take no
//     grants);
//   - its ID is not empty, it is not revoked, c.Now is set and before its
//     ExpiresAt, and it is not used up (MaxUses 0 or Uses < MaxUses);
//   - its Principal and Tenant are c's principal id and tenant, and its
//     Server and Tool are c's, exactly;
//   - at least need.Approvals (at least 1) distinct approvers in
//     ApprovedBy could approve c now: none is the caller or the person it
//     acts for (compared without case), and when need.Approvers is not
//     empty each is named there by id or by one of its groups; so a grant
//     approved by one person never stands in for a rule needing two, and a
//     policy that changed who may approve excludes approvers it no longer
//     names;
//   - its When, if any, evaluates to true on c (an error never matches);
//   - need allows grants (need.GrantsAllowed: no matching approve rule,
//     nor the policy's approval, says grants: false); otherwise no grant
//     matches, however it was made.
//
// MatchGrant does not look at the policy's rules: the caller asks only
// when the decision is approve ([Evaluator.Evaluate] does so itself for
// c.Grants; the gate also asks for calls a session's require_approval
// holds).
func (e *Evaluator) MatchGrant(c Call, need Approval) (string, []RuleError) {
	ls := lazyFor(&c)
	return e.matchGrant(&c, &ls, need)
}

func (e *Evaluator) matchGrant(c *Call, ls *lazyState, need Approval) (string, []RuleError) {
	var errs []RuleError
	for i := range c.Grants {
		g := &c.Grants[i]
		if !g.covers(c, need) {
			continue
		}
		if g.When != "" {
			cond, err := e.grants.condition(g.When)
			if err != nil {
				errs = append(errs, RuleError{Rule: GrantErrorRule(g.ID), Err: fmt.Errorf("when: %w", err)})
				continue
			}
			ok, err := cond.eval(&activation{c: *c, st: ls.get()})
			if err != nil {
				errs = append(errs, RuleError{Rule: GrantErrorRule(g.ID), Err: err})
				continue
			}
			if !ok {
				continue
			}
		}
		return g.ID, errs
	}
	return "", errs
}

// covers reports whether g, apart from its predicate, may stand in for an
// approval with parameters need of c (see MatchGrant).
func (g *Grant) covers(c *Call, need Approval) bool {
	switch {
	case !need.GrantsAllowed(): // the policy forbids grants for this call
		return false
	case c.Kind != "" && c.Kind != KindTool: // grants remember tool calls only
		return false
	case g.ID == "", g.Revoked, c.Now.IsZero(), !c.Now.Before(g.ExpiresAt):
		return false
	case g.MaxUses < 0, g.Uses < 0, g.MaxUses > 0 && g.Uses >= g.MaxUses:
		return false
	case g.Principal != c.Principal.ID, g.Tenant != c.Principal.Tenant, g.Server != c.Server, g.Tool != c.Tool:
		return false
	}
	return g.eligibleApprovers(&c.Principal, need.Approvers) >= max(need.Approvals, 1)
}

// eligibleApprovers counts the distinct approvers of g who could approve a
// call of p whose approvers list is list (empty: anyone).
func (g *Grant) eligibleApprovers(p *Principal, list []string) int {
	var seen []string
	for _, a := range g.ApprovedBy {
		switch {
		case a.ID == "", strings.EqualFold(a.ID, p.ID), p.OnBehalfOf != "" && strings.EqualFold(a.ID, p.OnBehalfOf):
			continue
		case len(list) > 0 && !namedIn(a, list):
			continue
		}
		if !slices.Contains(seen, a.ID) {
			seen = append(seen, a.ID)
		}
	}
	return len(seen)
}

// namedIn reports whether approvers list names a, by id or as
// "group:<g>" for one of a's groups.
func namedIn(a GrantApprover, list []string) bool {
	for _, s := range list {
		if g, ok := strings.CutPrefix(s, GroupPrefix); ok {
			if g != "" && slices.Contains(a.Groups, g) {
				return true
			}
		} else if s == a.ID {
			return true
		}
	}
	return false
}

// MatchGrant is [Evaluator.MatchGrant] on the policy in force; with none
// (or one that did not compile) no grant matches.
func (h *Holder) MatchGrant(c Call, need Approval) (string, []RuleError) {
	e, err := h.Evaluator()
	if err != nil {
		return "", nil
	}
	return e.MatchGrant(c, need)
}
