package policy

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Array subscripts that bash evaluates as code. When bash reads a string
// as a variable name or an arithmetic expression, an array subscript in it
// is expanded, command substitutions included: printf -v 'a[$(rm x)]' y,
// read 'a[$(rm x)]', test -v 'a[$(rm x)]' and [[ 'a[$(rm x)]' -eq 1 ]] each
// run rm although the matcher sees only quoted text (bash 5.2). A quoted
// string is code there, so such a command is opaque (deny and approve
// rules match it, an allow rule never allows it).

// namesBuiltin reports whether name (a base name) is a bash builtin that
// takes variable names or arithmetic expressions among its arguments.
func namesBuiltin(name string) bool {
	switch name {
	case "printf", "read", "test", "[", "declare", "typeset", "local", "export", "readonly", "let",
		"unset", "getopts", "wait", "mapfile", "readarray":
		return true
	}
	return false
}

// codeInSubscript reports whether s (text as written in the command)
// holds an array subscript with an expansion in it ('a[$(rm x)]',
// 'a[`rm x`]'), which bash runs when it evaluates s as a name or an
// arithmetic expression.
func codeInSubscript(s string) bool {
	i := strings.IndexByte(s, '[')
	return i >= 0 && strings.ContainsAny(s[i:], "$`")
}

// checkNames reports a simple command (words, from args) in which a
// names builtin, as the command or after a wrapper (command printf,
// builtin read), gets an argument that may be code: a literal holding
// codeInSubscript, or a word with an expansion in a name's place (any
// argument of read, unset, getopts, wait and the declare family; the value
// of printf's and test's -v).
func checkNames(words []cmdWord, args []*syntax.Word, opaque func(string)) {
	for k, w := range words {
		if w.unknown || !namesBuiltin(path.Base(w.lit)) {
			continue
		}
		name := path.Base(w.lit)
		for j := k + 1; j < len(words); j++ {
			a := words[j]
			switch {
			case !a.unknown && codeInSubscript(a.lit):
				opaque(subscriptWhy(name))
				return
			case a.unknown && (name != "printf" && name != "test" && name != "[" || words[j-1].lit == "-v" || startsWithLit(args[j], "-v")):
				opaque(subscriptWhy(name))
				return
			}
		}
		return
	}
}

// subscriptWhy is the Opaque reason of a name that may hold code.
func subscriptWhy(builtin string) string {
	return "a variable name or arithmetic expression given to " + builtin + " may hold an array subscript bash runs as code"
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
// declare, and the parameter expansions ${a[i]}, ${s:i}, ${!x} and ${x@P}.
func evaluatesText(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.TestClause, *syntax.ArithmCmd, *syntax.ArithmExp, *syntax.LetClause, *syntax.DeclClause:
		return true
	case *syntax.ParamExp:
		return n.Excl || n.Index != nil || n.Slice != nil || (n.Exp != nil && n.Exp.Op == syntax.OtherParamOps)
	}
	return false
}

// textMayBeCode reports whether n is quoted or literal text that holds
// codeInSubscript, or a $'...' string (whose escapes may spell one).
func textMayBeCode(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.Lit:
		return codeInSubscript(n.Value)
	case *syntax.SglQuoted:
		return n.Dollar || codeInSubscript(n.Value)
	}
	return false
}
