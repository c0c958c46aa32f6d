package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Package managers and build tools (branch policy47). Two ways they run
// code a command's words do not show:
//
//   - a setting written now that a later call runs by: npm, pnpm and yarn
//     config set (script-shell, node-options, registry, yarnPath, …),
//     npm set and npm pkg set scripts.*, yarn set version FILE, go env -w
//     (GOFLAGS=-toolexec=…, CC, GOTOOLCHAIN, GOPROXY), pip config set and
//     edit; the same settings given on the command line (npm
//     --script-shell=…, npm_config_script_shell=…); each is opaque, a
//     write to a file a program later runs as code, as git config
//     core.pager is;
//   - a command named in the words that the tool runs: npx, pnpx, bunx,
//     npm exec and x, pnpm dlx and exec, yarn dlx and exec, bun x (the
//     command after the runner's options, its first word read as shell
//     text, as npm hands it to a shell; -c/--call's value), and go's
//     -exec and -toolexec values: each is parsed as a command
//     (addEmbedded), so a deny rule matches it as any simple command and
//     an allow rule must match it too; a runner with no command (an
//     interactive shell) is opaque; go generate, which runs the command
//     lines of //go:generate comments in .go files the matcher does not
//     guard, is opaque.

// npmRunsKeys are npm, pnpm and yarn settings whose value is a program,
// a command line or code the tool runs, or a file of such settings.
var npmRunsKeys = []string{"script-shell", "shell", "node-options", "userconfig", "globalconfig", "editor", "git", "browser",
	"viewer", "init-module", "onload-script", "pnpmfile", "global-pnpmfile", "python", "node-gyp", "yarn-path"}

// npmSafeKeys are settings npm, pnpm and yarn config set may write: none
// names a program, code, a registry or a file of settings. Compared in
// lower case without '-' and '_' (yarn berry's nodeLinker is node-linker).
var npmSafeKeys = []string{"fund", "audit", "progress", "loglevel", "color", "updatenotifier", "saveexact", "saveprefix",
	"save", "initauthorname", "initauthoremail", "initauthorurl", "initlicense", "initversion", "enginestrict",
	"fetchretries", "fetchretrymintimeout", "fetchretrymaxtimeout", "fetchtimeout", "maxsockets", "packagelock",
	"prefix", "cache", "legacypeerdeps", "strictpeerdependencies", "autoinstallpeers", "storedir", "shamefullyhoist",
	"nodelinker", "lockfile", "enabletelemetry", "enableglobalcache", "compressionlevel", "enableprogressbars",
	"enablecolors", "cachefolder", "defaultsemverrangeprefix", "preferinteractive", "telemetry"}

// npmKey returns key (a setting's name) in lower case without '-' and '_'.
func npmKey(key string) string {
	return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(key))
}

// npmKeyRuns reports whether key names a setting of npmRunsKeys.
func npmKeyRuns(key string) bool {
	k := npmKey(key)
	return slices.ContainsFunc(npmRunsKeys, func(n string) bool { return npmKey(n) == k })
}

// npmConfigVar reports whether name is an environment variable npm or
// pnpm reads as a setting of npmRunsKeys (npm_config_script_shell, in any
// case).
func npmConfigVar(name string) bool {
	for _, p := range []string{"npm_config_", "pnpm_config_"} {
		if len(name) > len(p) && strings.EqualFold(name[:len(p)], p) {
			return npmKeyRuns(name[len(p):])
		}
	}
	return false
}

// npmFlagRuns reports whether opt (a "--" word's text before '=') sets a
// setting of npmRunsKeys: npm's and pnpm's option parser (nopt) takes
// any unambiguous prefix (--script-sh), so every prefix of at least one
// letter counts, but --global, which is an option of its own.
func npmFlagRuns(opt string) bool {
	if !strings.HasPrefix(opt, "--") || opt == "--global" {
		return false
	}
	// pnpm also takes any setting as --config.KEY=VALUE: pnpm test
	// --config.script-shell=./x.sh ran ./x.sh (branch attack50).
	k := npmKey(opt[2:])
	if c := npmKey("config."); strings.HasPrefix(k, c) && len(k) > len(c) {
		k = k[len(c):]
	}
	return k != "" && slices.ContainsFunc(npmRunsKeys, func(n string) bool { return strings.HasPrefix(npmKey(n), k) })
}

