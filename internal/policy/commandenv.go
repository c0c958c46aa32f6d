package policy

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// An environment variable can make the program it reaches run code the
// matcher cannot see: NODE_OPTIONS=--import=data:… node x.js, PERL5OPT=-M…,
// LD_PRELOAD=./x.so ls, BASH_ENV='$(rm x)' ./script.sh, or a command line
// a program runs (GIT_SSH_COMMAND, PAGER, EDITOR, …). The matcher reads
// such a variable wherever the command sets it: an assignment prefix
// (X=… cmd), a bare assignment (a variable already in the environment
// stays exported), export/declare/local/readonly, env or another
// wrapper's NAME=value word, and the names read, printf -v and kin set.
// A variable whose value is code or loads code (envCode) makes the
// command opaque; one whose value is a command line (envCommand) is parsed
// as a command, whose simple commands deny and approve rules then match
// (PAGER='rm x' git log matches rm *) and whose opaque code makes the
// command opaque. Variables naming a directory to load modules from
// (PYTHONPATH, NODE_PATH, LD_LIBRARY_PATH, PATH) are not read: like
// ./build.sh, the matcher cannot read a file. An allow rule already
// refuses every assignment.

// envKind says what a program does with an environment variable's value.
type envKind int

const (
	envPlain   envKind = iota
	envCode            // code, options that load code, or a library loaded into the program
	envCommand         // a command line a program runs
)

// envVar classifies the environment variable name.
func envVar(name string) envKind {
	switch name {
	case "NODE_OPTIONS", "PERL5OPT", "PERL5DB", "RUBYOPT", "PYTHONINSPECT", "BASH_ENV", "ENV",
		"LD_PRELOAD", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
		"TAR_OPTIONS", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "PS4", "MAKEFLAGS", "GNUMAKEFLAGS", "MFLAGS",
		"GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", // git --exec-path=DIR (runs ./ssh, ./less), clone --template=DIR (installs hooks)
		// A configuration file the program reads and the matcher does not
		// guard (branch policy47): git's core.pager, .wgetrc's
		// output_document, .curlrc's output, go's GOFLAGS, npm's
		// script-shell, pip's index. GOFLAGS: -toolexec=cmd.
		"GIT_DIR", "GIT_COMMON_DIR", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG", "WGETRC", "CURL_HOME", "GOENV", "GOFLAGS",
		"PIP_CONFIG_FILE", "YARN_RC_FILENAME", "YARN_YARN_PATH", "YARN_PLUGINS",
		"GIT_ALLOW_PROTOCOL", // admits ext::, whose URL is a command (branch attack47)
		// JVM options (-javaagent:x.jar) and build tools' options from the
		// environment, extra makefiles, a CMake toolchain script, pytest's
		// options and plugins, just's justfile, dotenv file and chooser
		// (branch attack48).
		"GRADLE_OPTS", "JAVA_OPTS", "MAVEN_OPTS", "MAVEN_ARGS", "SBT_OPTS", "ANT_OPTS", "RAKEOPT", "MAKEFILES",
		"CMAKE_TOOLCHAIN_FILE", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "JUST_JUSTFILE", "JUST_DOTENV_PATH",
		"JUST_DOTENV_FILENAME", "JUST_CHOOSER",
		"SIMPLE_BACKUP_SUFFIX", // the backup names of cp -b and kin (~/.bash kept as ~/.bashrc)
		// Options or settings files of search tools that may name a
		// program (rg's --pre, ack's --pager, fzf's --bind execute;
		// branch policy49).
		"RIPGREP_CONFIG_PATH", "ACKRC", "ACK_OPTIONS", "FZF_DEFAULT_OPTS", "FZF_DEFAULT_OPTS_FILE", "BAT_CONFIG_PATH",
		"LESS", "LESSKEY", "LESSKEY_SRC", "LESSKEYIN", "LESSKEY_CONTENT", "LESSEDIT",
		// The archive tar -c writes without -f, and zip's options (-O
		// FILE): policy49's archive files by another spelling (review49b).
		"TAPE", "ZIPOPT",
		// Compressors' options from the environment (xz -S SUFFIX, gzip
		// -S: the name of the file written), and the file python runs
		// first when it starts interactive (branch cmd50).
		"XZ_OPT", "XZ_DEFAULTS", "GZIP", "BZIP2", "BZIP", "PYTHONSTARTUP":
		return envCode
	case "AR", "AS", "LD", "CPP", "FC", "M2C", "PC", "LEX", "YACC", "LINT", "MAKEINFO", "TEX", "TEXI2DVI", "WEAVE", "CWEAVE",
		"TANGLE", "CTANGLE", "RM", "OBJC", "OBJCXX", "CUDACXX", "HIPCXX", "SWIFTC", "ASM":
		// make's built-in program variables take the environment's value
		// over their defaults (RM='rm -rf /' make clean), as cmake takes a
		// compiler from it (branch attack48).
		return envCommand
	case "CC", "CXX", // go build (cgo) and make run them (branch policy47)
		"GCCGO", "PKG_CONFIG", // go build -compiler=gccgo, cgo's #cgo pkg-config: lines (branch attack47)
		"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
		"GIT_ASKPASS", "GIT_PROXY_COMMAND", "WGET_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "RSYNC_RSH", "PAGER", "MANPAGER",
		"SYSTEMD_PAGER", "EDITOR", "VISUAL", "BROWSER", "LESSOPEN", "LESSCLOSE", "PROMPT_COMMAND",
		"ACK_PAGER", "ACK_PAGER_COLOR", "BAT_PAGER", "DELTA_PAGER", "FZF_DEFAULT_COMMAND": // (branch policy49)
		return envCommand
	}
	if npmConfigVar(name) {
		return envCode // npm_config_script_shell=… npm test
	}
	if cgoFlagVar(name) {
		return envCode // CGO_CFLAGS="-wrapper 'sh,-c,…'" (branch attack47)
	}
	if strings.HasPrefix(name, "CMAKE_") && (strings.HasSuffix(name, "_COMPILER_LAUNCHER") || strings.HasSuffix(name, "_LINKER_LAUNCHER")) {
		return envCommand // cmake reads CMAKE_C_COMPILER_LAUNCHER from the environment (branch attack48)
	}
	if strings.HasPrefix(name, "BASH_FUNC_") || strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") {
		return envCode // an exported function; git configuration (core.pager=…)
	}
	return toolVar(name) // cargo's, uv's, poetry's, Bundler's (branch policy48)
}

