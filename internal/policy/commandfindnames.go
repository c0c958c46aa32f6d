package policy

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// What find finds, read from its filters (branch cmd50b). A command find
// -exec runs, or xargs runs on find's output, is checked with each found
// path read as START/.git/hooks/pre-commit (commandrun.go), so every
// write to a found file was opaque: find . -name '*.go' -exec sed -i …
// {} + was held. Where find's expression before the action is a plain
// conjunction (tests joined by -a or nothing: no -o, !, -not, parentheses
// or commas) holding a -name or -iname glob whose literal ending is a
// source file's extension no guarded name has (safeFoundExts), every
// found file has that extension: the found path is then read as
// START/x.EXT, and as a directory of that name (cp Makefile {} copies
// into one), wherever START is a relative path inside the working
// directory that is not itself guarded. A file git, a shell, make or a
// package manager runs is never named so: .git's and .husky's files
// have fixed names (config, hooks/pre-commit, _/husky.sh), a search
// directory's programs are run by name (pytest, not pytest.go), and
// node_modules's code is .js, .cjs, .mjs, .json, .node or .ts (hence
// not in the list). Each word holding {} must be {} or {} followed by a
// suffix without a slash ({}.orig); -L, -H and -follow (links followed
// to anywhere), a start point that is not literal, absolute, climbing out
// or guarded, and any test this reading does not know keep the old
// reading. find ... -print0 | xargs -0 CMD is read the same way: xargs
// splits its input at blanks and quotes otherwise, and a found file
// named "Makefile x.go" then gives sed ./Makefile.

// safeFoundExts are extensions (lower case) of source and text files
// no guarded name ends with and no program runs from a guarded
// directory by its extension.
var safeFoundExts = []string{"go", "rs", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "java", "kt", "scala", "swift",
	"cs", "fs", "md", "rst", "adoc", "css", "scss", "less", "html", "htm", "proto", "sql", "tex", "csv"}

// findValueTests are find's tests and options that take one value.
var findValueTests = []string{"-name", "-iname", "-type", "-xtype", "-maxdepth", "-mindepth", "-mtime", "-mmin", "-atime",
	"-amin", "-ctime", "-cmin", "-newer", "-size", "-user", "-group", "-perm", "-path", "-ipath", "-wholename",
	"-iwholename", "-regex", "-iregex", "-regextype", "-links", "-uid", "-gid", "-inum", "-samefile", "-lname", "-ilname"}

// findPlainTests are find's tests, options and actions that take no
// value and run nothing.
var findPlainTests = []string{"-a", "-and", "-empty", "-readable", "-writable", "-executable", "-true", "-false",
	"-depth", "-mount", "-xdev", "-noleaf", "-nouser", "-nogroup", "-print", "-print0", "-delete", "-quit", "-ignore_readdir_race"}

// findFoundNames returns, for each action of find's words (words[0] is
// find; in findActions's order), the paths a found file is read as
// (START/x.EXT for each start point), nil for an action the filters do
// not narrow; and the same for the paths -print0 prints.
func findFoundNames(words []cmdWord) (actions [][]string, print0 []string) {
	starts, i, ok := findSafeStarts(words)
	ext := ""
	for ; i < len(words); i++ {
		w := words[i]
		switch {
		case w.unknown:
			ok = false
		case contains([]string{"-exec", "-execdir", "-ok", "-okdir"}, w.lit):
			start := i + 1
			for i = start; i < len(words); i++ {
				if words[i].lit == ";" || words[i].lit == "+" && words[i-1].lit == "{}" {
					break
				}
			}
			if i > start {
				actions = append(actions, foundAt(starts, ext, ok))
			}
		case w.lit == "-print0":
			print0 = foundAt(starts, ext, ok)
		case contains(findValueTests, w.lit) && i+1 < len(words) && contains([]string{"-exec", "-execdir", "-ok", "-okdir"}, words[i+1].lit):
			return nil, nil // -name -exec: findActions would read an action there, and the two lists would not line up
		case w.lit == "-name" || w.lit == "-iname":
			if i+1 < len(words) {
				i++
				if e := globExt(words[i]); e != "" {
					ext = e
				}
			}
		case contains(findValueTests, w.lit):
			i++
		case contains(findPlainTests, w.lit):
		default:
			ok = false // -o, !, (, -follow, -printf, ...: not read
		}
	}
	return actions, print0
}

// foundAt returns the paths a found file is read as, or nil.
func foundAt(starts []string, ext string, ok bool) []string {
	if !ok || ext == "" {
		return nil
	}
	out := make([]string, len(starts))
	for k, s := range starts {
		out[k] = s + "/x." + ext
	}
	return out
}

// findSafeStarts returns find's start points and the index of its first
// expression word; ok is false when one is not literal, lies outside the
// working directory or is guarded, or when -L, -H or -follow follows
// links.
func findSafeStarts(words []cmdWord) (starts []string, i int, ok bool) {
	ok = true
	for i = 1; i < len(words); i++ {
		w := words[i].lit
		if w == "-D" {
			i++
			continue
		}
		if w == "-L" || w == "-H" {
			ok = false
			continue
		}
		if w == "-P" || strings.HasPrefix(w, "-O") {
			continue
		}
		break
	}
	for ; i < len(words); i++ {
		w := words[i]
		if !w.unknown && (strings.HasPrefix(w.lit, "-") || w.lit == "(" || w.lit == "!" || w.lit == ",") {
			break
		}
		s := strings.TrimRight(w.lit, "/")
		if w.unknown || s == "" || linkOutside(s) || codeFile(s) || codeDir(s) || aboveCodeDirs(s) {
			ok = false
		}
		starts = append(starts, s)
	}
	if len(starts) == 0 {
		starts = []string{"."}
	}
	return starts, i, ok
}