// pmSub returns the index in words (words[0] is the program) of the
// subcommand when it is one of subs, else -1. A word after an option
// that may take it as its value (--prefix x, -C x) may be that value, so
// the scan goes on past it: "npm --loglevel silly config set …" finds
// config (fails closed).
//
// npm takes a command abbreviated or by an alias (npm conf set, npm exe,
// npm pk set: npmCommand), so for npm a word counts as the subcommand it
// may stand for.
func pmSub(words []cmdWord, subs ...string) int {
	npm := programName(path.Base(words[0].lit)) == "npm"
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return -1
		}
		if w.lit == "--" {
			// Options end; the next word is the command (npm -- exe rm
			// x ran rm with npm 11; branch attack47).
			if i+1 < len(words) && (contains(subs, words[i+1].lit) || npm && contains(subs, npmCommand(words[i+1].lit))) {
				return i + 1
			}
			return -1
		}
		if strings.HasPrefix(w.lit, "-") {
			continue
		}
		if contains(subs, w.lit) || npm && contains(subs, npmCommand(w.lit)) {
			return i
		}
		p := words[i-1].lit
		if i == 1 || !strings.HasPrefix(p, "-") || strings.Contains(p, "=") {
			return -1
		}
	}
	return -1
}

// npmCommand returns the command of npm's that the word w may stand for
// among those the matcher reads (config, exec, pkg, explore, edit), else
// w: npm's deref (lib/utils/cmd-list.js, npm 7 to 11) takes an alias (c,
// x) and any unique prefix of a command's or an alias's name (conf,
// confi, exe, pk, explo, ed), so npm conf set script-shell ./x.sh writes
// that setting and npm exe rm x runs rm (checked with npm 11.19.1). A
// prefix of two or more letters counts even where npm finds it ambiguous
// (ex, co: npm then exits with an error and runs nothing; fails closed);
// set counts only whole (se is search).
func npmCommand(w string) string {
	switch w {
	case "c":
		return "config"
	case "x":
		return "exec"
	}
	if len(w) >= 4 && strings.HasPrefix("set-script", w) {
		return "set-script" // npm 7 and 8 (set-s…)
	}
	if len(w) >= 2 {
		for _, c := range []string{"config", "exec", "explore", "edit", "pkg"} {
			if strings.HasPrefix(c, w) {
				return c
			}
		}
	}
	return w
}

// positionals returns the literal words of words that are no option,
// the values of the options in valued (given as the next word) skipped.
func positionals(words []cmdWord, valued ...string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i].lit
		switch {
		case contains(valued, w):
			i++
		case !strings.HasPrefix(w, "-") || w == "-":
			out = append(out, w)
		}
	}
	return out
}