// nodeOptionsSafe reports whether a NODE_OPTIONS value holds only options
// that load no code: every field starts with one of these (memory limits,
// warnings, source maps), so NODE_OPTIONS=--max-old-space-size=4096 stays
// plain.
func nodeOptionsSafe(val string) bool {
	for _, f := range strings.Fields(val) {
		if !strings.HasPrefix(f, "--max-old-space-size=") && !strings.HasPrefix(f, "--max-semi-space-size=") &&
			!strings.HasPrefix(f, "--stack-trace-limit=") && !strings.HasPrefix(f, "--unhandled-rejections=") &&
			!strings.HasPrefix(f, "--dns-result-order=") &&
			!contains([]string{"--enable-source-maps", "--no-warnings", "--no-deprecation", "--openssl-legacy-provider",
				"--trace-warnings", "--trace-deprecation", "--trace-uncaught", "--experimental-vm-modules"}, f) {
			return false
		}
	}
	return true
}

// makeFlagsSafe reports whether a MAKEFLAGS value holds only flags that
// run nothing the makefile does not say: each field is -jN, -lN,
// --jobs=N, --load-average=N, --no-print-directory, --print-directory,
// --keep-going, --silent, or a cluster of the letters of -k, -s, -w,
// -B, -i, -n, -q, -r, -R, -t (with or without its dash, as make writes
// MAKEFLAGS). MAKEFLAGS=--eval=… or -E … is not.
func makeFlagsSafe(val string) bool {
	for _, f := range strings.Fields(val) {
		if contains([]string{"--no-print-directory", "--print-directory", "--keep-going", "--silent"}, f) {
			continue
		}
		if n, ok := strings.CutPrefix(f, "--jobs="); ok && isDigits(n) {
			continue
		}
		if n, ok := strings.CutPrefix(f, "--load-average="); ok && isDigits(n) {
			continue
		}
		f = strings.TrimPrefix(f, "-")
		if f == "" {
			return false
		}
		if (f[0] == 'j' || f[0] == 'l') && (len(f) == 1 || isDigits(f[1:])) {
			continue
		}
		if strings.Trim(f, "kswBinqrRt") != "" {
			return false
		}
	}
	return true
}

