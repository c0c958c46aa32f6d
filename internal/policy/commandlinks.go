package policy

import (
	"fmt"
	"path"
	"strings"
)

// Writing through a link (branch policy49b). The matcher judges a write by
// the name it writes to, so "ln -s .git/hooks h && cp evil h/pre-commit"
// planted a hook under a harmless name, as did cp -s .git/config c and a
// later cp evil c. A command that creates a link (ln with or without -s,
// cp -s, cp -l, link, mklink) whose target is a guarded path (codeFile,
// codeDir, aboveCodeDirs: .git/…, ~, ~/.bashrc, /etc) or lies outside the
// working directory (an absolute path, ~, a relative path climbing out
// with ..) is read as a write to that target: it is opaque, so deny and
// approve rules match it and an allow rule never allows it. A symbolic
// link's relative target is read against the link's directory (and, as
// the link name may be an existing directory, against that directory);
// ln -r's and a hard link's against the working directory. A target that
// is not literal is opaque. Links already in the tree (a checked-out
// repository's, an archive's) are not seen.

// linkCode says why name (a base name) with words creates a link to a
// guarded path or outside the working directory, or "".
func linkCode(name string, words []cmdWord) string {
	if why := linkCopyCode(name, words); why != "" { // mv /tmp/x ., cp -a /etc/x . (commandlinkcopy.go)
		return why
	}
	var links []linkOp
	switch name {
	case "ln", "gln":
		links = lnLinks(words)
	case "cp", "gcp":
		links = cpLinks(words)
	case "link":
		if ops := positionalWords(words[1:]); len(ops) == 2 {
			links = []linkOp{{target: ops[0], name: fileOf(ops[1])}}
		}
	case "mklink":
		// mklink [/D | /H | /J] LINK TARGET (cmd.exe's builtin).
		symbolic := true
		var ops []cmdWord
		for _, w := range words[1:] {
			switch {
			case strings.EqualFold(w.lit, "/h"):
				symbolic = false
			case strings.HasPrefix(w.lit, "/") && len(w.lit) == 2:
			default:
				ops = append(ops, w)
			}
		}
		if len(ops) == 2 {
			t := ops[1]
			t.lit = strings.ReplaceAll(t.lit, `\`, "/")
			links = []linkOp{{target: t, name: strings.ReplaceAll(fileOf(ops[0]), `\`, "/"), symbolic: symbolic}}
		}
	}
	for _, l := range links {
		if why := l.code(name); why != "" {
			return why
		}
	}
	return ""
}

// linkOp is one link a command creates: the target word as written, the
// link's name, whether it is symbolic, and whether its relative target
// is read against the working directory (ln -r).
type linkOp struct {
	target   cmdWord
	name     string
	symbolic bool
	relative bool
}

// code says why l links to a guarded path or outside the working
// directory, or "".
func (l linkOp) code(prog string) string {
	if l.target.unknown {
		return fmt.Sprintf("%s makes a link to a target that is not literal, which may be a guarded path a later write reaches through the link", prog)
	}
	t := l.target.lit
	if l.symbolic && (relocatableLink(t, path.Dir(l.name), l.relative) || l.relative && relocatableLink(t, l.name, true)) {
		return fmt.Sprintf("%s makes %q a link to %q, which climbs out with \"..\": moved up later (mv), it leads outside the working directory, which the matcher cannot see", // commandlinkcopy.go
			prog, l.name, t)
	}
	resolved := []string{t}
	if l.symbolic && !l.relative && !path.IsAbs(t) {
		resolved = []string{path.Join(path.Dir(l.name), t), path.Join(l.name, t)}
	}
	for _, r := range resolved {
		if linkOutside(r) || codeFile(r) || codeDir(r) || aboveCodeDirs(r) {
			return fmt.Sprintf("%s makes %q a link to %q, a guarded path or one outside the working directory: a later write through the link writes there, which the matcher cannot see",
				prog, l.name, t)
		}
	}
	return ""
}

// linkOutside reports whether p names a place outside the working
// directory: an absolute path, a home directory (~), or a relative path
// that climbs out with "..".
func linkOutside(p string) bool {
	c := path.Clean(p)
	return path.IsAbs(c) || strings.HasPrefix(c, "~") || c == ".." || strings.HasPrefix(c, "../") ||
		len(c) > 1 && c[1] == ':' // C:\… on Windows
}

// positionalWords returns words that are not options (after "--", every
// word).
func positionalWords(words []cmdWord) []cmdWord {
	var out []cmdWord
	for i, w := range words {
		if w.lit == "--" && !w.unknown {
			return append(out, words[i+1:]...)
		}
		if w.unknown || !strings.HasPrefix(w.lit, "-") || w.lit == "-" {
			out = append(out, w)
		}
	}
	return out
}

// linkOperands reads ln's or cp's words: the operands, the -t directory,
// whether -T was given, and the short letters and long options seen.
// -S/--suffix and -t/--target-directory take a value.
func linkOperands(words []cmdWord) (ops []cmdWord, dir string, hasDir bool, o cmdOptions) {
	for i := 1; i < len(words); i++ {
		w := words[i]
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case w.unknown:
			ops = append(ops, w)
		case w.lit == "--":
			ops = append(ops, words[i+1:]...)
			return ops, dir, hasDir, o
		case strings.HasPrefix(w.lit, "--"):
			o.longs = append(o.longs, opt)
			switch {
			case longOption(opt, "--target-directory"):
				dir, hasDir = fileOf(valueWord(words, &i, val, hasVal)), true
			case longOption(opt, "--suffix") && !hasVal:
				i++
			}
		case strings.HasPrefix(w.lit, "-") && w.lit != "-":
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				o.shorts += string(c)
				if c == 't' {
					dir, hasDir = fileOf(valueWord(words, &i, w.lit[j+1:], true)), true
					break
				}
				if c == 'S' {
					valueWord(words, &i, w.lit[j+1:], true)
					break
				}
			}
		default:
			ops = append(ops, w)
		}
	}
	return ops, dir, hasDir, o
}

// placeLinks returns the links made for targets given the operands'
// destination: each target under dir by its base name when hasDir, else
// the last operand as the link's name (or a directory it lands in), a
// lone operand linked into the working directory.
func placeLinks(ops []cmdWord, dir string, hasDir, symbolic, relative bool) []linkOp {
	var out []linkOp
	add := func(t cmdWord, name string) {
		out = append(out, linkOp{target: t, name: name, symbolic: symbolic, relative: relative})
	}
	switch {
	case hasDir:
		for _, t := range ops {
			add(t, dir+"/"+path.Base(fileOf(t)))
		}
	case len(ops) == 1:
		add(ops[0], path.Base(fileOf(ops[0])))
	case len(ops) > 1:
		last := fileOf(ops[len(ops)-1])
		for _, t := range ops[:len(ops)-1] {
			add(t, last)
			if len(ops) > 2 {
				add(t, last+"/"+path.Base(fileOf(t)))
			}
		}
	}
	return out
}

// lnLinks returns the links ln's words make: symbolic with -s or
// --symbolic, read against the working directory with -r or --relative.
func lnLinks(words []cmdWord) []linkOp {
	ops, dir, hasDir, o := linkOperands(words)
	symbolic := o.short("s") || o.long("--symbolic")
	relative := o.short("r") || o.long("--relative")
	return placeLinks(ops, dir, hasDir, symbolic, relative)
}

// cpLinks returns the links cp's words make with -s/--symbolic-link or
// -l/--link; none for a copy.
func cpLinks(words []cmdWord) []linkOp {
	ops, dir, hasDir, o := linkOperands(words)
	symbolic := o.short("s") || o.long("--symbolic-link")
	if !symbolic && !o.short("l") && !o.long("--link") {
		return nil
	}
	return placeLinks(ops, dir, hasDir, symbolic, false)
}