// packageManagerCode says why npm, pnpm or yarn (name) with words writes
// or gives a setting the tool runs code by: an option of npmRunsKeys
// (before "--", after which the words are a script's), config set (or
// npm set) with a key outside npmSafeKeys (ignore-scripts only as true),
// config edit, npm pkg set of scripts or bin, yarn set version with a
// file or URL; or a word that is not literal.
func packageManagerCode(name string, words []cmdWord) string {
	for _, w := range words[1:] {
		if w.unknown {
			return notLiteral(name)
		}
		if w.lit == "--" {
			break
		}
		if opt, _, _ := strings.Cut(w.lit, "="); npmFlagRuns(opt) {
			return fmt.Sprintf("%s %s sets a program or code %s runs, which the matcher cannot read", name, opt, name)
		}
	}
	if name == "yarn" {
		if j := yarnInner(words); j > 0 {
			return packageManagerCode(name, append([]cmdWord{words[0]}, words[j:]...))
		}
	}
	k := pmSub(words, "config", "c", "set", "pkg", "explore", "edit", "plugin", "set-script")
	if k < 0 {
		return ""
	}
	args := positionals(words[k+1:], "--location", "--workspace", "-w")
	sub := words[k].lit
	if name == "npm" {
		sub = npmCommand(sub)
	}
	switch {
	case sub == "explore" && name == "npm":
		// npm explore PKG -- CMD joins CMD's words with spaces and runs
		// the result in a shell (script-shell) in the package's
		// directory; without CMD a shell reading the input.
		return "npm explore runs a shell or a command line in a package's directory, which the matcher does not read"
	case sub == "set-script" && name == "npm":
		return "npm set-script writes a script into package.json, which npm later runs"
	case sub == "edit" && name == "npm":
		return "npm edit runs an editor (the editor setting, vi by default) that reads its commands from the input"
	case sub == "plugin" && name == "yarn":
		// yarn plugin import FILE|URL (or from sources) installs code
		// every later yarn command loads, as yarn set version FILE does.
		if len(args) == 0 || args[0] != "import" || len(args) == 2 && !strings.ContainsAny(args[1], `/\:.`) {
			return ""
		}
		return "yarn plugin import installs a plugin the matcher cannot read, which every later yarn command runs"
	case sub == "explore" || sub == "edit" || sub == "plugin" || sub == "set-script":
		return ""
	case sub == "set" && name == "yarn":
		// yarn set version FILE or URL runs that file as yarn from now on.
		if len(args) >= 2 && args[0] == "version" && !strings.ContainsAny(args[1], `/\:`) {
			return ""
		}
		return "yarn set writes a yarn release or setting the matcher cannot read, which yarn later runs"
	case sub == "pkg":
		if len(args) == 0 || args[0] != "set" {
			return ""
		}
		for _, a := range args[1:] {
			key := strings.ToLower(strings.TrimLeft(a, ".["))
			if strings.HasPrefix(key, "scripts") || strings.HasPrefix(key, "bin") || !strings.Contains(a, "=") || a == "" {
				return fmt.Sprintf("%s pkg set writes package.json's scripts, which %s later runs", name, name)
			}
		}
		return ""
	case sub == "set":
	case len(args) == 0:
		return ""
	case args[0] == "edit":
		return fmt.Sprintf("%s config edit writes %s's settings, some of which run programs", name, name)
	case args[0] != "set":
		return "" // get, list, delete, unset
	default:
		args = args[1:]
	}
	for i := 0; i < len(args); i++ {
		key, val, hasVal := strings.Cut(args[i], "=")
		if !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		k := npmKey(key)
		if k == "ignorescripts" && val == "true" || contains(npmSafeKeys, k) || npmCredential(key) {
			continue
		}
		return fmt.Sprintf("%s config set %s writes a setting %s may run code by (script-shell, node-options, a registry), which the matcher cannot read", name, key, name)
	}
	return ""
}

// npmCredential reports whether key is a registry's credential
// (//registry.npmjs.org/:_authToken), which runs nothing.
func npmCredential(key string) bool {
	k := strings.ToLower(key)
	return strings.HasPrefix(k, "//") && slices.ContainsFunc([]string{":_authtoken", ":_auth", ":_password", ":username", ":email"},
		func(s string) bool { return strings.HasSuffix(k, s) })
}

// goEnvSafe lists the go env -w keys that name no program, code, module
// source or file.
var goEnvSafe = []string{"GOOS", "GOARCH", "GOAMD64", "GOARM", "GOARM64", "GO386", "GOWASM", "GOMIPS", "GOMIPS64",
	"GOPPC64", "GORISCV64", "CGO_ENABLED", "GO111MODULE", "GOTELEMETRY"}

// goFlagsSafe reports whether a GOFLAGS value holds only flags that run
// nothing (-mod=, -trimpath, -tags=, -count=, …); -toolexec=, -exec=,
// -ldflags= (-extld=) and -modfile= do not count.
func goFlagsSafe(val string) bool {
	for _, f := range strings.Fields(val) {
		name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if !contains([]string{"mod", "modcacherw", "buildvcs", "trimpath", "tags", "count", "v", "x", "n", "race",
			"p", "short", "failfast", "timeout", "json", "cover", "covermode"}, name) {
			return false
		}
	}
	return true
}

