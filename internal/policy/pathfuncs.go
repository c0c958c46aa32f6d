package policy

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// The path functions of When conditions (docs/policy.md "Paths"). They
// are lexical: they read the string, never the filesystem, so they cannot
// see symlinks. Paths are POSIX paths ("/" separates, "\" is an ordinary
// character), whatever the system toolgate runs on.
const (
	fnPathWithin = "path.within"
	fnPathClean  = "path.clean"
)

// pathFunctions declares path.within(string, string) bool and
// path.clean(string) string.
func pathFunctions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function(fnPathWithin, cel.Overload("path_within_string_string",
			[]*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
			cel.BinaryBinding(func(p, dir ref.Val) ref.Val {
				ps, ok1 := p.(types.String)
				ds, ok2 := dir.(types.String)
				if !ok1 || !ok2 {
					return types.NewErr("%s: want two strings", fnPathWithin)
				}
				in, err := pathWithin(string(ps), string(ds))
				if err != nil {
					return types.NewErr("%s: %s", fnPathWithin, err)
				}
				return types.Bool(in)
			}))),
		cel.Function(fnPathClean, cel.Overload("path_clean_string",
			[]*cel.Type{cel.StringType}, cel.StringType,
			cel.UnaryBinding(func(p ref.Val) ref.Val {
				ps, ok := p.(types.String)
				if !ok {
					return types.NewErr("%s: want a string", fnPathClean)
				}
				c, err := pathClean(string(ps))
				if err != nil {
					return types.NewErr("%s: %s", fnPathClean, err)
				}
				return types.String(c)
			}))),
	}
}

// pathClean returns the lexical clean form of p (path.Clean: repeated
// slashes and "." segments removed, no trailing slash), or an error when p
// is not a path the functions can place: empty, holding a NUL byte, not
// absolute (it does not start with "/": relative, "~", a drive letter), or
// with a ".." segment. A ".." is refused rather than cleaned away because
// removing it lexically is right only when the segment before it is not a
// symlink: a server that asks the kernel resolves /a/link/../x through
// link's target. The error text never quotes p (it may be an argument).
func pathClean(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("the path is empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", errors.New("the path holds a NUL byte")
	case p[0] != '/':
		return "", errors.New("the path is not absolute (it does not start with /)")
	}
	if strings.Contains(p, "..") {
		for seg := range strings.SplitSeq(p, "/") {
			if seg == ".." {
				return "", errors.New("the path has a '..' segment")
			}
		}
	}
	return path.Clean(p), nil
}

// pathWithin reports whether p names dir or something below it by name:
// both pass pathClean, and p's clean form is dir's or starts with dir's
// followed by "/" (so /tmp/workbench is not within /tmp/work). An error
// (see pathClean, for either argument) is never a false: a condition that
// errs never allows (an allow rule does not match, a deny or approve rule
// does), where a false in a deny or approve rule would let the call pass.
func pathWithin(p, dir string) (bool, error) {
	cp, err := pathClean(p)
	if err != nil {
		return false, err
	}
	cd, err := pathClean(dir)
	if err != nil {
		return false, fmt.Errorf("the directory: %w", err)
	}
	// Below dir: dir's clean form, then a "/" (dir "/" ends in one).
	rest, ok := strings.CutPrefix(cp, cd)
	return ok && (rest == "" || cd == "/" || rest[0] == '/'), nil
}

// checkPathLiterals refuses a path.within whose directory is a string
// literal that no call could be within (an error on every call): it is a
// mistake the author would otherwise find only in Decision.Errors.
func checkPathLiterals(ast *cel.Ast) error {
	var errs []error
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.CallKind {
			return
		}
		c := e.AsCall()
		if c.FunctionName() != fnPathWithin || len(c.Args()) != 2 || c.Args()[1].Kind() != celast.LiteralKind {
			return
		}
		s, ok := c.Args()[1].AsLiteral().(types.String)
		if !ok {
			return
		}
		if _, err := pathClean(string(s)); err != nil {
			errs = append(errs, fmt.Errorf("%s(_, %q): the directory: %w", fnPathWithin, s, err))
		}
	}))
	return errors.Join(errs...)
}

// PathPrefixes reports each When condition of p that tests a string
// prefix which looks like an absolute path (x.startsWith("/tmp/work/");
// a bare "/" tests that a path is absolute and is not reported): the
// prefix also holds for "<prefix>../elsewhere", which a server resolves
// out of the directory, and "/tmp/work" also for "/tmp/workbench". Each
// error is a *[FieldError] with Key "when" (policy check warns with the
// line). p must be valid.
func (p *Policy) PathPrefixes() []error {
	var errs []error
	env, err := newCELEnv()
	if err != nil {
		return nil
	}
	for i := range p.Rules {
		src := p.Rules[i].When
		if src == "" || !strings.Contains(src, "startsWith") {
			continue
		}
		ast, iss := env.Parse(src)
		if iss != nil && iss.Err() != nil {
			continue
		}
		var prefixes []string
		celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
			if e.Kind() != celast.CallKind {
				return
			}
			c := e.AsCall()
			if c.FunctionName() != "startsWith" || !c.IsMemberFunction() || len(c.Args()) != 1 || c.Args()[0].Kind() != celast.LiteralKind {
				return
			}
			// A bare "/" tests that the path is absolute: fine.
			if s, ok := c.Args()[0].AsLiteral().(types.String); ok && strings.HasPrefix(string(s), "/") && strings.Trim(string(s), "/") != "" {
				prefixes = append(prefixes, string(s))
			}
		}))
		for _, pre := range prefixes {
			dir := strings.TrimRight(pre, "/")
			errs = append(errs, &FieldError{Rule: i, Key: "when", Err: fmt.Errorf(
				"%s: when tests the string prefix %q, which also holds for %q (a server resolves the '..' out of the directory); for a path, write path.within(ARG, %q) (docs/policy.md \"Paths\")",
				ruleLabel(p, i), pre, strings.TrimSuffix(pre, "/")+"/../elsewhere", dir)})
		}
	}
	return errs
}
