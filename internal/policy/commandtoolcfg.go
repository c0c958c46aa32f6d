package policy

import (
	"fmt"
	"strings"
)

// Other tools' settings that name a program or code (branch policy48), read
// as policy47 read npm's, pip's and go's: cargo's --config and -Z and its
// variables (RUSTC_WRAPPER, CARGO_TARGET_<triple>_RUNNER, RUSTFLAGS' -C
// linker=…), uv's --config-file, --env-file and --python PATH (and uv
// run -, a script from the input), poetry config and poetry source add,
// bundle config and bundle --gemfile. A setting outside a short safe list
// makes the call opaque; bundle exec is a runner (commandpackages.go).

// cargoSafeKeys are cargo configuration keys (lower case) that name no
// program, code, registry or file of settings; profile.NAME.KEY is
// checked by its last part (cargoProfileKeys).
var cargoSafeKeys = []string{"build.jobs", "build.target", "build.target-dir", "build.incremental", "term.color",
	"term.verbose", "term.quiet", "term.progress.when", "term.progress.width", "net.retry", "net.offline", "http.timeout",
	"http.multiplexing", "http.low-speed-limit", "cargo-new.vcs", "future-incompat-report.frequency"}

// cargoProfileKeys are the profile settings that run nothing (not
// rustflags, which may name a linker).
var cargoProfileKeys = []string{"opt-level", "debug", "lto", "codegen-units", "incremental", "panic", "strip",
	"debug-assertions", "overflow-checks", "split-debuginfo"}

// cargoUnstableSafe are -Z flags that load or run nothing.
var cargoUnstableSafe = []string{"unstable-options", "minimal-versions", "direct-minimal-versions", "avoid-dev-deps",
	"no-index-update", "build-std", "build-std-features", "timings"}

// cargoKeySafe reports whether key (a cargo configuration key as written,
// dotted, unquoted) is one of cargoSafeKeys or a profile's harmless key.
func cargoKeySafe(key string) bool {
	k := strings.ToLower(strings.TrimSpace(key))
	if contains(cargoSafeKeys, k) {
		return true
	}
	parts := strings.Split(k, ".")
	return len(parts) == 3 && parts[0] == "profile" && contains(cargoProfileKeys, parts[2])
}

// cargoCode says why cargo's words set a program or code cargo runs:
// --config with a file (a path, no '=') or a key outside cargoKeySafe
// (build.rustc-wrapper, target.*.runner, alias.*, env.*, include, …), -Z
// with a flag outside cargoUnstableSafe, or a word that is not literal.
// cargo's options come before its subcommand and after it alike.
func cargoCode(words []cmdWord) string {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral("cargo")
		}
		if w.lit == "--" {
			return ""
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case opt == "--config":
			v, ok := optionValue(words, &i, val, hasVal)
			key, _, isKV := strings.Cut(v, "=")
			if !ok || !isKV || strings.ContainsAny(key, `"'[`) || !cargoKeySafe(key) {
				return fmt.Sprintf("cargo --config %s sets a program or code cargo runs (build.rustc-wrapper, target.*.runner, a file of settings), which the matcher cannot read", v)
			}
		case strings.HasPrefix(w.lit, "-Z"):
			v, ok := optionValue(words, &i, w.lit[2:], true)
			flag, _, _ := strings.Cut(v, "=")
			if !ok || !contains(cargoUnstableSafe, flag) {
				return fmt.Sprintf("cargo -Z %s may make cargo load or run code the matcher cannot read", v)
			}
		}
	}
	return ""
}