// goCode says why go's words run code the matcher cannot read: go env -w
// with a key outside goEnvSafe (GOFLAGS only unless goFlagsSafe), and go
// generate, which runs the command lines of //go:generate comments in
// .go files; or a word that is not literal. go's -exec and -toolexec
// values are commands (addGoCommands).
func goCode(words []cmdWord) string {
	for _, w := range words[1:] {
		if w.unknown {
			return notLiteral("go")
		}
	}
	k := pmSub(words, "env", "generate")
	switch {
	case k < 0:
		return ""
	case words[k].lit == "generate":
		return "go generate runs the commands of //go:generate comments in files the matcher cannot read"
	}
	write := false
	for _, w := range words[k+1:] {
		if f := strings.TrimLeft(w.lit, "-"); strings.HasPrefix(w.lit, "-") && (f == "w" || strings.HasPrefix(f, "w=")) {
			write = true // -w, --w, -w=true
			continue
		}
		key, val, ok := strings.Cut(w.lit, "=")
		if !write || !ok || contains(goEnvSafe, key) || key == "GOFLAGS" && goFlagsSafe(val) {
			continue
		}
		return fmt.Sprintf("go env -w %s writes a setting go later runs a program or code by, which the matcher cannot read", key)
	}
	return ""
}

// pipCode says why pip's words (words[0] is pip) write pip's
// configuration: config set (but for pipSafeKeys) or config edit (also
// an editor it runs); the index it names serves the code a later pip
// install runs.
func pipCode(words []cmdWord) string {
	k := pmSub(words, "config")
	if k < 0 {
		return ""
	}
	args := positionals(words[k+1:], "--editor")
	switch {
	case len(args) == 0:
		return ""
	case args[0] == "edit":
		return "pip config edit writes pip's configuration with an editor the matcher cannot read"
	case args[0] == "set" && (len(args) < 2 || !pipKeySafe(args[1])):
		return "pip config set writes pip's configuration (an index whose packages a later pip install runs), which the matcher cannot read"
	}
	return ""
}

// pipKeySafe reports whether a pip config key (global.timeout) names a
// setting that runs nothing and names no package source.
func pipKeySafe(key string) bool {
	_, name, _ := strings.Cut(strings.ToLower(key), ".")
	return contains([]string{"timeout", "retries", "disable-pip-version-check", "no-cache-dir", "progress-bar", "no-color",
		"quiet", "verbose", "no-input", "root-user-action"}, name)
}

// runnerSubs lists a package manager's subcommands that run a command
// named in their words.
func runnerSubs(name string) []string {
	switch name {
	case "npm":
		return []string{"exec", "x"}
	case "pnpm":
		return []string{"dlx", "exec"}
	case "yarn":
		return []string{"dlx", "exec"}
	case "bun":
		return []string{"x"}
	}
	return nil
}

// runnerAt returns the index of a package runner in words (words[0], or
// a word after a wrapper) and its runnerStart there; 0, 0 for none.
func runnerAt(words []cmdWord) (int, int) {
	if words[0].unknown {
		return 0, 0
	}
	if s := runnerStart(words); s > 0 {
		return 0, s
	}
	if !isWrapper(path.Base(words[0].lit)) {
		return 0, 0
	}
	for k := 1; k < len(words); k++ {
		if words[k].unknown {
			return 0, 0
		}
		if s := runnerStart(words[k:]); s > 0 {
			return k, k + s
		}
	}
	return 0, 0
}