// setEnv judges the variable name set to val (known says val is literal):
// an envCode variable makes the command opaque (NODE_OPTIONS only unless
// nodeOptionsSafe), an envCommand one has its value parsed as a command
// (addEmbedded), or made opaque when the value is not literal.
func (pc *parsedCommand) setEnv(name, val string, known bool, depth int, unsafe, opaque func(string)) {
	switch envVar(name) {
	case envCode:
		if name == "NODE_OPTIONS" && known && nodeOptionsSafe(val) || contains([]string{"MAKEFLAGS", "GNUMAKEFLAGS", "MFLAGS"}, name) && known && makeFlagsSafe(val) ||
			name == "GOFLAGS" && known && goFlagsSafe(val) || name == "LESS" && known && lessEnvSafe(val) || (name == "RUSTFLAGS" || name == "RUSTDOCFLAGS") && known && rustFlagsSafe(val) ||
			name == "UV_PYTHON" && !uvVarCode(name, val, known) || (name == "GIT_DIR" || name == "GIT_COMMON_DIR") && known && dotGitDir(val) || cgoFlagVar(name) && known && cgoFlagsSafe(val) {
			return
		}
		opaque(fmt.Sprintf("%s makes a program load or run code the matcher cannot read", name))
	case envCommand:
		if !known {
			opaque(fmt.Sprintf("%s holds a command line that is not literal", name))
			return
		}
		what := "the command line in " + name
		if name == "BROWSER" { // a list of commands separated by ':'
			for _, c := range strings.Split(val, ":") {
				pc.addEmbedded(c, depth, what, unsafe, opaque)
			}
			return
		}
		pc.addEmbedded(strings.TrimLeft(val, "|-"), depth, what, unsafe, opaque) // LESSOPEN='|cmd %s'
	}
}

// checkAssign judges an assignment (X=… cmd, X=…, export X=…, declare -x
// 'X=…', local -n r=X).
func (pc *parsedCommand) checkAssign(a *syntax.Assign, depth int, unsafe, opaque func(string)) {
	if a.Name == nil {
		// declare 'X=…' or declare "$v": the name is in the value.
		v, ok := plainLiteral(a.Value)
		if !ok {
			if a.Value != nil {
				opaque("declare and kin get a name that is not literal, which may make a program run code")
			}
			return
		}
		name, val, _ := strings.Cut(v, "=")
		pc.setEnv(name, val, true, depth, unsafe, opaque)
		return
	}
	if a.Naked || a.Array != nil || a.Index != nil {
		if envVar(a.Name.Value) != envPlain {
			opaque(fmt.Sprintf("%s is exported or set in a way the matcher does not read", a.Name.Value))
		}
		return
	}
	val, known := "", true
	if a.Value != nil {
		val, known = plainLiteral(a.Value)
	}
	if a.Append && envVar(a.Name.Value) != envPlain {
		known = false // += adds to a value the matcher does not know
	}
	pc.setEnv(a.Name.Value, val, known, depth, unsafe, opaque)
	if envVar(val) != envPlain {
		opaque(fmt.Sprintf("a name reference to %s may make a program run code", val)) // local -n r=NODE_OPTIONS
	}
}

// checkEnvWords judges the NAME=value words of a wrapper (env X=… cmd,
// sudo X=… cmd).
func (pc *parsedCommand) checkEnvWords(words []cmdWord, depth int, unsafe, opaque func(string)) {
	if words[0].unknown || !isWrapper(path.Base(words[0].lit)) {
		return
	}
	for _, w := range words[1:] {
		if w.unknown {
			continue // checkRunner makes a wrapper with such a word opaque
		}
		if name, val, ok := strings.Cut(w.lit, "="); ok && name != "" && !strings.HasPrefix(name, "-") {
			pc.setEnv(name, val, true, depth, unsafe, opaque)
		}
	}
}

// addEmbedded parses src, a command line a program runs (a variable's
// value, rsync -e), as a command: its simple commands join pc's (deny and
// approve rules match them; an allow rule must match them too), what it
// refuses or cannot read makes pc unsafe or opaque.
func (pc *parsedCommand) addEmbedded(src string, depth int, what string, unsafe, opaque func(string)) {
	if depth >= maxRemoteDepth {
		opaque(fmt.Sprintf("%s nests deeper than %d levels", what, maxRemoteDepth))
		return
	}
	rc := parseCommandDepth(src, depth+1)
	if rc.Opaque != "" {
		opaque(what + ": " + rc.Opaque)
	}
	if rc.Unsafe != "" {
		unsafe(what + ": " + rc.Unsafe)
	}
	if pc.allowed == nil && rc.allowed != nil {
		pc.allowed = slices.Clone(pc.Simple)
	}
	pc.Simple = append(pc.Simple, rc.Simple...)
	if pc.allowed != nil {
		pc.allowed = append(pc.allowed, rc.allowList()...)
	}
}

