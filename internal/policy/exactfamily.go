package policy

import (
	"encoding/json"
	"regexp"
	"regexp/syntax"
	"strings"

	"cel.dev/cel-go/common/types"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
)

// A family of calls (branch policy47): docs/policy.md's
// "size(args) == 1 && args.command.matches('^…$')" names every call whose
// one argument is a string the pattern admits. OverruledExactCalls tests
// a few strings built from the pattern (familyExamples), each checked to
// be one the allow rule's condition admits (the evaluation reports the
// rule matched), so a warning names a call the allow rule would allow
// and never is a false alarm; a family whose other members alone are
// overruled goes unreported.

// maxFamilyExamples bounds the strings tried per pattern.
const maxFamilyExamples = 16

// familyArgs returns the argument objects of the strings a When
// condition "size(args) == 1 && args.K.matches(RE)" (either side of &&
// first, matches as a member or a global function, RE a string constant)
// admits, as familyExamples builds them, with those strings; ok is false
// for any other condition.
func familyArgs(src string) (args []json.RawMessage, examples []string, ok bool) {
	if src == "" {
		return nil, nil, false
	}
	env, err := newCELEnv()
	if err != nil {
		return nil, nil, false
	}
	parsed, iss := env.Parse(src)
	if iss != nil && iss.Err() != nil {
		return nil, nil, false
	}
	root := parsed.NativeRep().Expr()
	if root.Kind() != celast.CallKind || root.AsCall().FunctionName() != operators.LogicalAnd || len(root.AsCall().Args()) != 2 {
		return nil, nil, false
	}
	a, b := root.AsCall().Args()[0], root.AsCall().Args()[1]
	if !sizeOfArgsIsOne(a) {
		a, b = b, a
	}
	if !sizeOfArgsIsOne(a) {
		return nil, nil, false
	}
	key, pattern, ok := argMatches(b)
	if !ok {
		return nil, nil, false
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, nil, false
	}
	for _, s := range familyExamples(pattern) {
		if !re.MatchString(s) {
			continue // an empty-width assertion (\b) the builder does not honour
		}
		raw, err := json.Marshal(map[string]string{key: s})
		if err != nil {
			continue
		}
		args = append(args, raw)
		examples = append(examples, s)
	}
	return args, examples, len(args) > 0
}

// isArgsIdent reports whether e is the variable args.
func isArgsIdent(e celast.Expr) bool { return e.Kind() == celast.IdentKind && e.AsIdent() == "args" }

// sizeOfArgsIsOne reports whether e is "size(args) == 1" (or args.size(),
// or 1 first).
func sizeOfArgsIsOne(e celast.Expr) bool {
	if e.Kind() != celast.CallKind || e.AsCall().FunctionName() != operators.Equals || len(e.AsCall().Args()) != 2 {
		return false
	}
	x, y := e.AsCall().Args()[0], e.AsCall().Args()[1]
	if x.Kind() == celast.LiteralKind {
		x, y = y, x
	}
	if y.Kind() != celast.LiteralKind || y.AsLiteral() != types.Int(1) || x.Kind() != celast.CallKind {
		return false
	}
	c := x.AsCall()
	if c.FunctionName() != "size" {
		return false
	}
	if c.IsMemberFunction() {
		return len(c.Args()) == 0 && isArgsIdent(c.Target())
	}
	return len(c.Args()) == 1 && isArgsIdent(c.Args()[0])
}

// argMatches returns K and RE of e, "args.K.matches(RE)" or
// "matches(args.K, RE)" with RE a string constant.
func argMatches(e celast.Expr) (key, pattern string, ok bool) {
	if e.Kind() != celast.CallKind || e.AsCall().FunctionName() != "matches" {
		return "", "", false
	}
	c := e.AsCall()
	operands := c.Args()
	if c.IsMemberFunction() {
		operands = append([]celast.Expr{c.Target()}, operands...)
	}
	if len(operands) != 2 {
		return "", "", false
	}
	sel, lit := operands[0], operands[1]
	if sel.Kind() != celast.SelectKind || sel.AsSelect().IsTestOnly() || !isArgsIdent(sel.AsSelect().Operand()) ||
		lit.Kind() != celast.LiteralKind {
		return "", "", false
	}
	s, isString := lit.AsLiteral().(types.String)
	if !isString {
		return "", "", false
	}
	return sel.AsSelect().FieldName(), string(s), true
}

// familyExamples returns up to maxFamilyExamples strings built from the
// RE2 pattern: each alternative, a repetition zero times (where it may)
// and once, a class by its first character. A caller checks that each
// matches: an empty-width assertion is built as nothing.
func familyExamples(pattern string) []string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	return examplesOf(re.Simplify())
}

func examplesOf(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{string(re.Rune)}
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return nil
		}
		return []string{string(re.Rune[0])}
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return []string{"a"}
	case syntax.OpCapture:
		return examplesOf(re.Sub[0])
	case syntax.OpStar, syntax.OpQuest:
		return capped(append([]string{""}, examplesOf(re.Sub[0])...))
	case syntax.OpPlus:
		return examplesOf(re.Sub[0])
	case syntax.OpRepeat:
		one := examplesOf(re.Sub[0])
		if len(one) == 0 {
			return nil
		}
		return []string{strings.Repeat(one[0], max(re.Min, 0))}
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			next := examplesOf(sub)
			var joined []string
			for _, a := range out {
				for _, b := range next {
					joined = append(joined, a+b)
				}
			}
			out = capped(joined)
		}
		return out
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			out = append(out, examplesOf(sub)...)
		}
		return capped(out)
	case syntax.OpNoMatch:
		return nil
	}
	return []string{""} // ^, $, \b, \B, (?:)
}

func capped(s []string) []string {
	if len(s) > maxFamilyExamples {
		return s[:maxFamilyExamples]
	}
	return s
}