// runnerStart returns the index in words (words[0] is a literal program
// name) from which a package runner's words hold the command it runs:
// 1 for npx, pnpx and bunx, the subcommand's index plus one for npm exec
// and kin (runnerSubs), the index of pnpm's first word when that is none
// of pnpm's commands; 0 for any other program.
func runnerStart(words []cmdWord) int {
	switch name := programName(path.Base(words[0].lit)); name {
	case "npx", "pnpx", "bunx", "uvx":
		return 1
	case "pipx":
		return pmSub(words, "run") + 1
	case "corepack":
		// corepack PM[@VERSION] ARGS runs that package manager (branch
		// attack47): its words are a command (corepack pnpm dlx rm x).
		if len(words) > 1 && contains([]string{"npm", "pnpm", "yarn", "npx", "pnpx"}, strings.SplitN(words[1].lit, "@", 2)[0]) {
			return 1
		}
	case "uv":
		// uv run CMD and uv tool run CMD run a program on the PATH
		// inside an environment (branch attack47).
		if k := pmSub(words, "run", "tool"); k > 0 && words[k].lit == "run" {
			return k + 1
		} else if k > 0 && k+1 < len(words) && words[k+1].lit == "run" {
			return k + 2
		}
	case "bundle", "bundler":
		// bundle exec CMD runs CMD with the bundle's gems (branch
		// policy48).
		return pmSub(words, "exec") + 1
	case "poetry", "pipenv", "pdm", "hatch", "rye":
		// … run CMD runs a program on the PATH inside the project's
		// environment (a script's name too); … shell starts a shell,
		// which reads the input: read as a runner without a command
		// (opaque; branch attack47).
		if k := pmSub(words, "env"); name == "hatch" && k > 0 && k+1 < len(words) && words[k+1].lit == "run" {
			return k + 2 // hatch env run -- CMD (branch attack48)
		}
		return pmSub(words, "run", "shell") + 1
	case "pnpm":
		// pnpm runs a word that is not one of its commands as a script
		// or, failing that, as a shell command (pnpm curl x): from that
		// word on (pnpm 6.6.1 and later).
		if k := pmSub(words, runnerSubs(name)...); k > 0 {
			return k + 1
		}
		for i := 1; i < len(words); i++ {
			if contains([]string{"--filter", "-F", "--filter-prod", "-C", "--dir", "--reporter", "--loglevel"}, words[i].lit) {
				i++ // the option's value (pnpm --filter app build)
				continue
			}
			if w := words[i].lit; !strings.HasPrefix(w, "-") {
				if words[i].unknown || contains(pnpmCommands, w) {
					return 0
				}
				return i
			}
		}
	case "yarn":
		if j := yarnInner(words); j > 0 {
			if s := runnerStart(append([]cmdWord{words[0]}, words[j:]...)); s > 0 {
				return j + s - 1
			}
			return 0
		}
		// yarn node ARGS runs node ARGS (yarn berry): from node on.
		if k := pmSub(words, "dlx", "exec", "node"); k > 0 && words[k].lit == "node" {
			return k
		}
		return pmSub(words, runnerSubs(name)...) + 1
	case "npm", "bun":
		return pmSub(words, runnerSubs(name)...) + 1
	case "mise", "rtx", "asdf", "nvm", "fnm", "nodenv", "rbenv", "pyenv", "goenv", "jenv", "plenv", "direnv", "volta", "conda",
		"mamba", "micromamba", "pixi", "devbox", "proto", "aws-vault", "op", "doppler", "nix":
		// Version managers, environment managers and secret injectors
		// that run the command in their words (branch attack48): mise
		// exec node@20 -- rm x, asdf exec rm x, conda run -n base rm x,
		// op run -- rm x, nix develop -c rm x. Their tool or
		// environment word is read as the command's first word (held
		// under an allow rule; deny rules match the suffix).
		if k := pmSub(words, "exec", "x", "run", "env", "develop", "shell", "en"); k > 0 {
			return k + 1
		}
	}
	return 0
}

// yarnInner returns the index in words (words[0] is yarn) of the first
// word of the yarn command that yarn workspace NAME … and yarn workspaces
// foreach [options] … run in workspaces (yarn berry runs it as a yarn
// command there: yarn workspaces foreach -A exec rm x runs yarn exec rm
// x); 0 for none. The values of foreach's -j, --jobs, --include,
// --exclude and --from are skipped.
func yarnInner(words []cmdWord) int {
	k := pmSub(words, "workspace", "workspaces")
	if k < 0 {
		return 0
	}
	if words[k].lit == "workspace" {
		for i := k + 1; i < len(words)-1; i++ {
			if !strings.HasPrefix(words[i].lit, "-") {
				return i + 1 // after NAME
			}
		}
		return 0
	}
	if k+1 >= len(words) || words[k+1].lit != "foreach" {
		return 0
	}
	for i := k + 2; i < len(words); i++ {
		switch w := words[i].lit; {
		case contains([]string{"-j", "--jobs", "--include", "--exclude", "--from"}, w):
			i++
		case !strings.HasPrefix(w, "-"):
			return i
		}
	}
	return 0
}