// rustFlagsSafe reports whether a RUSTFLAGS (or RUSTDOCFLAGS) value holds
// only flags that load and run nothing: lint levels (-D, -W, -A, -F,
// --cap-lints), --cfg, -g, -O and -C with opt-level, debuginfo,
// target-cpu, target-feature, codegen-units, panic, strip,
// overflow-checks, debug-assertions, force-frame-pointers (not linker=,
// link-arg=, llvm-args=, or -Z).
func rustFlagsSafe(val string) bool {
	f := strings.Fields(val)
	for i := 0; i < len(f); i++ {
		w := f[i]
		switch {
		case w == "-g" || w == "-O":
		case contains([]string{"-D", "-W", "-A", "-F", "--cfg", "--cap-lints"}, w):
			i++
		case len(w) > 2 && strings.IndexByte("DWAF", w[1]) >= 0 && w[0] == '-' && w[1] != '-',
			strings.HasPrefix(w, "--cfg=") || strings.HasPrefix(w, "--cap-lints="):
		case w == "-C" || strings.HasPrefix(w, "-C"):
			v := w[2:]
			if v == "" {
				if i+1 >= len(f) {
					return false
				}
				i++
				v = f[i]
			}
			k, _, _ := strings.Cut(v, "=")
			if !contains([]string{"opt-level", "debuginfo", "target-cpu", "target-feature", "codegen-units", "panic", "strip",
				"overflow-checks", "debug-assertions", "force-frame-pointers"}, k) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// cargoVar classifies a cargo or rustc environment variable (name in
// upper case): the programs cargo runs (RUSTC, RUSTC_WRAPPER, RUSTDOC,
// their CARGO_BUILD_ spellings, a target's RUNNER and LINKER) are command
// lines; RUSTFLAGS and kin and every other CARGO_ variable (CARGO_HOME is
// a toolDirVar) outside a safe list (cargo reads any
// configuration key from CARGO_KEY: CARGO_ALIAS_*, CARGO_ENV_*,
// CARGO_REGISTRIES_*_CREDENTIAL_PROVIDER) are code; envPlain otherwise.
func cargoVar(name string) envKind {
	switch name {
	case "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTDOC", "CARGO_BUILD_RUSTC", "CARGO_BUILD_RUSTC_WRAPPER",
		"CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER", "CARGO_BUILD_RUSTDOC", "CARGO_HOST_LINKER":
		return envCommand
	case "RUSTFLAGS", "RUSTDOCFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_ENCODED_RUSTDOCFLAGS", "CARGO_BUILD_RUSTFLAGS",
		"CARGO_BUILD_RUSTDOCFLAGS":
		return envCode
	case "CARGO_HOME":
		return envPlain // toolDirVar
	}
	rest, ok := strings.CutPrefix(name, "CARGO_")
	if !ok {
		return envPlain
	}
	if strings.HasPrefix(rest, "TARGET_") && (strings.HasSuffix(rest, "_RUNNER") || strings.HasSuffix(rest, "_LINKER")) {
		return envCommand
	}
	key := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
	if contains([]string{"target-dir", "build-jobs", "build-target", "build-target-dir", "incremental", "build-incremental", "term-color",
		"term-verbose", "term-quiet", "term-progress-when", "net-retry", "net-offline", "http-timeout", "log"}, key) {
		return envPlain
	}
	if p, ok := strings.CutPrefix(key, "profile-"); ok {
		for _, k := range cargoProfileKeys {
			if strings.HasSuffix(p, "-"+k) {
				return envPlain
			}
		}
	}
	return envCode
}

// uvCode says why uv's (or uvx's, name) words run a program or code the
// matcher cannot read: --config-file (a file of settings), --env-file
// (variables such as LD_PRELOAD for the command), --python/-p naming a
// path (the interpreter uv runs), run - (a script read from the input),
// or a word that is not literal.
func uvCode(name string, words []cmdWord) string {
	sub := ""
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral(name)
		}
		if w.lit == "--" {
			return ""
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case opt == "--config-file" || opt == "--env-file":
			return fmt.Sprintf("%s %s reads settings or variables from a file the matcher cannot read", name, opt)
		case opt == "--python" || w.lit == "-p" || strings.HasPrefix(w.lit, "-p") && !strings.HasPrefix(w.lit, "--"):
			v, ok := val, true
			switch {
			case w.lit == "-p" || opt == "--python" && !hasVal:
				v, ok = optionValue(words, &i, "", false)
			case !strings.HasPrefix(w.lit, "--"):
				v = w.lit[2:]
			}
			if !ok || strings.ContainsAny(v, `/\`) {
				return fmt.Sprintf("%s --python %s runs an interpreter the matcher cannot read", name, v)
			}
		case !hasVal && contains(uvValued, w.lit):
			i++ // the option's value (uv run --with x --python ./y cmd)
		case strings.HasPrefix(w.lit, "-"):
		case sub == "" && (name == "uvx" || w.lit == "run" || w.lit == "tool"):
			sub = w.lit
			if name == "uvx" {
				sub = "run"
				i-- // uvx's first positional is its command
			}
		case sub == "tool" && w.lit == "run":
			sub = "run"
		case sub == "run" && w.lit == "-":
			return fmt.Sprintf("%s run - runs a script read from its input", name)
		case sub == "run":
			return "" // the command's words are its own
		case sub == "":
			sub = w.lit
		}
	}
	return ""
}

// uvValued are uv's options that take the next word as their value.
var uvValued = []string{"--with", "--with-editable", "--with-requirements", "-w", "--from", "--package", "--extra", "--group",
	"--only-group", "--no-group", "--index", "--index-url", "-i", "--extra-index-url", "--default-index", "--find-links", "-f",
	"--directory", "--project", "--cache-dir", "--color", "--python-preference", "--index-strategy", "--keyring-provider",
	"--resolution", "--prerelease", "--exclude-newer", "--link-mode", "--refresh-package", "--reinstall-package",
	"--upgrade-package", "-P", "--no-binary-package", "--no-build-package", "--config-setting", "-C", "--allow-insecure-host",
	"--env", "--requirements", "-r", "--constraints", "-c", "--overrides", "--target", "--prefix"}

// uvVarCode reports whether the uv variable name (upper case) with val makes
// uv read a file of settings or variables, or run an interpreter by path.
func uvVarCode(name, val string, known bool) bool {
	switch name {
	case "UV_CONFIG_FILE", "UV_ENV_FILE":
		return true
	case "UV_PYTHON":
		return !known || strings.ContainsAny(val, `/\`)
	}
	return false
}

// poetrySafeKeys are poetry config keys that name no program, directory
// of environments, package source or file.
var poetrySafeKeys = []string{"virtualenvs.create", "virtualenvs.in-project", "virtualenvs.options.always-copy",
	"virtualenvs.options.no-pip", "virtualenvs.options.system-site-packages", "virtualenvs.prompt", "installer.parallel",
	"installer.max-workers", "installer.modern-installation", "installer.no-binary", "installer.only-binary",
	"installer.re-resolve", "keyring.enabled", "solver.lazy-wheel", "requests.max-retries", "no-interaction"}

// poetryKeySafe reports whether key is one of poetrySafeKeys or a
// credential (http-basic.NAME, pypi-token.NAME).
func poetryKeySafe(key string) bool {
	k := strings.ToLower(key)
	return contains(poetrySafeKeys, k) || strings.HasPrefix(k, "http-basic.") || strings.HasPrefix(k, "pypi-token.")
}

// poetryCode says why poetry's words write a setting poetry later runs
// code by: config KEY VALUE with a key outside poetryKeySafe
// (virtualenvs.path, repositories.*, cache-dir), source add (a package
// source written into pyproject.toml), self add of a path or URL (a
// plugin every later poetry command loads), or a word that is not
// literal.
func poetryCode(words []cmdWord) string {
	for _, w := range words[1:] {
		if w.unknown {
			return notLiteral("poetry")
		}
	}
	k := pmSub(words, "config", "source", "self")
	if k < 0 {
		return ""
	}
	args := positionals(words[k+1:], "-C", "--directory", "-P", "--project", "--priority")
	unset := contains(wordsLit(words[k+1:]), "--unset")
	switch words[k].lit {
	case "config":
		if len(args) >= 2 && !unset && !poetryKeySafe(args[0]) {
			return fmt.Sprintf("poetry config %s writes a setting poetry later runs code by (an environment's directory, a package source), which the matcher cannot read", args[0])
		}
	case "source":
		if len(args) > 0 && args[0] == "add" {
			return "poetry source add writes a package source into pyproject.toml, from which later installs run code"
		}
	case "self":
		if len(args) > 1 && args[0] == "add" && strings.ContainsAny(strings.Join(args[1:], " "), `/\:`) {
			return "poetry self add installs a plugin from a path or URL, which every later poetry command loads"
		}
	}
	return ""
}

// wordsLit returns the words' texts.
func wordsLit(words []cmdWord) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = w.lit
	}
	return out
}

// bundleSafeKeys are Bundler settings (lower case, '-' as '_') that name
// no program, Gemfile, gem source or directory of gems.
var bundleSafeKeys = []string{"jobs", "retry", "without", "with", "deployment", "frozen", "clean", "silence_root_warning",
	"cache_all", "timeout", "redirect", "force_ruby_platform", "only", "ignore_messages", "disable_version_check",
	"disable_shared_gems", "auto_install"}

// bundleKeySafe reports whether key (a Bundler setting, BUNDLE_ prefix
// dropped) is one of bundleSafeKeys.
func bundleKeySafe(key string) bool {
	return contains(bundleSafeKeys, strings.ToLower(strings.ReplaceAll(key, "-", "_")))
}

// bundleCode says why bundle's words write or give a setting Bundler
// later runs code by: config set KEY VALUE (also config KEY VALUE, the
// old form) with a key outside bundleSafeKeys (gemfile, shebang, path,
// local.*, mirror.*, build.*), --gemfile (a Gemfile is Ruby code, and
// one by another name is not guarded), or a word that is not literal.
func bundleCode(words []cmdWord) string {
	for _, w := range words[1:] {
		if w.unknown {
			return notLiteral("bundle")
		}
		if opt, _, _ := strings.Cut(w.lit, "="); opt == "--gemfile" {
			return "bundle --gemfile reads a Gemfile (Ruby code) by a name the matcher does not guard"
		}
	}
	k := pmSub(words, "config")
	if k < 0 {
		return ""
	}
	args := positionals(words[k+1:])
	if len(args) > 0 && contains([]string{"list", "get", "unset"}, args[0]) {
		return ""
	}
	if len(args) > 0 && args[0] == "set" {
		args = args[1:]
	} else if len(args) < 2 {
		return "" // bundle config KEY reads it
	}
	if contains(wordsLit(words[k+1:]), "--delete") {
		return ""
	}
	if len(args) > 0 && !bundleKeySafe(args[0]) {
		return fmt.Sprintf("bundle config %s writes a setting Bundler later runs code by (a Gemfile, a gem source or path, a shebang), which the matcher cannot read", args[0])
	}
	return ""
}

// toolConfigCode says why cargo, uv, uvx, poetry or bundle (name, a
// base name) with words sets or reads a program or code the matcher
// cannot read; "" for any other program.
func toolConfigCode(name string, words []cmdWord) string {
	switch name {
	case "cargo":
		return cargoCode(words)
	case "uv", "uvx":
		return uvCode(name, words)
	case "poetry":
		return poetryCode(words)
	case "bundle", "bundler":
		return bundleCode(words)
	}
	return buildToolCode(name, words) // just, rake, cmake, mvn, … (branch attack48)
}

// toolDirVar reports whether up (a name in upper case) names a tool's
// home, configuration or environments' directory, or rustup's toolchain:
// CARGO_HOME, RUSTUP_HOME, RUSTUP_TOOLCHAIN, POETRY_HOME,
// POETRY_CONFIG_DIR, POETRY_CACHE_DIR, POETRY_DATA_DIR,
// POETRY_VIRTUALENVS_PATH, BUNDLE_PATH, BUNDLE_APP_CONFIG,
// BUNDLE_USER_HOME. Like PATH and GOROOT they choose the programs and
// code a call runs and are often set in a whole environment (Docker's
// rust, ruby and poetry images), so allow rules refuse them (searchVar)
// and deny rules do not treat them as code.
func toolDirVar(up string) bool {
	return contains([]string{"CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "POETRY_HOME", "POETRY_CONFIG_DIR", "POETRY_CACHE_DIR",
		"POETRY_DATA_DIR", "POETRY_VIRTUALENVS_PATH", "BUNDLE_PATH", "BUNDLE_APP_CONFIG", "BUNDLE_USER_HOME"}, up)
}

// toolVar classifies the environment variables of cargo and rustc
// (cargoVar), uv (UV_CONFIG_FILE, UV_ENV_FILE, UV_PYTHON), poetry
// (POETRY_KEY for any key outside poetryKeySafe) and Bundler (BUNDLE_KEY
// outside bundleKeySafe: BUNDLE_GEMFILE); envPlain for a toolDirVar and
// any other name.
func toolVar(name string) envKind {
	if k := cargoVar(name); k != envPlain {
		return k
	}
	switch {
	case toolDirVar(name):
		return envPlain
	case name == "UV_CONFIG_FILE" || name == "UV_ENV_FILE" || name == "UV_PYTHON":
		return envCode
	case strings.HasPrefix(name, "POETRY_"):
		key := strings.ToLower(strings.TrimPrefix(name, "POETRY_"))
		for _, k := range poetrySafeKeys {
			if strings.NewReplacer(".", "_", "-", "_").Replace(k) == key {
				return envPlain
			}
		}
		if strings.HasPrefix(key, "http_basic_") || strings.HasPrefix(key, "pypi_token_") {
			return envPlain
		}
		return envCode
	case strings.HasPrefix(name, "BUNDLE_"):
		if bundleKeySafe(strings.TrimPrefix(name, "BUNDLE_")) {
			return envPlain
		}
		return envCode
	}
	return envPlain
}