// checkEnvArgs judges the call's other top-level arguments (all but the
// command argument named command) as environments the upstream may give
// the command: an object's keys with their values ({"env": {"PAGER":
// "rm x"}}), an array's "NAME=value" strings (["LD_PRELOAD=./x.so"]) or
// objects with "name" and "value" ([{"name": "PATH", "value": …}]). A
// variable envVar classifies is judged as in the command (setEnv, which
// parses a command line and makes code opaque; names compared in upper
// case, as Windows does); PATH and every LD_* and DYLD_* variable make
// the command unsafe, as an assignment in it would: an allow rule never
// allows it (PATH=/tmp/x makes "ls" run /tmp/x/ls). Branch policy45b
// widened the reading: keys of nested objects and arrays (to
// maxEnvArgDepth levels; deeper is opaque), ["NAME", "value"] pairs,
// objects whose name and value keys are spelled in any case or as
// "key"/"val", names with surrounding spaces, and a top-level string's
// NAME=value words (envString; their values are not known, so a variable
// that may inject code makes the command opaque). Other keys, and
// numbers, are not read.
func (pc *parsedCommand) checkEnvArgs(args map[string]any, command string) {
	unsafe, opaque := pc.markUnsafe, pc.markOpaque
	one := func(arg, name string, val any) {
		up := strings.ToUpper(name)
		if searchVar(up) {
			unsafe(fmt.Sprintf("argument %q sets %s in the command's environment", arg, name))
		}
		if envVar(up) == envPlain {
			return
		}
		s, known := val.(string)
		before := pc.Opaque
		pc.setEnv(up, s, known, 0, unsafe, opaque)
		if pc.Opaque != before {
			pc.Opaque = fmt.Sprintf("argument %q sets %s: %s", arg, name, pc.Opaque)
			pc.Unsafe = pc.Opaque
		}
	}
	var walk func(arg string, v any, depth int)
	walk = func(arg string, v any, depth int) {
		if depth > maxEnvArgDepth {
			opaque(fmt.Sprintf("argument %q nests deeper than %d levels", arg, maxEnvArgDepth))
			return
		}
		switch v := v.(type) {
		case string:
			if depth == 0 {
				envString(v, func(name string) { one(arg, name, nil) })
			}
		case map[string]any:
			for _, name := range slices.Sorted(maps.Keys(v)) {
				switch v[name].(type) {
				case map[string]any, []any: // {"options": {"env": {…}}}
					walk(arg, v[name], depth+1)
					if up := strings.ToUpper(strings.TrimSpace(name)); up != "ENV" && injects(up) {
						one(arg, strings.TrimSpace(name), nil) // {"LD_PRELOAD": ["./x.so"]}
					}
				default:
					one(arg, strings.TrimSpace(name), v[name])
				}
			}
		case []any:
			for _, e := range v {
				switch e := e.(type) {
				case string:
					if name, val, ok := strings.Cut(e, "="); ok {
						one(arg, strings.TrimSpace(name), val)
					}
				case []any:
					// ["NAME", "value"] pairs.
					if len(e) == 0 {
						continue
					}
					if name, ok := e[0].(string); ok {
						var val any
						if len(e) > 1 {
							val = e[1]
						}
						one(arg, strings.TrimSpace(name), val)
					}
				case map[string]any:
					if name, ok := foldGet(e, "name", "key").(string); ok {
						one(arg, strings.TrimSpace(name), foldGet(e, "value", "val"))
					}
				}
				walk(arg, e, depth+1)
			}
		}
	}
	read := false
	for k, v := range args {
		switch v := v.(type) {
		case map[string]any, []any:
			read = read || k != command
		case string:
			read = read || k != command && strings.Contains(v, "=")
		}
	}
	if !read {
		return // the usual call: nothing that could set a variable, nothing to sort
	}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if k != command {
			walk(k, args[k], 0)
		}
	}
}

// maxEnvArgDepth is how deep checkEnvArgs reads nested objects and arrays.
const maxEnvArgDepth = 4

// foldGet returns the value of the first of keys (lower case) found in m,
// keys compared without case; nil when none is.
func foldGet(m map[string]any, keys ...string) any {
	for _, want := range keys {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if strings.EqualFold(strings.TrimSpace(k), want) {
				return m[k]
			}
		}
	}
	return nil
}

// envString calls name for each NAME in s that looks like an environment
// entry: a word (split at white space, ';', ',' and '&') of the form
// NAME=value whose NAME is a plain identifier ("LD_PRELOAD=./x.so",
// "A=1\nB=2", "PATH=/x; CI=1").
func envString(s string, name func(string)) {
	if !strings.Contains(s, "=") {
		return
	}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(" \t\r\n;,&", r) }) {
		n, _, ok := strings.Cut(f, "=")
		if ok && n != "" && strings.Trim(strings.ToUpper(n), "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == "" {
			name(n)
		}
	}
}

// searchVar reports whether up (a name in upper case) changes where a
// program or its libraries are found: PATH, LD_*, DYLD_*, GOROOT (go
// runs the compiler and linker from GOROOT/pkg/tool; branch attack47), a
// tool's home or environments' directory (toolDirVar; branch policy48).
func searchVar(up string) bool {
	return up == "PATH" || up == "GOROOT" || strings.HasPrefix(up, "LD_") || strings.HasPrefix(up, "DYLD_") || toolDirVar(up)
}

// injects reports whether up (a name in upper case) is a variable that
// checkEnvArgs judges: searchVar, or one envVar classifies.
func injects(up string) bool {
	return searchVar(up) || envVar(up) != envPlain
}
