package policy

import "strings"

// Read-only tools that run a program named in an option (branch
// policy49): a search or viewing tool an allow rule admits as harmless
// (rg *, git grep *) runs what these name on every file or on its
// output, out of the matcher's sight:
//
//   - rg --pre CMD (a preprocessor run on each file searched) and
//     --hostname-bin CMD (ripgrep 14: run to get the host name for
//     hyperlinks); --pre-glob is a glob and -z/--search-zip runs
//     decompressors found on PATH (PATH and its directories are guarded
//     elsewhere), so neither is; a word that is not literal may be
//     either option;
//   - ugrep and ug --filter (commands per file), --pager and --view
//     (with a value), --config and ---FILE (options read from a file);
//   - ag and ack --pager, ack --ackrc (options from a file);
//   - fd/fdfind -x/--exec and -X/--exec-batch (a command per found
//     path, as find -exec; fd is not read as a wrapper);
//   - less with a +cmd or ++cmd other than +NUM, +G, +g or +F (its
//     commands run as if typed: +!cmd runs a shell, v an editor, |
//     a pipe), -k/--lesskey-file/--lesskey-src/--lesskey-content (key
//     bindings that may set LESSOPEN), or a log file (-o, -O,
//     --log-file, --LOG-FILE) that is guarded; LESS with a + or k, and
//     LESSKEY, LESSKEY_SRC, LESSKEYIN, LESSKEY_CONTENT and LESSEDIT in
//     the environment (commandenv.go);
//   - bat --pager; sdiff and diff3 --diff-program; pandoc -F/--filter
//     and -L/--lua-filter; fzf --preview, --bind (execute and become
//     actions), --with-shell and --listen (commands over HTTP);
//   - git grep -O CMD / --open-files-in-pager=CMD (gitSubcommandCode):
//     git runs CMD with the shell on the matching files; a bare -O
//     opens the default pager, which comes from settings the matcher
//     guards (core.pager, GIT_PAGER, PAGER).
//
// ag, ack, sdiff, diff3, pandoc and less take a unique prefix of a long
// option as the option (ag --pag=CMD, pandoc --filt F, less --log-f=F;
// review49b), so a prefix of one above is read as it; rg, ugrep, fd, bat
// and fzf take only whole names. ugrep+ and ug+ are ugrep.
//
// Each is opaque: deny and approve rules match it, an allow rule never
// allows it.

// searchToolCode says why the program name (a base name) with words runs
// a program named in an option; "" when it does not or is none of the
// tools above.
func searchToolCode(name string, words []cmdWord) string {
	var long []string
	short := ""
	abbrev := false // getopt_long, Getopt::Long, Haskell's GetOpt: a unique prefix is the option
	switch name {
	case "rg":
		long = []string{"--pre", "--hostname-bin"}
	case "ugrep", "ug", "ugrep+", "ug+", "ugrep-indexer":
		long = []string{"--filter", "--pager", "--view", "--config"}
	case "ag":
		long, abbrev = []string{"--pager"}, true
	case "ack", "ack-grep":
		long, abbrev = []string{"--pager", "--ackrc"}, true
	case "bat", "batcat":
		long = []string{"--pager"}
	case "sdiff", "diff3":
		long, abbrev = []string{"--diff-program"}, true
	case "pandoc":
		long, short, abbrev = []string{"--filter", "--lua-filter"}, "FL", true
	case "less":
		return lessCode(words)
	case "fd", "fdfind":
		// fd -x/--exec CMD and -X/--exec-batch CMD run CMD on each found
		// path, as find -exec does, but fd is no wrapper the matcher
		// reads: opaque (deny rules match it).
		long, short = []string{"--exec", "--exec-batch"}, "xX"
	case "fzf", "fzf-tmux":
		long = []string{"--preview", "--preview-window", "--bind", "--with-shell", "--listen", "--listen-unsafe"}
	default:
		return ""
	}
	for _, w := range words[1:] {
		if w.unknown {
			return notLiteral(name)
		}
		if w.lit == "--" {
			return ""
		}
		opt, _, _ := strings.Cut(w.lit, "=")
		switch {
		case strings.HasPrefix(opt, "---") && strings.HasPrefix(name, "ug"):
			return runsOption(name, "---FILE")
		case strings.HasPrefix(opt, "--") && (contains(long, opt) || abbrev && longOption(opt, long...)):
			if opt == "--preview-window" {
				continue // a layout, not a command (listed so --preview is matched whole)
			}
			return runsOption(name, opt)
		case short != "" && len(w.lit) > 1 && w.lit[0] == '-' && w.lit[1] != '-' && strings.IndexByte(short, w.lit[1]) >= 0:
			return runsOption(name, w.lit[:2])
		case (name == "fd" || name == "fdfind") && len(w.lit) > 1 && w.lit[0] == '-' && w.lit[1] != '-' && fdClusterRuns(w.lit):
			return runsOption(name, "-x") // in a cluster: -Hx
		}
	}
	return ""
}

