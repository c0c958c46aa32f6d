package policy

import (
	"path"
	"slices"
	"strings"
)

// Commands find and xargs run (branch policy45). Deny and approve rules
// match them as any wrapper's (catches: "find . -exec rm {} ;" matches
// "rm *"); an allow rule must also match each of them as a simple command
// of its own, as it must match rsync -e's command: under ["find *"],
// "find . -name x" runs but "find . -exec rm {} ;" is held until a
// pattern such as "rm *" matches "rm {}". The command -exec, -execdir,
// -ok or -okdir runs is its words up to ";" or "{} +"; the command xargs
// runs is its words after xargs's options, followed by a word "{}" for
// the arguments it reads from its input (none with -I or -i, whose
// replacement string is among the words already).

// xargsArgOptions are xargs's short options that take the next word when
// no value is attached; -e, -i and -l take only an attached one.
const xargsArgOptions = "adEILnPs"

// addRunInner adds to the allow list the commands find or xargs in words
// (as words[0] or after a wrapper) runs.
func (pc *parsedCommand) addRunInner(words []cmdWord) {
	if k := commandAt(words, "find"); k >= 0 {
		for _, a := range findActions(words[k:]) {
			pc.appendAllowOnly(a.words)
		}
	}
	if k := commandAt(words, "xargs"); k >= 0 {
		if inner := xargsCommand(words[k:]); inner != nil {
			pc.appendAllowOnly(inner)
		}
	}
}

// appendAllowOnly records a simple command only an allow rule matches.
func (pc *parsedCommand) appendAllowOnly(words []cmdWord) {
	if pc.allowed == nil {
		pc.allowed = slices.Clone(pc.Simple)
	}
	pc.allowed = append(pc.allowed, words)
}

// xargsCommand returns the command xargs's words (words[0] is xargs)
// run, with "{}" standing for the arguments read from input; nil when
// there is none (xargs then runs echo).
func xargsCommand(words []cmdWord) []cmdWord {
	replace := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		opt, _, hasVal := strings.Cut(w.lit, "=")
		switch {
		case w.unknown:
			return words[i:]
		case w.lit == "--":
			if i+1 < len(words) {
				return xargsInner(words[i+1:], replace)
			}
			return nil
		case strings.HasPrefix(w.lit, "--"):
			if longOption(opt, "--replace") {
				replace = true
			}
			if !hasVal && longOption(opt, "--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var") {
				i++
			}
		case strings.HasPrefix(w.lit, "-") && w.lit != "-":
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				if c == 'I' || c == 'i' {
					replace = true
				}
				if strings.IndexByte(xargsArgOptions+"eil", c) < 0 {
					continue
				}
				if j == len(w.lit)-1 && strings.IndexByte(xargsArgOptions, c) >= 0 {
					i++
				}
				break
			}
		default:
			return xargsInner(words[i:], replace)
		}
	}
	return nil
}

func xargsInner(words []cmdWord, replace bool) []cmdWord {
	if replace {
		return words
	}
	return append(slices.Clip(words), cmdWord{lit: "{}"})
}

// What find's {} and xargs's arguments read from input may be (branch
// policy49): any path, so the command they run is checked again with
// each such word read as a path in a guarded directory. find . -name x
// -exec cp {} .git/hooks/pre-commit ';' was read only through the
// suffixes of find's words, where ';' is cp's last operand (its
// destination), and find .git/hooks -exec cp x {} ';' wrote a found path
// the matcher read as "{}". Now -exec, -execdir, -ok and -okdir's command
// (up to ";" or "{} +") is checked as a command of its own (checkRunner:
// writes, options that run programs, shells), once as written and once
// with each {} (also inside a word: GNU find replaces it there) read as
// START/.git/hooks/pre-commit for each start point; -execdir and -okdir
// run it in the found file's directory, any directory under the start
// points, so there every relative word but the program is also read
// under .git/hooks/. xargs's command is checked with its replacement
// string (-I R, -i, --replace) or the words it appends read as
// .git/hooks/pre-commit. A write to a found path is thus always opaque,
// whatever the start point: any directory may hold a Makefile or a .git.
const foundPath = ".git/hooks/pre-commit"

// maxRunDepth bounds find and xargs nested in each other's commands
// (find . -exec xargs find …): deeper ones are opaque.
const maxRunDepth = 3

