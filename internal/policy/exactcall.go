package policy

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
)

// An Overruled is an allow rule that names exactly one call, which an
// enforced deny or approve rule also matches: the allow rule never allows
// it (docs/policy.md, "Allowing a call no command rule allows", with the
// other rule's exception left out).
type Overruled struct {
	// Rule is the allow rule's index in Policy.Rules, By the index of the
	// rule that decides the call instead.
	Rule, By int
	// Principal is the caller the call was evaluated for ("" when the
	// allow rule names none).
	Principal string
	// Example is, for an allow rule that names a family of calls
	// (familyArgs), the string of the one argument the overruled call
	// holds; "" for an exact call.
	Example string
}

// OverruledExactCalls evaluates the one call each enforced allow rule of
// the form "server: S, tools: [T], when: args == {…}" names (a literal
// server and tool, no command, annotations, resources or prompts, and a
// constant on the other side of ==), for each literal principal it lists
// (or none), and reports those that another rule decides: a deny or
// approve rule matches it too, most often a command rule that cannot read
// the command. agent returns the principal (groups, tenant, on-behalf-of)
// of an agent id as the config declares it, or one with only the id. A
// deciding rule that selects annotations (unknown here) is not reported,
// nor is a principal given as a group, so a report is never a false
// alarm. Since branch policy47 an allow rule of the form "size(args) ==
// 1 && args.K.matches(RE)" counts too: a few strings RE admits
// (familyArgs) are evaluated, and the first that another rule decides
// is reported with Example set. p must be valid.
func (p *Policy) OverruledExactCalls(agent func(id string) Principal) []Overruled {
	var out []Overruled
	var e *Evaluator
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Effect != Allow || p.monitored(r) || r.Command != nil || r.Annotations != nil ||
			len(r.Resources) > 0 || len(r.Prompts) > 0 || len(r.Tools) != 1 ||
			!literalName(r.Server) || !literalName(r.Tools[0]) {
			continue
		}
		var calls []json.RawMessage
		var examples []string
		if args, ok := exactArgs(r.When); ok {
			calls, examples = []json.RawMessage{args}, []string{""}
		} else if calls, examples, ok = familyArgs(r.When); !ok {
			continue
		}
		principals := []Principal{{}}
		if len(r.Principals) > 0 {
			principals = principals[:0]
			for _, id := range r.Principals {
				if !strings.HasPrefix(id, "group:") && literalName(id) {
					principals = append(principals, agent(id))
				}
			}
		}
		if e == nil {
			var err error
			if e, err = Compile(p); err != nil {
				return nil
			}
		}
		if o, ok := overruled(p, e, r, i, principals, calls, examples); ok {
			out = append(out, o)
		}
	}
	return out
}

// overruled evaluates calls (the allow rule r, at index i, names each;
// examples[k] is calls[k]'s family string) for each of principals and
// returns the first that an enforced deny or approve rule decides while
// r matches it too.
func overruled(p *Policy, e *Evaluator, r *Rule, i int, principals []Principal, calls []json.RawMessage, examples []string) (Overruled, bool) {
	for k, args := range calls {
		for _, pr := range principals {
			d, err := e.Evaluate(Call{Server: r.Server, Tool: r.Tools[0], Arguments: args, Principal: pr})
			if err != nil || d.Effect == Allow || d.Rule == DefaultRule {
				continue
			}
			by := p.ruleIndex(d.Rule, d.Effect)
			if by < 0 || p.Rules[by].Annotations != nil || !slices.Contains(d.Matched, r.Name) {
				continue
			}
			return Overruled{Rule: i, By: by, Principal: pr.ID, Example: examples[k]}, true
		}
	}
	return Overruled{}, false
}

// ruleIndex is the index of the first enforced rule named name with
// effect eff, or -1.
func (p *Policy) ruleIndex(name string, eff Effect) int {
	for i := range p.Rules {
		if p.Rules[i].Name == name && p.Rules[i].Effect == eff && !p.monitored(&p.Rules[i]) {
			return i
		}
	}
	return -1
}

// literalName reports whether s is non-empty and holds no glob character.
func literalName(s string) bool { return s != "" && !strings.ContainsAny(s, `*?[\`) }

// exactArgs returns the JSON arguments a When condition "args == C" (or
// "C == args") names, C an expression without variables that evaluates to
// a map; ok is false for any other condition.
func exactArgs(src string) (json.RawMessage, bool) {
	if src == "" {
		return nil, false
	}
	env, err := newCELEnv()
	if err != nil {
		return nil, false
	}
	parsed, iss := env.Parse(src)
	if iss != nil && iss.Err() != nil {
		return nil, false
	}
	root := parsed.NativeRep().Expr()
	if root.Kind() != celast.CallKind || root.AsCall().FunctionName() != operators.Equals || len(root.AsCall().Args()) != 2 {
		return nil, false
	}
	isArgs := func(e celast.Expr) bool { return e.Kind() == celast.IdentKind && e.AsIdent() == "args" }
	a, b := root.AsCall().Args()[0], root.AsCall().Args()[1]
	if isArgs(b) {
		a, b = b, a
	}
	if !isArgs(a) || b.Kind() != celast.MapKind {
		return nil, false
	}
	constant := true
	celast.PreOrderVisit(b, celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.IdentKind || e.Kind() == celast.CallKind || e.Kind() == celast.SelectKind || e.Kind() == celast.ComprehensionKind {
			constant = false
		}
	}))
	if !constant {
		return nil, false
	}
	text, err := cel.ExprToString(b, parsed.NativeRep().SourceInfo())
	if err != nil {
		return nil, false
	}
	checked, iss := env.Compile(text)
	if iss != nil && iss.Err() != nil {
		return nil, false
	}
	prg, err := env.Program(checked)
	if err != nil {
		return nil, false
	}
	v, _, err := prg.Eval(cel.NoVars())
	if err != nil {
		return nil, false
	}
	native, err := v.ConvertToNative(reflect.TypeFor[map[string]any]())
	if err != nil {
		return nil, false
	}
	raw, err := json.Marshal(native)
	if err != nil {
		return nil, false
	}
	return raw, true
}
