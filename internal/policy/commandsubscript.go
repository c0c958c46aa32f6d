package policy

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Text that bash runs as code although the matcher sees it as quoted text.
//
// When bash reads a string as a variable name or an arithmetic
// expression, an array subscript in it is expanded, command substitutions
// included, and a name in an arithmetic expression is evaluated through
// its value, recursively: printf -v 'a[$(rm x)]' y, read 'a[$(rm x)]',
// test -v 'a[$(rm x)]', [[ 'a[$(rm x)]' -eq 1 ]], and x set to such text
// then (( x )), each run rm (bash 5.2). With set -x, PS4 is expanded as a
// prompt (command substitutions included) before each traced command,
// and ${x@P} expands x's value the same way. Such commands are opaque:
// deny and approve rules match them, an allow rule never allows them.

// namesBuiltin reports whether name (a base name) is a bash builtin that
// takes variable names among its arguments.
func namesBuiltin(name string) bool {
	switch name {
	case "printf", "read", "test", "[", "declare", "typeset", "local", "export", "readonly", "let",
		"unset", "getopts", "wait", "mapfile", "readarray":
		return true
	}
	return false
}

// checkNames reports a simple command (words, from args) in which a
// names builtin, as the command or after a wrapper (command printf,
// builtin read), gets a name that may run code: one with a subscript
// ('a[x]' evaluates x, whose value may be 'b[$(rm y)]'), one that is not
// literal, or PS4 (see above). The names are printf's and test's -v
// operand, and every argument of the other names builtins. A names
// builtin that sets a variable (all but test and [; printf only with -v)
// is also unsafe for an allow rule, as an assignment is: printf -v PATH
// /tmp/x makes a later ls run /tmp/x/ls.
func checkNames(words []cmdWord, args []*syntax.Word, unsafe, opaque func(string)) {
	for k, w := range words {
		// A builtin runs only by a name without a slash: PREFIX=/usr/local
		// and --prefix=/usr/local name no "local" (branch policy45b).
		if w.unknown || strings.Contains(w.lit, "/") || !namesBuiltin(w.lit) {
			continue
		}
		name := w.lit
		if name != "printf" && name != "test" && name != "[" {
			unsafe(name + " sets shell variables (as an assignment does)")
		}
		for j := k + 1; j < len(words); j++ {
			a := words[j]
			if name == "printf" || name == "test" || name == "[" {
				switch {
				case words[j-1].lit == "-v" && !words[j-1].unknown:
				case startsWithLit(args[j], "-v") && (a.unknown || len(a.lit) > 2):
					a = cmdWord{lit: strings.TrimPrefix(a.lit, "-v"), unknown: a.unknown}
				default:
					continue
				}
				if name == "printf" {
					unsafe("printf -v sets a shell variable (as an assignment does)")
				}
			}
			if v, _, _ := strings.Cut(a.lit, "="); a.unknown || strings.Contains(a.lit, "[") || envVar(v) != envPlain && name != "unset" {
				opaque("a variable name given to " + name + " may make bash or a program run code (an array subscript, PS4, NODE_OPTIONS, PAGER, ...)")
				return
			}
		}
		return
	}
}

// startsWithLit reports whether w begins with the unquoted literal prefix
// ("-v" of -v"$x").
func startsWithLit(w *syntax.Word, prefix string) bool {
	if len(w.Parts) == 0 {
		return false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	return ok && strings.HasPrefix(l.Value, prefix)
}

// evaluatesText reports whether n is a place where bash evaluates text as
// an arithmetic expression or a variable name: [[ ]], (( )), $(( )), let,
// declare, and the parameter expansions ${a[i]}, ${s:i} and ${!x}.
func evaluatesText(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.TestClause, *syntax.ArithmCmd, *syntax.ArithmExp, *syntax.LetClause, *syntax.DeclClause:
		return true
	case *syntax.ParamExp:
		return n.Excl || n.Index != nil || n.Slice != nil
	}
	return false
}

// expandsPrompt reports whether n makes bash expand text as a prompt,
// command substitutions included: ${x@P}, or PS4 set or named (with set
// -x, PS4 is expanded before each traced command).
func expandsPrompt(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.ParamExp:
		return paramOp(n, "P")
	case *syntax.Assign:
		return n.Name != nil && n.Name.Value == "PS4"
	case *syntax.Lit:
		return n.Value == "PS4" || strings.HasPrefix(n.Value, "PS4=")
	}
	return false
}

// paramOp reports whether n is the transformation ${x@op}.
func paramOp(n *syntax.ParamExp, op string) bool {
	return n.Exp != nil && n.Exp.Op == syntax.OtherParamOps && n.Exp.Word != nil && n.Exp.Word.Lit() == op
}

// setsText reports whether n is text that may become a variable's value
// or an arithmetic expression and hold a subscript bash runs (see above):
// literal or quoted text with a '[' in it, a $'...' string or ${x@E}
// (whose escapes may spell one), a command substitution (printf '%b'
// spells one: [[ $(printf '%b' 'a\x5b\x24(rm y)]') -eq 1 ]] runs rm), or
// a value the string computes (an assignment or for loop over an
// expansion, a names builtin such as printf -v or read as a command).
func setsText(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.CmdSubst:
		return true
	case *syntax.ParamExp:
		return paramOp(n, "E")
	case *syntax.Lit:
		return n.Value != "[" && strings.Contains(n.Value, "[")
	case *syntax.SglQuoted:
		return n.Dollar || strings.Contains(n.Value, "[")
	case *syntax.Assign:
		return n.Value != nil && !literalOnly(n.Value)
	case *syntax.ForClause:
		wi, ok := n.Loop.(*syntax.WordIter)
		return !ok || !wi.InPos.IsValid() || slices.ContainsFunc(wi.Items, func(w *syntax.Word) bool { return !literalOnly(w) })
	case *syntax.CallExpr:
		if len(n.Args) == 0 {
			return false
		}
		name := path.Base(n.Args[0].Lit())
		return namesBuiltin(name) && name != "test" && name != "["
	}
	return false
}

// literalOnly reports whether w is made of literal and quoted literal
// parts only.
func literalOnly(w *syntax.Word) bool {
	return !literalWord(w, func(string) {}).unknown
}