// checkRunInnerDepth reports, through opaque, a command find or xargs in
// words (as words[0] or after a wrapper) runs that writes a guarded file
// or runs code the matcher cannot read, reading found paths and input
// arguments as foundPath (or as the names find's filters allow,
// commandfindnames.go), depth levels of find and xargs deep. fed, when
// not nil, holds the paths xargs's input arguments are read as
// (find … -print0 | xargs -0, commandfindnames.go).
func checkRunInnerDepth(words []cmdWord, depth int, fed []string, opaque func(string)) {
	inner := func(what string, variant []cmdWord) {
		if len(variant) == 0 {
			return
		}
		checkRunner(variant, func(why string) { opaque(what + ": " + why) })
		if commandAt(variant, "find") < 0 && commandAt(variant, "xargs") < 0 {
			return
		}
		if depth+1 >= maxRunDepth {
			opaque(what + " runs find or xargs nested too deep to read")
			return
		}
		checkRunInnerDepth(variant, depth+1, nil, opaque)
	}
	if k := commandAt(words, "find"); k >= 0 {
		starts := findStarts(words[k:])
		var found [][]string
		if slices.ContainsFunc(words[k:], func(w cmdWord) bool { return w.lit == "-name" || w.lit == "-iname" }) {
			found, _ = findFoundNames(words[k:]) // find . -name '*.go' -exec sed -i … (commandfindnames.go)
		}
		for ai, a := range findActions(words[k:]) {
			inner("find "+a.action, a.words)
			if ai < len(found) && found[ai] != nil && foundWordsPlain(a.words, "{}") {
				for _, v := range foundVariants(a.words, "{}", found[ai]) {
					inner("find "+a.action, v)
				}
			} else {
				for _, s := range starts {
					inner("find "+a.action, replaceWords(a.words, "{}", s+"/"+foundPath))
				}
			}
			if a.action == "-execdir" || a.action == "-okdir" {
				inner("find "+a.action, underDir(a.words, path.Dir(foundPath)))
			}
		}
	}
	if k := commandAt(words, "xargs"); k >= 0 {
		if cmd := xargsCommand(words[k:]); cmd != nil {
			repl := xargsReplace(words[k:])
			if fed != nil && k == 0 && foundWordsPlain(cmd, repl) {
				for _, v := range foundVariants(cmd, repl, fed) {
					inner("xargs", v)
				}
			} else {
				inner("xargs", replaceWords(cmd, repl, foundPath))
			}
		}
	}
}

// findAction is a command find runs: the action (-exec, -execdir, -ok,
// -okdir) and its words up to ";" or "{} +".
type findAction struct {
	action string
	words  []cmdWord
}

// findActions returns the commands find's words (words[0] is find) run.
func findActions(words []cmdWord) []findAction {
	var out []findAction
	for i := 1; i < len(words); i++ {
		if contains(findValueTests, words[i].lit) {
			i++ // -name -exec names a file "-exec" (branch cmd50b)
			continue
		}
		if !contains([]string{"-exec", "-execdir", "-ok", "-okdir"}, words[i].lit) {
			continue
		}
		action, start := words[i].lit, i+1
		for i = start; i < len(words); i++ {
			if words[i].lit == ";" || words[i].lit == "+" && words[i-1].lit == "{}" {
				break
			}
		}
		if i > start {
			out = append(out, findAction{action: action, words: words[start:i]})
		}
	}
	return out
}

// findStarts returns find's start points (words[0] is find): the words
// after its options -H, -L, -P, -D LIST and -O LEVEL up to the first
// that begins with "-", "(" or "!"; "." when there is none.
func findStarts(words []cmdWord) []string {
	var starts []string
	i := 1
	for ; i < len(words); i++ {
		w := words[i].lit
		if w == "-D" {
			i++
			continue
		}
		if w == "-H" || w == "-L" || w == "-P" || strings.HasPrefix(w, "-O") {
			continue
		}
		break
	}
	for ; i < len(words); i++ {
		w := words[i].lit
		if strings.HasPrefix(w, "-") || w == "(" || w == "!" || w == "," {
			break
		}
		starts = append(starts, strings.TrimRight(fileOf(words[i]), "/"))
	}
	if len(starts) == 0 {
		return []string{"."}
	}
	return starts
}

// replaceWords returns a copy of words with each occurrence of old in a
// literal word replaced by repl; nil when no word holds old.
func replaceWords(words []cmdWord, old, repl string) []cmdWord {
	if old == "" || !slices.ContainsFunc(words, func(w cmdWord) bool { return strings.Contains(w.lit, old) }) {
		return nil
	}
	out := slices.Clone(words)
	for i := range out {
		if !out[i].unknown {
			out[i].lit = strings.ReplaceAll(out[i].lit, old, repl)
		}
	}
	return out
}

// underDir returns a copy of words with every relative word after the
// program that is no option read under dir (a command -execdir runs in
// a directory the matcher does not know); nil when there is none.
func underDir(words []cmdWord, dir string) []cmdWord {
	var out []cmdWord
	for i, w := range words {
		if i == 0 || w.unknown || w.lit == "" || strings.HasPrefix(w.lit, "-") || strings.HasPrefix(w.lit, "/") || strings.HasPrefix(w.lit, "~") {
			continue
		}
		if out == nil {
			out = slices.Clone(words)
		}
		out[i].lit = dir + "/" + w.lit
	}
	return out
}

// xargsReplace returns the replacement string of xargs's words (words[0]
// is xargs): -I R, -IR, -iR, --replace=R, "{}" for -i or --replace
// without one and for the arguments xargsCommand appends.
func xargsReplace(words []cmdWord) string {
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		opt, val, hasVal := strings.Cut(w, "=")
		switch {
		case w == "--" || !strings.HasPrefix(w, "-") || w == "-":
			return "{}"
		case strings.HasPrefix(w, "--"):
			if longOption(opt, "--replace") {
				if hasVal && val != "" {
					return val
				}
				return "{}"
			}
			if !hasVal && longOption(opt, "--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var") {
				i++
			}
		default:
			for j := 1; j < len(w); j++ {
				c := w[j]
				switch {
				case c == 'I':
					return fileOf(valueWord(words, &i, w[j+1:], true))
				case c == 'i':
					if j+1 < len(w) {
						return w[j+1:]
					}
					return "{}"
				case strings.IndexByte(xargsArgOptions+"el", c) >= 0:
					if j == len(w)-1 && strings.IndexByte(xargsArgOptions, c) >= 0 {
						i++
					}
					j = len(w)
				}
			}
		}
	}
	return "{}"
}
