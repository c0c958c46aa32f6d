package policy

import (
	"fmt"
	"path"
	"strings"
)

// Formatters and fixers that rewrite files in place (branch cmd50): on
// 3eefbceb an allow rule naming prettier, gofmt, black, ruff, rustfmt,
// clang-format, eslint, isort, shfmt or terraform let them rewrite any
// file they were given: prettier --write .git/config, gofmt -w
// .git/hooks/x, ruff check --fix ~/.local/lib/x.py. In write mode every
// operand (and option value: fails closed) is read as a file written: a
// guarded one (codeFile), one outside the tree (from /, ~ or ..) or one
// that is not literal makes the call opaque. The directory "." is a
// write of what the tool walks into: accepted for a tool whose own ignore
// rules skip .git and node_modules, or which rewrites only its language's
// files (formatters' skipsVCS), unless an option replaces those rules.

// formatter describes one formatter's write mode: the subcommands that
// write (none: the program itself), the options that make it write (none:
// it always writes), the options that make it only check, and whether a
// directory walk skips .git, node_modules and other guarded directories.
type formatter struct {
	subcommands []string
	writeOpts   []string // long or short options (a short letter also in a cluster: shortWrite)
	shortWrite  byte     // a short option letter that writes, also in a cluster (-lw)
	checkOpts   []string
	skipsVCS    bool
}

// formatters are the formatters and fixers read, by program name.
var formatters = map[string]formatter{
	// Prettier ignores .git, .jj, .sl, .svn, .hg and node_modules
	// (prettier.io/docs/ignore).
	"prettier": {writeOpts: []string{"--write"}, shortWrite: 'w', skipsVCS: true},
	// gofmt, goimports, gofumpt and golines rewrite only .go files whose
	// name does not start with a dot.
	"gofmt":     {shortWrite: 'w', writeOpts: []string{"-w"}, skipsVCS: true},
	"goimports": {shortWrite: 'w', writeOpts: []string{"-w"}, skipsVCS: true},
	"gofumpt":   {shortWrite: 'w', writeOpts: []string{"-w"}, skipsVCS: true},
	"golines":   {shortWrite: 'w', writeOpts: []string{"-w", "--write-output"}, skipsVCS: true},
	// black's, ruff's and isort's default excludes hold .git, .venv and
	// node_modules (each tool's docs: --exclude, exclude, skip).
	"black":    {checkOpts: []string{"--check", "--diff", "-c", "--code"}, skipsVCS: true},
	"ruff":     {subcommands: []string{"format", "check"}, checkOpts: []string{"--check", "--diff", "--no-fix"}, skipsVCS: true},
	"isort":    {checkOpts: []string{"--check-only", "--check", "-c", "--diff", "--stdout", "-d"}, skipsVCS: true},
	"autopep8": {writeOpts: []string{"--in-place"}, shortWrite: 'i'},
	"yapf":     {writeOpts: []string{"--in-place"}, shortWrite: 'i'},
	"rustfmt":  {checkOpts: []string{"--check"}},
	// clang-format takes files only; -i writes them.
	"clang-format": {writeOpts: []string{"-i", "--i"}},
	// ESLint's defaults ignore .git/ and node_modules/.
	"eslint": {writeOpts: []string{"--fix"}, skipsVCS: true},
	// shfmt formats files with a shell #! line too (git hooks): "." is
	// not accepted (its walk is not documented to skip .git).
	"shfmt": {writeOpts: []string{"--write"}, shortWrite: 'w'},
	// terraform fmt rewrites only .tf and .tfvars files.
	"terraform": {subcommands: []string{"fmt"}, checkOpts: []string{"-check", "--check", "-write=false", "--write=false", "-list=false"}, skipsVCS: true},
	"cargo":     {subcommands: []string{"fmt"}, checkOpts: []string{"--check"}, skipsVCS: true},
	"biome":     {subcommands: []string{"format", "check", "lint"}, writeOpts: []string{"--write", "--fix", "--apply", "--apply-unsafe"}, skipsVCS: true},
}