// globExt returns the extension (lower case) every name matching find's
// glob w ends with when it is one of safeFoundExts, else "": the glob's
// text after its last pattern character must be ".EXT".
func globExt(w cmdWord) string {
	if w.unknown {
		return ""
	}
	g := w.lit
	meta := strings.LastIndexAny(g, `*?[]\`)
	dot := strings.LastIndexByte(g, '.')
	if dot <= meta || dot < 0 {
		return ""
	}
	ext := strings.ToLower(g[dot+1:])
	if !contains(safeFoundExts, ext) {
		return ""
	}
	return ext
}

// foundWordsPlain reports whether every word of a command holding repl
// (find's {} or xargs's replacement) is repl itself or repl followed by
// a suffix without a slash, so that a found name read as START/x.EXT
// stands for what the command writes.
func foundWordsPlain(words []cmdWord, repl string) bool {
	for _, w := range words {
		k := strings.Index(w.lit, repl)
		if k < 0 {
			continue
		}
		if k > 0 || strings.Contains(w.lit[len(repl):], "/") {
			return false
		}
	}
	return true
}

// foundVariants returns words with repl read as each found path and as
// a directory of that name.
func foundVariants(words []cmdWord, repl string, found []string) [][]cmdWord {
	found = append(found[:len(found):len(found)], prefixedFound(words, repl, found)...) // {}.json (commandfoundprefix.go)
	out := make([][]cmdWord, 0, 2*len(found))
	for _, f := range found {
		out = append(out, replaceWords(words, repl, f), replaceWords(words, repl, f+"/"))
	}
	return out
}

// xargsFedFound returns, for a pipeline's commands, the found paths an
// xargs reads when it is fed by "find … -print0" and splits at NULs
// (-0, --null; not -a, --arg-file, which read a file instead): each
// such xargs call with find's narrowed paths. nil when there is none.
func xargsFedFound(b *syntax.BinaryCmd, fed map[*syntax.CallExpr][]string) map[*syntax.CallExpr][]string {
	if b.Op != syntax.Pipe && b.Op != syntax.PipeAll {
		return fed
	}
	left, right := lastCall(b.X), firstCall(b.Y)
	if left == nil || right == nil {
		return fed
	}
	if len(left.Args) == 0 || len(right.Args) == 0 {
		return fed
	}
	if l, ok := plainLiteral(left.Args[0]); !ok || !contains([]string{"find", "gfind", "bfs"}, programName(path.Base(l))) {
		return fed
	}
	if r, ok := plainLiteral(right.Args[0]); !ok || programName(path.Base(r)) != "xargs" {
		return fed
	}
	rw, ok := literalArgs(right)
	if !ok || !xargsNull(rw) {
		return fed
	}
	lw, ok := literalArgs(left)
	if !ok {
		return fed
	}
	actions, print0 := findFoundNames(lw)
	if len(actions) > 0 || print0 == nil || slices.ContainsFunc(lw, func(w cmdWord) bool { return w.lit == "-print" }) {
		return fed
	}
	if fed == nil {
		fed = map[*syntax.CallExpr][]string{}
	}
	fed[right] = print0
	return fed
}

// xargsNull reports whether xargs's words split its input at NULs and
// read it from the input (-0 or --null; neither -a nor --arg-file).
func xargsNull(words []cmdWord) bool {
	null := false
	for _, w := range words[1:] {
		opt, _, _ := strings.Cut(w.lit, "=")
		switch {
		case w.lit == "--" || !strings.HasPrefix(w.lit, "-"):
			return null
		case strings.HasPrefix(w.lit, "--"):
			if longOption(opt, "--arg-file") {
				return false
			}
			null = null || longOption(opt, "--null")
		default:
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				if c == 'a' {
					return false
				}
				null = null || c == '0'
				if strings.IndexByte(xargsArgOptions+"eil", c) >= 0 {
					break
				}
			}
		}
	}
	return null
}

// literalArgs returns c's words when each is a plain literal.
func literalArgs(c *syntax.CallExpr) ([]cmdWord, bool) {
	out := make([]cmdWord, 0, len(c.Args))
	for _, a := range c.Args {
		s, ok := plainLiteral(a)
		if !ok {
			return nil, false
		}
		out = append(out, cmdWord{lit: s})
	}
	return out, true
}

// lastCall returns the simple command that ends a pipeline side, or nil.
func lastCall(st *syntax.Stmt) *syntax.CallExpr {
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		return c
	case *syntax.BinaryCmd:
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			return lastCall(c.Y)
		}
	}
	return nil
}

// firstCall returns the simple command that begins a pipeline side, or
// nil.
func firstCall(st *syntax.Stmt) *syntax.CallExpr {
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		return c
	case *syntax.BinaryCmd:
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			return firstCall(c.X)
		}
	}
	return nil
}

// containerNoFiles reports whether docker's or podman's words (words[0]
// is the program) run a subcommand that names containers, images or
// networks and writes no local file: docker stop ID, docker container
// rm ID (branch cmd50b: docker ps -q | xargs docker stop read the IDs
// as destinations). A global option before the subcommand (--config,
// -H) keeps the old reading: every operand a destination.
func containerNoFiles(name string, words []cmdWord) bool {
	if name != "docker" && name != "podman" || len(words) < 2 {
		return false
	}
	sub := words[1].lit
	if contains([]string{"container", "image", "network", "volume"}, sub) && len(words) > 2 {
		sub = words[2].lit
	}
	return !words[1].unknown && contains([]string{"stop", "start", "restart", "kill", "rm", "rmi", "ps", "ls", "logs",
		"inspect", "pause", "unpause", "wait", "top", "stats", "port", "images", "version", "info", "pull", "tag", "push",
		"history", "prune"}, sub)
}
