package policy

import (
	"fmt"
	"path"
	"strings"
)

// Options of build and test tools that write a file of the agent's
// choosing, run a program it names or send data out (branch attack49).
// On 28089b9d examples/build-agent.yaml allowed each at once:
// pytest --junitxml=.git/hooks/pre-commit (a report where a hook runs),
// pytest --basetemp=.git (pytest removes the directory first),
// pytest --pastebin=all (the session's output to bpaste.net), cargo
// build --target-dir/--artifact-dir .git/hooks (a binary named after the
// crate), mypy --python-executable ./x (runs x) and --install-types
// (packages from the index), go build -ldflags=-extld=./x (the external
// linker is x), tsc --outFile .git/hooks/pre-commit (an existing hook
// keeps its mode; tsc keeps a #! line), clang --config=x.cfg (options from a file the matcher
// cannot read: -fplugin=…), and sed -f x.sed (its e and w
// commands).

// Profiles too: go test -coverprofile=Makefile, staticcheck
// -debug.cpuprofile=.git/hooks/pre-commit.

// pytestWords returns the name and arguments of pytest when words
// (words[0] is the program, name its base name) run it, directly or as
// `python -m pytest`; ok is false when they do not.
func pytestWords(name string, words []cmdWord) (pname string, args []cmdWord, ok bool) {
	if name == "pytest" || name == "py.test" {
		return name, words[1:], true
	}
	if versioned(name, "python") {
		for i := 1; i+1 < len(words); i++ {
			if words[i].lit == "-m" && (words[i+1].lit == "pytest" || words[i+1].lit == "py.test") {
				return "pytest", words[i+2:], true
			}
		}
	}
	return "", nil, false
}

// attack49Code says why words (words[0] is the program, name its base
// name) run a program or code the matcher cannot read, send data out,
// or write a file a program later runs as code; "" when they do not.
func attack49Code(name string, words []cmdWord) string {
	if why := secretsCode(name, words); why != "" { // commandsecrets.go
		return why
	}
	if pname, args, ok := pytestWords(name, words); ok {
		return pytestCode(pname, args)
	}
	switch {
	case name == "mypy" || name == "dmypy":
		return mypyCode(name, words[1:])
	case name == "cargo":
		return writtenDirs(name, optionValues(words[1:], "--target-dir", "--artifact-dir", "--out-dir"))
	case name == "gofmt" || name == "staticcheck" || name == "golangci-lint":
		return writtenDirs(name, goProfileFiles(words[1:]))
	case name == "tsc":
		if why := tscProjectCode(words[1:]); why != "" { // tsc -p x.json (commandtsc.go)
			return why
		}
		return writtenDirs(name, tscOutputs(words[1:]))
	case name == "go":
		if why := writtenDirs(name, goProfileFiles(words[1:])); why != "" {
			return why
		}
		for _, w := range words[1:] {
			if strings.Contains(w.lit, "extld") || strings.Contains(w.lit, "gccgoflags") {
				return fmt.Sprintf("go %s names the external linker or gccgo's flags (-extld=PROGRAM, -wrapper), a program the matcher cannot read", w.lit)
			}
		}
	case name == "sed" || name == "gsed":
		return sedFileCode(name, words[1:])
	case gccFamily(name) || strings.HasPrefix(name, "clang"):
		for _, w := range words[1:] {
			if opt, _, _ := strings.Cut(w.lit, "="); opt == "--config" || opt == "-config" {
				return fmt.Sprintf("%s %s reads options (-fplugin=, -B) from a file the matcher cannot read", name, opt)
			}
		}
	}
	return ""
}

