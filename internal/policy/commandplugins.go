package policy

import (
	"fmt"
	"strings"
)

// Options of test runners, linters and formatters that name a local file
// or module the tool loads as code (branch cmd50): eslint -f ./x.js (a
// formatter is a module), eslint --rulesdir, vitest --reporter=./x.js,
// jest --setupFiles, mocha --require, prettier --plugin ./x.js,
// golangci-lint -c x.yml (a configuration may name plugins), pytest -p
// mod, node -r ./x.js, npx --package ./x. Such a file is a program the
// matcher does not see: the call is opaque (refused by an allow rule,
// matched by deny and approve rules). A package name (a module under
// node_modules, which no allowed call writes) is not a path and stays
// allowed where the tool resolves it only there; a value that is not
// literal counts as a path.

// pluginOpts lists, by program, the options whose value is loaded as
// code whatever it is (any: also a bare name, which the tool may find as
// a local file), and those loaded as code when the value is a path
// (pathLike). A name is matched as the word before '=' (or, for a short
// option, as its first two characters: -pfoo).
type pluginOpts struct {
	any, paths []string
	// builtins are values of paths' options that name the tool's own
	// reporters or formatters (vitest --reporter=dot).
	builtins []string
}

var pluginOptions = map[string]pluginOpts{
	"eslint": {any: []string{"--rulesdir", "--resolve-plugins-relative-to", "-c", "--config"},
		paths: []string{"-f", "--format", "--plugin", "--parser"}},
	"prettier": {any: []string{"--plugin-search-dir", "--config"}, paths: []string{"--plugin"}},
	"vitest": {any: []string{"-c", "--config", "--setupFiles", "--globalSetup", "--workspace"},
		paths: []string{"--reporter", "--environment", "--pool", "--coverage.provider", "--coverage.customProviderModule", "--browser.provider",
			"--typecheck.checker", "--coverage.reporter"}, // a checker program, a reporter module (attack50)
		builtins: []string{"default", "basic", "verbose", "dot", "json", "junit", "tap", "tap-flat", "hanging-process",
			"github-actions", "blob", "html", "tree", "node", "jsdom", "happy-dom", "edge-runtime", "threads", "forks",
			"vmThreads", "vmForks", "v8", "istanbul"}},
	"jest": {any: []string{"-c", "--config", "--setupFiles", "--setupFilesAfterEnv", "--globalSetup", "--globalTeardown",
		"--testRunner", "--testSequencer", "--transform", "--resolver", "--runner", "--snapshotResolver",
		"--testResultsProcessor", "--watchPlugins", "--filter", "--prettierPath", "--dependencyExtractor", "--reporters",
		"--preset", "--moduleLoader"},
		paths:    []string{"--testEnvironment", "--env"},
		builtins: []string{"node", "jsdom"}},
	"mocha": {any: []string{"-r", "--require", "--config", "--package", "--loader", "-n", "--node-option", "--ui", "-u"},
		paths: []string{"-R", "--reporter"},
		builtins: []string{"spec", "dot", "nyan", "tap", "landing", "list", "progress", "json", "json-stream", "min", "doc",
			"markdown", "xunit"}},
	"golangci-lint": {any: []string{"-c", "--config"}},
	"node":          {paths: []string{"-r", "--require", "--import", "--loader", "--experimental-loader"}},
	"npx":           {paths: []string{"-p", "--package"}},
}

// cmd50Code says why words (words[0] is the program, name its base name)
// rewrite a guarded file as a formatter (formatterCode), load a local
// file as code by an option (pluginCode), or build a crate outside the
// tree (cargo --manifest-path); "" when they do not.
func cmd50Code(name string, words []cmdWord) string {
	if why := formatterCode(name, words); why != "" {
		return why
	}
	if why := reportFilesCode(name, words); why != "" { // commandreports.go
		return why
	}
	if pname, args, ok := pytestWords(name, words); ok { // commandattack49.go
		return pytestPluginCode(pname, args)
	}
	switch name {
	case "cargo":
		for i := 1; i < len(words); i++ {
			if opt, val, hasVal := strings.Cut(words[i].lit, "="); opt == "--manifest-path" {
				if v := valueWord(words, &i, val, hasVal); v.unknown || outsideTree(v.lit) {
					return "cargo --manifest-path outside the tree builds and runs a crate (its build.rs too) the matcher cannot read"
				}
			}
		}
	case "golangci-lint":
		if subcommandAt(words[1:], "custom") >= 0 {
			return "golangci-lint custom builds and runs a binary with the plugins its .custom-gcl.yml names"
		}
	case "npm":
		// npm exec --package ./x and npm x: npx's options.
		if k := subcommandAt(words[1:], "exec", "x"); k >= 0 {
			return pluginCode("npx", words[1+k:])
		}
	}
	return pluginCode(name, words)
}