// ignoreOpts replace a formatter's own ignore rules: "." then walks into
// .git or node_modules.
var ignoreOpts = []string{"--exclude", "--skip", "--with-node-modules", "--no-ignore", "--filter-files", "--ignore-path"}

// formatterCode says why words (words[0] is the program, name its base
// name) make a formatter or fixer rewrite a file a program later runs as
// code, outside the tree, or one the matcher cannot name; "" when they
// do not. python -m black, python -m isort and python -m ruff are read
// as black, isort and ruff.
func formatterCode(name string, words []cmdWord) string {
	if versioned(name, "python") {
		for i := 1; i+1 < len(words); i++ {
			if words[i].lit == "-m" {
				mod := words[i+1].lit
				if _, ok := formatters[mod]; ok {
					return formatterCode(mod, words[i+1:])
				}
				return ""
			}
		}
		return ""
	}
	f, ok := formatters[name]
	if !ok {
		return ""
	}
	args := words[1:]
	if len(f.subcommands) > 0 {
		k := subcommandAt(args, f.subcommands...)
		if k < 0 {
			return ""
		}
		args = args[k+1:]
	}
	writes := len(f.writeOpts) == 0 && f.shortWrite == 0
	ignores := false
	for _, w := range args {
		if w.unknown {
			writes = true // an option that writes, or a file: read as a write
			continue
		}
		opt, _, _ := strings.Cut(w.lit, "=")
		switch {
		case w.lit == "--":
		case contains(f.checkOpts, w.lit) || contains(f.checkOpts, opt):
			return ""
		case contains(f.writeOpts, w.lit) || contains(f.writeOpts, opt) && !strings.HasSuffix(w.lit, "=false"):
			writes = true
		case f.shortWrite != 0 && len(w.lit) > 1 && w.lit[0] == '-' && w.lit[1] != '-' && strings.IndexByte(w.lit, f.shortWrite) > 0 && len(w.lit) <= 4:
			writes = true
		case contains(ignoreOpts, opt):
			ignores = true
		}
	}
	if !writes {
		return ""
	}
	if why := fixerAddsCode(name, words[1:]); why != "" { // isort -a, ruff --config (commandfixers.go)
		return why
	}
	for _, w := range args {
		if w.unknown {
			return fmt.Sprintf("%s rewrites a file that is not literal, which may be one a program later runs as code", name)
		}
		p := w.lit
		if strings.HasPrefix(p, "-") {
			// An option's attached value (--config=~/x) is read as a
			// file too: fails closed.
			_, p, _ = strings.Cut(p, "=")
		}
		if why := formattedFile(name, p, f.skipsVCS && !ignores); why != "" {
			return why
		}
	}
	return ""
}

// formattedFile says why a formatter (name) rewriting p (a path as
// written) writes a guarded file or one outside the tree; walks says
// the tool's walk of "." skips guarded directories.
func formattedFile(name, p string, walks bool) string {
	switch {
	case p == "" || p == "-":
		return ""
	case outsideTree(p):
		return fmt.Sprintf("%s rewrites %q, outside the tree", name, p)
	case codeFile(p) || codeDir(p) || aboveCodeDirs(p):
		return writesFile(name, p)
	case path.Clean(p) == "." && !walks:
		return fmt.Sprintf("%s rewrites files under %q, .git/hooks included (its walk does not skip .git, or an option replaced its ignore rules)", name, p)
	}
	return ""
}

// outsideTree reports whether p (a path as written) names a file outside
// the working directory's tree: from /, ~ or .., a Windows drive or a
// backslash (which could spell one).
func outsideTree(p string) bool {
	c := path.Clean(p)
	return strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || c == ".." || strings.HasPrefix(c, "../") ||
		strings.Contains(p, `\`) || len(p) >= 2 && p[1] == ':'
}

// subcommandAt returns the index of the first word of args that is one
// of subs, or -1. Any such word counts, not only the first operand: a
// global option's value may come first (ruff --config x check, kubectl
// -n ns exec), and reading a later operand as the subcommand at worst
// refuses a call (fails closed).
func subcommandAt(args []cmdWord, subs ...string) int {
	for k, w := range args {
		if !w.unknown && contains(subs, w.lit) {
			return k
		}
	}
	return -1
}