// gitGrepCode says why git grep's args (after "grep") run a command:
// -O or --open-files-in-pager with a value (attached only: -OCMD,
// -O'rm x', -nOCMD, --open-files-in-pager=CMD; parse-options also takes
// an unambiguous prefix such as --open=CMD). A word after -e is a
// pattern.
func gitGrepCode(args []cmdWord) string {
	for k := 0; k < len(args); k++ {
		a := args[k].lit
		switch {
		case a == "--":
			return ""
		case a == "-e" || a == "-f":
			k++
		case strings.HasPrefix(a, "--"):
			if opt, _, hasVal := strings.Cut(a, "="); hasVal && len(opt) >= 4 && strings.HasPrefix("--open-files-in-pager", opt) {
				return runsOption("git grep", "--open-files-in-pager")
			}
		case strings.HasPrefix(a, "-"):
			if j := strings.IndexByte(a, 'O'); j > 0 && j < len(a)-1 && !strings.ContainsAny(a[1:j], "efABCm") {
				return runsOption("git grep", "-O")
			}
		}
	}
	return ""
}

// lessCode says why less's words run a command or write a guarded file:
// see searchToolCode.
func lessCode(words []cmdWord) string {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral("less")
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case w.lit == "--":
			return ""
		case strings.HasPrefix(w.lit, "+"):
			if c := strings.TrimLeft(w.lit, "+"); !isDigits(c) && !contains([]string{"G", "g", "F"}, c) {
				return runsOption("less", "+cmd")
			}
		case strings.HasPrefix(w.lit, "--"):
			if strings.HasPrefix(strings.ToLower(opt), "--lesskey") {
				return runsOption("less", opt)
			}
			if longOption(strings.ToLower(opt), "--log-file") { // less takes a unique prefix: --log-f
				if f := fileOf(valueWord(words, &i, val, hasVal)); codeFile(f) {
					return writesFile("less", f)
				}
			}
		case strings.HasPrefix(w.lit, "-") && len(w.lit) > 1:
			if strings.ContainsAny(w.lit, "k+") && w.lit[1] != '+' {
				return runsOption("less", "-k")
			}
			if k := strings.IndexAny(w.lit, "oO"); k > 0 {
				if f := fileOf(valueWord(words, &i, w.lit[k+1:], true)); codeFile(f) {
					return writesFile("less", f)
				}
			}
		}
	}
	return ""
}

// lessEnvSafe reports whether a LESS value holds no + command and no
// lesskey option (k, --lesskey-…), which would run commands (see
// searchToolCode).
func lessEnvSafe(val string) bool {
	return !strings.ContainsAny(val, "+k")
}

// fdClusterRuns reports whether fd's cluster of short options w (-Hx)
// holds -x or -X before a letter that takes the rest of w as its value
// (-tx is --type x, -ex --extension x; review49b).
func fdClusterRuns(w string) bool {
	for _, c := range w[1:] {
		switch {
		case c == 'x' || c == 'X':
			return true
		case strings.ContainsRune("tedEScjo", c):
			return false
		}
	}
	return false
}