// pluginCode reads pluginOptions for name.
func pluginCode(name string, words []cmdWord) string {
	po, ok := pluginOptions[name]
	if !ok {
		return ""
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral(name)
		}
		if w.lit == "--" || (name == "node" || name == "npx") && !strings.HasPrefix(w.lit, "-") {
			return "" // node's script, npx's command: what follows is its arguments
		}
		if !strings.HasPrefix(w.lit, "-") {
			continue
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		if !strings.HasPrefix(opt, "--") && len(opt) > 2 && !hasVal {
			if last := "-" + opt[len(opt)-1:]; !contains(po.any, opt[:2]) && !contains(po.paths, opt[:2]) &&
				(contains(po.any, last) || contains(po.paths, last)) {
				opt = last // a cluster whose last letter takes the next word: npx -yp ./x
			} else {
				opt, val, hasVal = opt[:2], opt[2:], true // -pfoo, -r./x.js
			}
		}
		switch {
		case contains(po.any, opt):
			v := valueWord(words, &i, val, hasVal)
			return fmt.Sprintf("%s %s %s loads that file or module as code, which the matcher cannot read", name, opt, shown(v))
		case contains(po.paths, opt):
			v := valueWord(words, &i, val, hasVal)
			for _, s := range strings.Split(v.lit, ",") {
				if v.unknown || !contains(po.builtins, s) && pathLike(s) {
					return fmt.Sprintf("%s %s %s loads a local file as code, which the matcher cannot read", name, opt, shown(v))
				}
			}
		}
	}
	return ""
}

// pytestPluginCode reads pytest's -p NAME (a module imported as a plugin,
// also a local one; -p no:NAME disables one) and --confcutdir and
// --rootdir outside the tree (conftest.py files there are loaded).
func pytestPluginCode(name string, args []cmdWord) string {
	for i := 0; i < len(args); i++ {
		w := args[i].lit
		if w == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(w, "=")
		switch {
		case opt == "-p" || strings.HasPrefix(w, "-p") && !strings.HasPrefix(w, "--"):
			v := valueWord(args, &i, strings.TrimPrefix(w, "-p"), len(w) > 2)
			if v.unknown || !strings.HasPrefix(v.lit, "no:") {
				return fmt.Sprintf("%s -p %s imports a module as a plugin (a local one too), which the matcher cannot read", name, shown(v))
			}
		case longOption(opt, "--confcutdir", "--rootdir"):
			if v := valueWord(args, &i, val, hasVal); v.unknown || outsideTree(v.lit) {
				return fmt.Sprintf("%s %s %s loads conftest.py files outside the tree, which the matcher cannot read", name, opt, shown(v))
			}
		}
	}
	return ""
}

// pathLike reports whether v, a module or plugin name as an option gives
// it, names a local file rather than a package under node_modules: it
// starts with '.', '/' or '~', holds a backslash or a scheme or drive
// (file:, C:), or ends in a script's extension.
func pathLike(v string) bool {
	if v == "" || strings.HasPrefix(v, ".") || strings.HasPrefix(v, "/") || strings.HasPrefix(v, "~") ||
		strings.ContainsAny(v, `\:`) {
		return true
	}
	for _, ext := range []string{".js", ".cjs", ".mjs", ".ts", ".cts", ".mts", ".jsx", ".tsx", ".json", ".node", ".py", ".so"} {
		if strings.HasSuffix(strings.ToLower(v), ext) {
			return true
		}
	}
	return false
}

// shown is a word as a message shows it.
func shown(w cmdWord) string {
	if w.unknown {
		return "<expansion>"
	}
	return fmt.Sprintf("%q", w.lit)
}
