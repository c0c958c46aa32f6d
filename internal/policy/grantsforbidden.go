package policy

import (
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
)

// GrantsForbidden reports whether the policy forbids grants for calls like
// c, decided without c's arguments: the question asked when an approver
// attaches grant terms to a request held earlier, whose raw arguments are
// not kept (the request records only what the policy in force when it was
// held said; this asks the policy in force now; the gate asks it only for
// a request held under another revision). rule is the rule that held the
// request (approval.Request.Rule). It returns true and the name of a rule
// that forbids them when
//
//   - an enforced approve rule that may select c says grants: false
//     (its own or inherited from the policy's approval). "May select"
//     looks at its server, its tool names and its principal ids only: its
//     When, Command and Annotations are not read (they may hold for some
//     arguments), and a rule naming groups counts for every caller (the
//     request does not keep the caller's groups). This fails closed: a
//     rule that forbids grants for some arguments of the tool (refunds
//     over 100) refuses grant terms on any held call of that tool;
//   - or rule is [DefaultRule], or names no enforced approve rule that
//     may select c (removed, renamed or changed since c was held: c may
//     now fall to the default), the default is an enforced approve and
//     the policy's approval says grants: false.
//
// It returns false and "" otherwise, and for calls that are not tool calls
// (grants remember tool calls only).
func (e *Evaluator) GrantsForbidden(c Call, rule string) (bool, string) {
	if c.Kind != "" && c.Kind != KindTool {
		return false, ""
	}
	held := false // rule names an enforced approve rule that may select c
	for _, i := range e.byName(KindTool, c.Server, c.Tool) {
		r := &e.rules[i]
		if r.effect != Approve || r.monitored || (len(r.groups) == 0 && !r.principalMatches(&c.Principal)) {
			continue
		}
		if !r.approval.GrantsAllowed() {
			return true, r.name
		}
		held = held || r.name == rule
	}
	if (rule == DefaultRule || !held) && e.p.Default == Approve && e.p.Enforced() && !e.p.Approval.GrantsAllowed() {
		return true, DefaultRule
	}
	return false, ""
}

// GrantsForbidden is [Evaluator.GrantsForbidden] on the policy in force;
// with none (or one that did not compile) grants are forbidden (rule
// [DefaultRule]).
func (h *Holder) GrantsForbidden(c Call, rule string) (bool, string) {
	e, err := h.Evaluator()
	if err != nil {
		return true, DefaultRule
	}
	return e.GrantsForbidden(c, rule)
}

// GrantsForbidden is [Evaluator.GrantsForbidden] on p compiled; a policy
// that does not compile forbids grants (rule [DefaultRule]).
func (p *Policy) GrantsForbidden(c Call, rule string) (bool, string) {
	e, err := compile(p, "")
	if err != nil {
		return true, DefaultRule
	}
	return e.GrantsForbidden(c, rule)
}

// GrantAdmitsAnyArguments reports whether a grant with predicate src
// admits its tool's calls whatever their arguments: src is empty, or it
// folds to the constant true (`true`, `1 == 1`, `args.n > 10 || true`;
// CEL's constant folding). Such a grant is described as admitting "any
// arguments" (CLI, inbox), like one with no predicate. A predicate that
// does not compile, depends on the call, or may cost more than CostLimit
// to evaluate reports false: such a predicate can stop with an error at
// use, which admits nothing, and folding it would run it without a bound
// (a predicate of nested comprehensions over constant lists, shown in a
// grants list, would take minutes).
func GrantAdmitsAnyArguments(src string) bool {
	if strings.TrimSpace(src) == "" {
		return true
	}
	if len([]rune(src)) > MaxExpressionLength {
		return false
	}
	env, err := newCELEnv()
	if err != nil {
		return false
	}
	a, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return false
	}
	// The estimate bounds both the use's evaluation and the folding below.
	if est, err := env.EstimateCost(a, noCostHints{}); err != nil || est.Max > CostLimit {
		return false
	}
	folder, err := cel.NewConstantFoldingOptimizer()
	if err != nil {
		return false
	}
	opt, err := cel.NewStaticOptimizer(folder)
	if err != nil {
		return false
	}
	folded, iss := opt.Optimize(env, a)
	if iss != nil && iss.Err() != nil {
		return false
	}
	e := folded.NativeRep().Expr()
	return e.Kind() == ast.LiteralKind && e.AsLiteral() == types.True
}

// noCostHints is the cost estimator that knows nothing more than CEL's
// defaults: the sizes of constant lists, maps and strings are exact, those
// of args unbounded.
type noCostHints struct{}

func (noCostHints) EstimateSize(cost.AstNode) *cost.SizeEstimate { return nil }

func (noCostHints) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}
