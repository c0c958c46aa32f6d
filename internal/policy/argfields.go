package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// ArgFields returns the top-level argument fields the When condition src
// reads by name, sorted and without duplicates: args.x, args["x"],
// has(args.x) and "x" in args. Fields read through a
// computed key (args[k]) are not listed. It fails when src does not parse.
func ArgFields(src string) ([]string, error) {
	env, err := newCELEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Parse(src)
	if iss != nil && iss.Err() != nil {
		return nil, errors.New(strings.TrimPrefix(iss.Err().Error(), "ERROR: "))
	}
	var fields []string
	isArgs := func(e celast.Expr) bool { return e.Kind() == celast.IdentKind && e.AsIdent() == "args" }
	literal := func(e celast.Expr) (string, bool) {
		if e.Kind() != celast.LiteralKind {
			return "", false
		}
		s, ok := e.AsLiteral().(types.String)
		return string(s), ok
	}
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.SelectKind:
			if s := e.AsSelect(); isArgs(s.Operand()) {
				fields = append(fields, s.FieldName())
			}
		case celast.CallKind:
			c := e.AsCall()
			a := c.Args()
			if len(a) != 2 {
				return
			}
			switch c.FunctionName() {
			case operators.Index, operators.OptIndex:
				if k, ok := literal(a[1]); ok && isArgs(a[0]) {
					fields = append(fields, k)
				}
			case operators.In, operators.OldIn:
				if k, ok := literal(a[0]); ok && isArgs(a[1]) {
					fields = append(fields, k)
				}
			}
		}
	}))
	slices.Sort(fields)
	return slices.Compact(fields), nil
}

// ToolArgs is what one tool's input schema declares: the tool's real
// server and name and the names of its top-level properties. Open is true
// when the schema does not say that those are all its fields (a $ref,
// allOf, anyOf…, or other fields admitted explicitly): a field it does
// not list may still be the tool's, so none is reported as unknown.
type ToolArgs struct {
	Server, Tool string
	Properties   []string
	Open         bool
}

// UnknownArgFields reports each When condition of p that reads an
// argument field (see [ArgFields]), and each Command selector whose
// Argument names a field, that no tool of tools the rule can match
// declares: most likely a typo, since the rule then never sees the value
// (reading a missing field is an evaluation error, which never allows: an
// allow rule does not match, a deny or approve rule matches every such
// call). A rule that matches none of tools is not checked (its tools are
// unknown), and neither is a field when one of the tools the rule matches
// has an Open schema. Each error is a *[FieldError] with Key "when" or
// "command.argument"; p must be valid.
func (p *Policy) UnknownArgFields(tools []ToolArgs) []error {
	var errs []error
	for i := range p.Rules {
		r := &p.Rules[i]
		var fields []string
		if r.When != "" {
			fields, _ = ArgFields(r.When)
		}
		if len(fields) == 0 && r.Command == nil {
			continue
		}
		var matched []*ToolArgs
		for k := range tools {
			if ruleMatchesTool(r, tools[k].Server, tools[k].Tool) {
				matched = append(matched, &tools[k])
			}
		}
		if len(matched) == 0 || slices.ContainsFunc(matched, func(t *ToolArgs) bool { return t.Open }) {
			continue
		}
		undeclared := func(f string) string {
			if slices.ContainsFunc(matched, func(t *ToolArgs) bool { return slices.Contains(t.Properties, f) }) {
				return ""
			}
			if len(matched) == 1 {
				t := matched[0]
				return fmt.Sprintf("the input schema of %s/%s does not declare it (it declares: %s)", t.Server, t.Tool, declared(t.Properties))
			}
			names := make([]string, 0, len(matched))
			for _, t := range matched {
				names = append(names, t.Server+"/"+t.Tool)
			}
			return fmt.Sprintf("none of the %d tools the rule matches declares it (%s)", len(matched), strings.Join(names, ", "))
		}
		for _, f := range fields {
			what := undeclared(f)
			if what == "" {
				continue
			}
			outcome := "so the condition errors where it reads it and this allow rule does not match those calls"
			if r.Effect != Allow {
				outcome = fmt.Sprintf("so the condition errors where it reads it, which counts as a match: this %s rule decides those calls", r.Effect)
			}
			errs = append(errs, &FieldError{Rule: i, Key: "when",
				Err: fmt.Errorf("%s: when reads args.%s, but %s; %s", ruleLabel(p, i), f, what, outcome)})
		}
		if r.Command != nil {
			if what := undeclared(r.Command.Argument); what != "" {
				outcome := "so the command is missing from every call and this allow rule never matches"
				if r.Effect != Allow {
					outcome = fmt.Sprintf("so the command is missing from every call, which counts as a match: this %s rule decides every call of those tools", r.Effect)
				}
				errs = append(errs, &FieldError{Rule: i, Key: "command.argument",
					Err: fmt.Errorf("%s: command.argument is %q, but %s; %s", ruleLabel(p, i), r.Command.Argument, what, outcome)})
			}
		}
	}
	return errs
}

func declared(props []string) string {
	if len(props) == 0 {
		return "nothing"
	}
	return strings.Join(props, ", ")
}

// ruleMatchesTool reports whether rule r's server and tools selectors
// match tool on server (its other selectors are not looked at).
func ruleMatchesTool(r *Rule, server, tool string) bool {
	if r.Server != "" {
		if ok, err := Match(r.Server, server); err != nil || !ok {
			return false
		}
	}
	if len(r.Tools) == 0 {
		return len(r.Resources) == 0 && len(r.Prompts) == 0
	}
	for _, pat := range r.Tools {
		if ok, err := Match(pat, tool); pat == "" || (err == nil && ok) {
			return true
		}
	}
	return false
}