// pytestCode reads pytest's arguments (after pytest or python -m
// pytest): --pastebin sends output out; --basetemp DIR is removed and
// written; --junitxml, --junit-xml, --result-log, --report-log,
// --debug=FILE and pytest-cov's --cov-report=KIND:PATH write their file;
// -o cache_dir=DIR writes DIR.
func pytestCode(name string, args []cmdWord) string {
	var files []string
	for i := 0; i < len(args); i++ {
		w := args[i].lit
		if w == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(w, "=")
		switch {
		case !strings.HasPrefix(w, "--"):
			if w == "-o" || strings.HasPrefix(w, "-o") && len(w) > 2 && !strings.HasPrefix(w, "-o-") {
				if d, ok := iniCacheDir(valueWord(args, &i, strings.TrimPrefix(w, "-o"), len(w) > 2)); ok {
					files = append(files, d)
				}
			}
		case longOption(opt, "--pastebin"):
			return fmt.Sprintf("%s --pastebin sends the session's output to a paste service", name)
		case longOption(opt, "--basetemp"):
			files = append(files, fileOf(valueWord(args, &i, val, hasVal))+"/*")
		case longOption(opt, "--junitxml", "--junit-xml", "--result-log", "--resultlog", "--report-log"):
			files = append(files, fileOf(valueWord(args, &i, val, hasVal)))
		case longOption(opt, "--debug") && hasVal:
			files = append(files, val)
		case longOption(opt, "--cov-report"):
			v := fileOf(valueWord(args, &i, val, hasVal))
			if _, p, ok := strings.Cut(v, ":"); ok {
				files = append(files, p, p+"/*")
			}
		case longOption(opt, "--override-ini"):
			if d, ok := iniCacheDir(valueWord(args, &i, val, hasVal)); ok {
				files = append(files, d)
			}
		}
	}
	return writtenDirs(name, files)
}

// iniCacheDir is the directory pytest writes under for an ini override
// v (-o / --override-ini "cache_dir=DIR"), as the pattern "DIR/*".
func iniCacheDir(v cmdWord) (string, bool) {
	k, d, ok := strings.Cut(v.lit, "=")
	if !ok || strings.TrimSpace(k) != "cache_dir" {
		return "", false
	}
	return strings.TrimSpace(d) + "/*", true
}

// mypyCode reads mypy's arguments: --python-executable runs that
// program, --install-types installs packages from the index, and its
// report, cache and junit options write their file or directory.
func mypyCode(name string, args []cmdWord) string {
	var files []string
	for i := 0; i < len(args); i++ {
		w := args[i].lit
		if w == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(w, "=")
		switch {
		case !strings.HasPrefix(w, "--"):
		case longOption(opt, "--python-executable"):
			return runsOption(name, opt)
		case longOption(opt, "--install-types"):
			return fmt.Sprintf("%s --install-types installs packages of the index's choosing, which run code", name)
		case longOption(opt, "--junit-xml"):
			files = append(files, fileOf(valueWord(args, &i, val, hasVal)))
		case strings.HasSuffix(opt, "-report") || longOption(opt, "--cache-dir"):
			files = append(files, fileOf(valueWord(args, &i, val, hasVal))+"/*")
		}
	}
	return writtenDirs(name, files)
}

// sedFileCode reports sed's -f FILE, --file=FILE and a cluster holding f
// (-nf x.sed): a script the matcher cannot read, whose e command runs a
// program and whose w command writes a file.
func sedFileCode(name string, args []cmdWord) string {
	for _, a := range args {
		w := a.lit
		if w == "--" {
			return ""
		}
		if opt, _, _ := strings.Cut(w, "="); strings.HasPrefix(w, "--") && longOption(opt, "--file") {
			return fmt.Sprintf("%s %s reads a script (e runs a program, w writes a file) the matcher cannot read", name, opt)
		}
		if !strings.HasPrefix(w, "-") || strings.HasPrefix(w, "--") {
			continue
		}
		for j := 1; j < len(w); j++ {
			c := w[j]
			if c == 'f' {
				return fmt.Sprintf("%s -f reads a script (e runs a program, w writes a file) the matcher cannot read", name)
			}
			if c == 'e' || c == 'l' || c == 'i' {
				break // the rest is its value
			}
		}
	}
	return ""
}

