package policy

import (
	"fmt"
	"path"
	"strings"
)

// Fixers that add code of the caller's choosing (branch attack50). A
// formatter's walk of "." was accepted (commandformat.go) because a
// formatter only re-lays out what a file already says. Two fixers do
// more: isort -a/--add-import LINE and ruff check --fix with
// lint.isort.required-imports (rule I002) add an import line to every
// Python file they rewrite, the guarded noxfile.py included, so isort -a
// 'import evil' . made nox, which a human runs later, import a module
// the agent wrote. The line comes from an option (isort -a; ruff --config
// 'lint.isort.required-imports=[…]', inline TOML) or from a configuration
// file the tool finds by itself (ruff.toml, .ruff.toml, .isort.cfg,
// setup.cfg, .editorconfig; pyproject.toml and tox.ini were guarded
// already). So in write mode those options are opaque, a settings or
// configuration option is accepted only when it names such a guarded
// file (one no allowed call writes), and the configuration files are
// guarded as files a program runs as code (fixerConfigFile, read by
// codeFile).

// fixerConfigNames are base names (lower case) of configuration files
// from which isort or ruff read import lines to add to every file.
var fixerConfigNames = []string{"ruff.toml", ".ruff.toml", ".isort.cfg", "setup.cfg", ".editorconfig"}

// fixerConfigFile reports whether base (a lower-case base name) is one
// of fixerConfigNames.
func fixerConfigFile(base string) bool {
	return contains(fixerConfigNames, base)
}

// fixerAddsCode says why a fixer (name) in write mode adds an import line
// of the caller's choosing to the files it rewrites, read from its words
// after the program (args, the subcommand included); "" when it does
// not: isort's -a (also in a cluster), --add-import and a --settings-path
// (--sp, --settings-file, --settings) that is not a guarded file or ".";
// ruff check's --config, global or after check, unless its value is a
// guarded configuration file (ruff.toml, .ruff.toml, pyproject.toml).
func fixerAddsCode(name string, args []cmdWord) string {
	switch name {
	case "isort":
		for i := 0; i < len(args); i++ {
			w := args[i].lit
			opt, val, hasVal := strings.Cut(w, "=")
			switch {
			case w == "--":
				return ""
			case strings.HasPrefix(w, "--"):
				if longOption(opt, "--add-import", "--add_import", "--add-imports") {
					return fmt.Sprintf("isort %s adds an import line to every file it rewrites, guarded ones included", opt)
				}
				if longOption(opt, "--sp", "--settings-path", "--settings-file", "--settings") {
					v := fileOf(valueWord(args, &i, val, hasVal))
					if !codeFile(v) && path.Clean(v) != "." {
						return fmt.Sprintf("isort %s %q reads import lines to add to every file it rewrites from a file an allowed call may write", opt, v)
					}
				}
			case strings.HasPrefix(w, "-") && strings.IndexByte(w, 'a') > 0:
				return fmt.Sprintf("isort %s adds an import line to every file it rewrites, guarded ones included", w)
			}
		}
	case "ruff":
		if subcommandAt(args, "check") < 0 {
			return ""
		}
		for i := 0; i < len(args); i++ {
			w := args[i].lit
			opt, val, hasVal := strings.Cut(w, "=")
			if w == "--" {
				return ""
			}
			if opt != "--config" {
				continue
			}
			v := valueWord(args, &i, val, hasVal)
			if v.unknown || outsideTree(v.lit) || !contains([]string{"ruff.toml", ".ruff.toml", "pyproject.toml"}, strings.ToLower(path.Base(v.lit))) {
				return fmt.Sprintf("ruff check --config %q may add an import line (lint.isort.required-imports) to every file it fixes, guarded ones included", fileOf(v))
			}
		}
	}
	return ""
}
