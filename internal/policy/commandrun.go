package policy

import (
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
		for _, inner := range findCommands(words[k:]) {
			pc.appendAllowOnly(inner)
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

// findCommands returns the commands of find's words (words[0] is find)
// that its -exec, -execdir, -ok and -okdir actions run.
func findCommands(words []cmdWord) [][]cmdWord {
	var out [][]cmdWord
	for i := 1; i < len(words); i++ {
		if !contains([]string{"-exec", "-execdir", "-ok", "-okdir"}, words[i].lit) {
			continue
		}
		start := i + 1
		for i = start; i < len(words); i++ {
			if words[i].lit == ";" || words[i].lit == "+" && words[i-1].lit == "{}" {
				break
			}
		}
		if i > start {
			out = append(out, words[start:i])
		}
	}
	return out
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