// optionValues returns the values of the long options names in args
// (--name VALUE, --name=VALUE, abbreviated), each as DIR/*.
func optionValues(args []cmdWord, names ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		w := args[i].lit
		if w == "--" {
			break
		}
		if opt, val, hasVal := strings.Cut(w, "="); strings.HasPrefix(w, "--") && longOption(opt, names...) {
			out = append(out, fileOf(valueWord(args, &i, val, hasVal))+"/*")
		}
	}
	return out
}

// writtenDirs says why name writing files (a path, or DIR/* for a
// directory's entries) writes one a program later runs as code: a code
// file, a directory of them, one above them, or (an empty value, a
// value that is not literal) a file the matcher cannot name.
func writtenDirs(name string, files []string) string {
	for _, f := range files {
		dir, entries := strings.CutSuffix(f, "/*")
		if dir == "" || codeFile(f) || entries && (codeDir(dir) || aboveCodeDirs(dir) || codeFile(path.Join(dir, "hooks/x"))) {
			return writesFile(name, dir)
		}
	}
	return ""
}

// buildAgentFileNames are base names of files a later plain call reads
// as the code or packages it runs (branch attack49): a devcontainer's
// lifecycle commands (postCreateCommand) at the root, and the locked
// dependencies npm ci, pnpm install, uv sync and pip install -r install
// (a resolved URL of the writer's choosing: its install scripts run).
var buildAgentFileNames = []string{".devcontainer.json", "package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml",
	"uv.lock", "pylock.toml", "requirements.txt"}

// buildAgentFileDirs are path parts (as codeFileDirs) of editor and
// container files a human's tools run (branch attack49): VS Code's
// tasks.json (runOn: folderOpen) and settings, JetBrains' run
// configurations, the devcontainer's lifecycle commands.
var buildAgentFileDirs = []string{"/.vscode/", "/.devcontainer/", "/.idea/"}

// buildAgentFile reports whether c (a cleaned path in lower case; s is
// "/"+c+"/") is one of buildAgentFileNames (or requirements*.txt) or in
// one of buildAgentFileDirs.
func buildAgentFile(c, s string) bool {
	base := path.Base(c)
	if contains(buildAgentFileNames, base) || strings.HasPrefix(base, "requirements") && strings.HasSuffix(base, ".txt") {
		return true
	}
	for _, d := range buildAgentFileDirs {
		if strings.Contains(s, d) {
			return true
		}
	}
	return false
}

// tscOutputs returns what tsc's output options write (names in any
// case, as tsc reads them): --outFile and --out a file (tsc keeps a
// #! line, and an existing hook keeps its mode), --outDir,
// --declarationDir and --generateTrace a directory's entries,
// --tsBuildInfoFile a file.
func tscOutputs(args []cmdWord) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		opt, val, hasVal := strings.Cut(args[i].lit, "=")
		switch strings.ToLower(strings.TrimLeft(opt, "-")) {
		case "outfile", "out", "tsbuildinfofile":
			out = append(out, fileOf(valueWord(args, &i, val, hasVal)))
		case "outdir", "declarationdir", "generatetrace":
			out = append(out, fileOf(valueWord(args, &i, val, hasVal))+"/*")
		}
	}
	return out
}

// goProfileFiles returns the files the profile and trace options of go
// test, gofmt, staticcheck and golangci-lint write (-cpuprofile,
// -coverprofile, -test.memprofile, -debug.cpuprofile, --cpu-profile-path,
// -trace, -debug.trace), and -outputdir's entries.
func goProfileFiles(args []cmdWord) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		w := args[i].lit
		if w == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(w, "=")
		n := strings.ToLower(strings.TrimLeft(opt, "-"))
		switch {
		case !strings.HasPrefix(w, "-"):
		case strings.HasSuffix(n, "profile") || strings.HasSuffix(n, "profile-path") || n == "trace" || strings.HasSuffix(n, ".trace"):
			out = append(out, fileOf(valueWord(args, &i, val, hasVal)))
		case n == "outputdir" || n == "test.outputdir":
			out = append(out, fileOf(valueWord(args, &i, val, hasVal))+"/*")
		}
	}
	return out
}