// pnpmCommands are pnpm's own commands and their aliases; pnpm runs any
// other first word as a script or a shell command.
var pnpmCommands = []string{"add", "install", "i", "update", "up", "upgrade", "remove", "rm", "uninstall", "un", "uni",
	"link", "ln", "unlink", "import", "rebuild", "rb", "prune", "fetch", "install-test", "it", "patch", "patch-commit",
	"patch-remove", "audit", "list", "ls", "la", "ll", "outdated", "why", "licenses", "run", "run-script", "test", "t",
	"tst", "exec", "dlx", "create", "start", "stop", "restart", "store", "root", "bin", "setup", "init", "deploy", "doctor",
	"config", "c", "get", "set", "env", "publish", "pack", "server", "recursive", "multi", "m", "dedupe", "approve-builds",
	"ignored-builds", "cat-file", "cat-index", "find-hash", "self-update", "help", "login", "logout", "adduser", "whoami",
	"owner", "view", "info", "show", "search", "version", "docs", "home", "bugs", "repo", "ping", "sbom", "completion",
	"unpublish", "deprecate", "undeprecate", "dist-tag", "access", "token", "team", "profile", "star", "unstar", "stars",
	"edit", "explore", "fund", "hook", "org", "prefix", "query", "shrinkwrap", "catalog", "pkg"}

// addRunner reads the command a package runner in words runs (words[0]
// literal; runnerStart > 0): -c/--call's value and the first word after
// the runner's options (after "--" if given) as shell text, the rest
// quoted, parsed as a command (addEmbedded); opaque without either (an
// interactive shell reading the input) or with a word that is not
// literal.
func (pc *parsedCommand) addRunner(words []cmdWord, start, depth int, unsafe, opaque func(string)) {
	what := fmt.Sprintf("the command %s runs", words[0].lit)
	found := false
	uv := contains([]string{"uv", "uvx"}, programName(path.Base(words[0].lit)))
	for i := start; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			opaque(what + " is not literal")
			return
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case w.lit == "-c" || strings.HasPrefix(w.lit, "--") && longOption(opt, "--call"):
			// nopt takes --call abbreviated (--cal); -c's value is the
			// next word, --call's the text after '=' or the next word.
			v := val
			if !hasVal || w.lit == "-c" {
				if i+1 >= len(words) || words[i+1].unknown {
					opaque(what + " is not literal")
					return
				}
				i++
				v = words[i].lit
			}
			pc.addEmbedded(v, depth, what, unsafe, opaque)
			found = true
		case strings.HasPrefix(w.lit, "-c") && !strings.HasPrefix(w.lit, "--"):
			opaque(fmt.Sprintf("%s %s may run a command the matcher cannot read", words[0].lit, w.lit))
			return
		case contains([]string{"--version", "-v", "--help", "-h"}, w.lit):
			found = true
		case contains([]string{"-p", "--package", "-w", "--workspace", "--registry", "--prefix", "-C", "--dir", "--cwd"}, w.lit),
			uv && (contains(uvValued, w.lit) || w.lit == "--python"):
			i++ // the option's value
		case w.lit == "--":
			i++
			fallthrough
		case !strings.HasPrefix(w.lit, "-"):
			if i < len(words) {
				pc.addEmbedded(runnerLine(words[i:]), depth, what, unsafe, opaque)
				return
			}
		}
	}
	if !found {
		opaque(fmt.Sprintf("%s without a command runs a shell reading its input", words[0].lit))
	}
}

// runnerLine returns the command line a package runner hands its shell
// for words: the first as written, the rest quoted.
func runnerLine(words []cmdWord) string {
	var b strings.Builder
	b.WriteString(words[0].lit)
	for _, w := range words[1:] {
		b.WriteString(" '")
		b.WriteString(strings.ReplaceAll(w.lit, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}

// addGoCommands parses the values of go's -exec and -toolexec options in
// words (words[0] is go) as commands: go runs the program (go run, go
// test) or each compiler tool through them.
func (pc *parsedCommand) addGoCommands(words []cmdWord, depth int, unsafe, opaque func(string)) {
	for i := 1; i < len(words); i++ {
		opt, val, hasVal := strings.Cut(words[i].lit, "=")
		if !contains([]string{"-exec", "--exec", "-toolexec", "--toolexec", "-vettool", "--vettool"}, opt) {
			continue
		}
		v := cmdWord{lit: val}
		if !hasVal {
			v = valueWord(words, &i, "", false)
		}
		if v.unknown {
			opaque("go " + opt + " gets a command that is not literal")
			return
		}
		pc.addEmbedded(v.lit, depth, "go "+opt+"'s command", unsafe, opaque)
	}
}
