package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Programs that run a command line or code given in an option, or that
// read commands from their input, which the matcher reads here (branch
// policy45): tar --to-command, --checkpoint-action=exec=, -I,
// --use-compress-program, -F, --info-script, --new-volume-script,
// --rsh-command, --rmt-command; zip -TT and --unzip-command; make --eval
// (-E), a makefile read from input, and command-line variables that set
// SHELL, MAKEFLAGS and kin or hold a $ reference ($(shell …)); vi, vim,
// nvim, ex and kin (-c, +cmd, --cmd, and the keystrokes they read from
// their input); emacs --eval and -f; gdb -ex and lldb -o, and either
// without batch mode (it reads commands from its input); sqlite3 with a
// dot-command that may run one (.shell, .system, .once '|cmd', …), the SQL
// functions load_extension, edit and writefile, or no SQL (it reads its
// input); psql -c with a backslash command or COPY … PROGRAM, -o '|cmd', or
// without -c or -f; mysql -e with system or \!, or without -e; ed, ftp,
// lftp, ghci, dc, gnuplot and jshell reading commands from their input;
// at, batch and crontab (they install commands that run later); flock -c;
// strace -o '|cmd'; sudo -s or -i and doas -s without a command (a shell
// reading its input). Each of these is opaque: deny and approve rules
// match it, an allow rule never allows it.

// longOption reports whether opt (a word's text before '=') names one of
// names: exactly, or as an abbreviation getopt_long accepts ("--t" for
// "--to-command"). getopt_long takes any prefix that names one option of
// the program's table; the table is not read here, so any prefix of at
// least one letter after "--" counts, also one the program finds
// ambiguous (it then exits with an error and runs nothing). Where names
// run code, that fails closed; callers that make a word safe by it
// (--version, --help) read only what the program rejects or exits on.
func longOption(opt string, names ...string) bool {
	for _, n := range names {
		if opt == n || len(opt) >= 3 && strings.HasPrefix(n, opt) {
			return true
		}
	}
	return false
}

// longPrefix reports whether opt, a word's text without its dashes and
// before '=', is one of names or a non-empty prefix of one: an
// abbreviation a parser that takes unique prefixes (getopt_long_only,
// emacs's own, gawk's -W) may read as it, whatever else the program's
// table holds.
func longPrefix(opt string, names ...string) bool {
	for _, n := range names {
		if opt != "" && strings.HasPrefix(n, opt) {
			return true
		}
	}
	return false
}

// optionValue returns the value of the option words[*i] (its text after
// '=' or after skip bytes, else the next word, advancing *i), and false
// when that value is not literal.
func optionValue(words []cmdWord, i *int, attached string, hasAttached bool) (string, bool) {
	if hasAttached && attached != "" {
		return attached, true
	}
	if *i+1 >= len(words) {
		return "", true
	}
	*i++
	return words[*i].lit, !words[*i].unknown
}

func notLiteral(name string) string {
	return fmt.Sprintf("%q gets a word that is not literal, which may be an option that runs a command", name)
}

func runsOption(name, opt string) string {
	return fmt.Sprintf("%s %s runs a command the matcher cannot read", name, opt)
}

// tarCode says why tar's words run a command: an option that names a
// program or command line (tarRunners, -I, -F, also in the old-style
// first word: tar xIf prog a.tar), --checkpoint-action with exec, or a
// word that is not literal.
func tarCode(words []cmdWord) string {
	tarRunners := []string{"--to-command", "--use-compress-program", "--info-script", "--new-volume-script", "--rsh-command", "--rmt-command"}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral("tar")
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case w.lit == "--":
			return ""
		case strings.HasPrefix(w.lit, "--"):
			if longOption(opt, tarRunners...) {
				return runsOption("tar", opt)
			}
			if opt != "--checkpoint" && longOption(opt, "--checkpoint-action") {
				v, ok := optionValue(words, &i, val, hasVal)
				if !ok || strings.Contains(v, "exec") {
					return runsOption("tar", "--checkpoint-action=exec")
				}
			}
		case strings.HasPrefix(w.lit, "-"):
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				if c == 'I' || c == 'F' {
					return runsOption("tar", "-"+string(c))
				}
				if strings.IndexByte("bCfgHKLNTVX", c) >= 0 {
					if j == len(w.lit)-1 {
						i++
					}
					break
				}
			}
		case i == 1 && strings.ContainsAny(w.lit, "IF"):
			// The old style: tar xIf prog a.tar takes the letters'
			// arguments from the next words.
			return runsOption("tar", w.lit)
		}
	}
	return ""
}

// zipCode says why zip's words run a command: -TT or --unzip-command (the
// program -T tests the archive with), or a word that is not literal.
func zipCode(words []cmdWord) string {
	for _, w := range words[1:] {
		if w.unknown {
			return notLiteral("zip")
		}
		opt, _, _ := strings.Cut(w.lit, "=")
		if strings.HasPrefix(w.lit, "--") && longOption(opt, "--unzip-command") ||
			!strings.HasPrefix(w.lit, "--") && strings.HasPrefix(w.lit, "-") && strings.Contains(w.lit, "TT") {
			return runsOption("zip", "-TT")
		}
	}
	return ""
}

// makeCode says why make's words run code the matcher cannot read:
// --eval/-E, a makefile read from input (-f -, -f /dev/stdin) or, with
// -f/--file, from a file whose name the matcher does not guard as a
// makefile (codeFile: Makefile, makefile.*, *.mk; branch policy47: a
// file written as notes.txt runs as make -f notes.txt), a
// command-line variable that sets SHELL, .SHELLFLAGS, MAKEFLAGS, MFLAGS,
// GNUMAKEFLAGS or MAKEFILES, uses != (a shell assignment) or whose value
// holds a $ (make expands $(shell …) where the variable is used) or is
// not one plain word (make CC='rm x': a recipe runs it; branch
// policy48), or a
// word that is not literal. A makefile the matcher guards is not: like
// ./build.sh, the matcher cannot read a file, and a write to one is
// opaque (commandwrites.go).
func makeCode(words []cmdWord) string {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral("make")
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case w.lit == "--":
		case strings.HasPrefix(w.lit, "--"):
			if longOption(opt, "--eval") {
				return runsOption("make", "--eval")
			}
			if longOption(opt, "--file", "--makefile") {
				v, ok := optionValue(words, &i, val, hasVal)
				if why := makefileCode(v, ok); why != "" {
					return why
				}
			}
		case strings.HasPrefix(w.lit, "-"):
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				if c == 'E' {
					return runsOption("make", "-E")
				}
				if strings.IndexByte("fCIoW", c) < 0 {
					continue
				}
				v, ok := optionValue(words, &i, w.lit[j+1:], true)
				if c == 'f' {
					if why := makefileCode(v, ok); why != "" {
						return why
					}
				}
				break
			}
		case hasVal:
			name := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(opt), ":+?")) // make trims 'SHELL :='
			if strings.HasSuffix(opt, "!") || strings.Contains(val, "$") ||
				contains([]string{"SHELL", ".SHELLFLAGS", "MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKEFILES"}, name) {
				return fmt.Sprintf("make variable %s may run a command the matcher cannot read", name)
			}
			if !makeValuePlain(val) {
				// A command-line variable overrides the makefile's, and a
				// recipe that uses it runs its value as shell text: make
				// CC='rm x' runs "rm x -c a.c" for $(CC) -c a.c (branch
				// policy48).
				return fmt.Sprintf("make variable %s's value may be run as a recipe command the matcher cannot read", name)
			}
		}
	}
	return ""
}

// makeValuePlain reports whether v, a make command-line variable's
// value, is one plain word a recipe's shell reads as itself: letters,
// digits and _ - . / : , + = @ % ^ ~ only (no space, quote, glob, shell
// operator or backslash), so a recipe using it runs at most a program of
// that name, with the makefile's arguments.
func makeValuePlain(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_-./:,+=@%^~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// makefileCode says why make -f v (ok: v is literal) reads a makefile
// the matcher cannot read: from the input, or from a file whose writes it
// does not guard (codeFile).
func makefileCode(v string, ok bool) string {
	if why := scriptFile("make", cmdWord{lit: v, unknown: !ok}); why != "" {
		return why
	}
	if !codeFile(v) {
		return fmt.Sprintf("make -f %s reads a makefile the matcher does not guard as one (Makefile, makefile.*, *.mk)", v)
	}
	return ""
}

// isVim reports whether name (a base name) is vi, vim, neovim or one of
// their other names.
func isVim(name string) bool {
	switch name {
	case "vi", "vim", "nvim", "ex", "view", "gvim", "gview", "rvim", "rview", "vimdiff", "nvimdiff", "gvimdiff", "evim", "eview", "vimx", "nvi", "elvis", "vile":
		return true
	}
	return false
}

// vimCode: vim runs Ex commands from -c, +cmd, --cmd, -S and -s files, and
// reads keystrokes (":!rm x") or, in Ex mode, commands from its input
// when that is not a terminal, as it is not for a tool; so every vim is
// opaque but one that only prints its version or help.
func vimCode(name string, words []cmdWord) string {
	if len(words) == 2 && contains([]string{"--version", "--help", "-h"}, words[1].lit) {
		return ""
	}
	return fmt.Sprintf("%q runs editor commands (-c, +cmd, --cmd, or keystrokes from its input) the matcher cannot read", name)
}

// emacsCode says why emacs or emacsclient (name) runs Lisp given inline:
// --eval, --execute or -f/--funcall (each also with one dash; emacsclient's
// -e), or a Lisp file read from input (-l, --load, --script, -scriptload
// with - or /dev/stdin).
func emacsCode(name string, words []cmdWord) string {
	inline := []string{"eval", "execute", "f", "funcall"}
	if name == "emacsclient" {
		inline = append(inline, "e")
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral(name)
		}
		opt, val, hasVal := strings.Cut(strings.TrimLeft(w.lit, "-"), "=")
		if !strings.HasPrefix(w.lit, "-") {
			continue
		}
		// Both emacs (command-line-1 completes a "--" word against its
		// long options) and emacsclient (getopt_long) take a prefix of a
		// long option: --ev, --fun, --lo; emacsclient's short options
		// cluster (-ne) and -a/--alternate-editor names a program it runs
		// when no server answers.
		dashes := strings.HasPrefix(w.lit, "--")
		if contains(inline, opt) || dashes && longPrefix(opt, "eval", "execute", "funcall") {
			return runsOption(name, w.lit)
		}
		if name == "emacsclient" && (dashes && longPrefix(opt, "alternate-editor") || !dashes && emacsclientShort(w.lit)) {
			return runsOption(name, w.lit)
		}
		if contains([]string{"l", "load", "script", "scriptload", "x"}, opt) || dashes && longPrefix(opt, "load", "script") {
			v, ok := optionValue(words, &i, val, hasVal)
			if why := scriptFile(name, cmdWord{lit: v, unknown: !ok}); why != "" {
				return why
			}
		}
	}
	return ""
}

// emacsclientShort reports whether w, a cluster of emacsclient's short
// options, holds -e (--eval) or -a (--alternate-editor) before a letter
// that takes the rest as its value.
func emacsclientShort(w string) bool {
	for j := 1; j < len(w); j++ {
		switch c := w[j]; {
		case c == 'e' || c == 'a':
			return true
		case strings.IndexByte("sfdFTwPr", c) >= 0:
			return false
		}
	}
	return false
}

// sqliteSafeDot lists the sqlite3 dot-commands that run no program and
// write no file.
var sqliteSafeDot = []string{".tables", ".schema", ".indexes", ".indices", ".headers", ".header", ".mode", ".dump", ".help",
	".databases", ".show", ".width", ".timer", ".nullvalue", ".separator", ".print", ".fullschema", ".dbinfo", ".bail",
	".echo", ".changes", ".stats", ".eqp", ".explain", ".quit", ".exit", ".version", ".lint", ".expert", ".dbconfig"}

// sqliteRuns reports whether s, SQL or a dot-command given to sqlite3,
// may run a program or load code: a dot-command outside sqliteSafeDot
// (.shell, .system, .once '|cmd', .read '|cmd', .load, …) or one spanning
// lines, or the SQL functions load_extension, edit (which runs an editor
// named by its argument) and writefile (which may write ~/.bashrc).
func sqliteRuns(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n")
	if strings.HasPrefix(t, ".") {
		f := strings.Fields(t)
		return !contains(sqliteSafeDot, f[0]) || strings.ContainsAny(t, "\n|")
	}
	l := strings.ToLower(s)
	if strings.Contains(l, "load_extension") || strings.Contains(l, "writefile") {
		return true
	}
	ident := func(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for i := strings.Index(l, "edit"); i >= 0; {
		// edit as a word ("edit"(…), edit /**/ (…)) with a '(' after it.
		if (i == 0 || !ident(l[i-1])) && (i+4 == len(l) || !ident(l[i+4])) && strings.Contains(l[i:], "(") {
			return true
		}
		k := strings.Index(l[i+4:], "edit")
		if k < 0 {
			break
		}
		i += 4 + k
	}
	return false
}

// sqliteCode says why sqlite3's words run a command: SQL or a -cmd value
// that may (sqliteRuns), an -init file read from input, no SQL after the
// database (it reads SQL and dot-commands from its input), or a word that
// is not literal.
func sqliteCode(name string, words []cmdWord) string {
	var pos []string
	exits := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral(name)
		}
		if !strings.HasPrefix(w.lit, "-") || w.lit == "-" {
			pos = append(pos, w.lit)
			continue
		}
		switch opt := strings.TrimLeft(w.lit, "-"); opt {
		case "cmd":
			v, ok := optionValue(words, &i, "", false)
			if !ok || sqliteRuns(v) {
				return runsOption(name, "-cmd")
			}
		case "init":
			v, ok := optionValue(words, &i, "", false)
			if why := scriptFile(name, cmdWord{lit: v, unknown: !ok}); why != "" {
				return why
			}
		case "A", "archive":
			return "" // the archive mode's arguments are file names
		case "separator", "newline", "nullvalue", "vfs", "mmap", "pagecache", "lookaside", "heap", "maxsize", "escape", "limit":
			i++
		case "version", "help":
			exits = true
		}
	}
	if len(pos) <= 1 {
		if exits {
			return ""
		}
		return readsInput(name)
	}
	for _, s := range pos[1:] {
		if sqliteRuns(s) {
			return fmt.Sprintf("%s gets a dot-command or SQL function that may run a command", name)
		}
	}
	return ""
}

// psqlCode says why psql's words run a command: a -c value with a
// backslash command (\! runs a shell, \o |cmd and \g |cmd pipes, \copy …
// program) or PROGRAM (COPY … PROGRAM runs one on the server), -o '|cmd',
// a -v value with a backquote (a prompt may run it), a -f file read from
// input, neither -c nor -f (it reads commands from its input), or a word
// that is not literal.
func psqlCode(words []cmdWord) string {
	given := false
	check := func(c byte, v string, ok bool) string {
		switch {
		case !ok:
			return notLiteral("psql")
		case c == 'c':
			given = true
			if strings.Contains(v, `\`) || strings.Contains(strings.ToLower(v), "program") {
				return runsOption("psql", "-c")
			}
		case c == 'f':
			given = true
			return scriptFile("psql", cmdWord{lit: v})
		case c == 'o' && strings.HasPrefix(strings.TrimSpace(v), "|"):
			return runsOption("psql", "-o")
		case (c == 'o' || c == 'L') && codeFile(v):
			return writesFile("psql -"+string(c), v) // psql -At -c "select 'rm x'" -o ~/.bashrc
		case c == 'v' && strings.Contains(v, "`"):
			return runsOption("psql", "-v")
		}
		return ""
	}
	long := []struct {
		name string
		c    byte
	}{{"--command", 'c'}, {"--file", 'f'}, {"--output", 'o'}, {"--set", 'v'}, {"--variable", 'v'},
		{"--dbname", 'd'}, {"--host", 'h'}, {"--port", 'p'}, {"--username", 'U'}, {"--log-file", 'L'},
		{"--field-separator", 'F'}, {"--record-separator", 'R'}, {"--pset", 'P'}, {"--table-attr", 'T'}}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral("psql")
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case strings.HasPrefix(w.lit, "--"):
			if longOption(opt, "--list", "--version", "--help") {
				given = true
			}
			for _, l := range long {
				if longOption(opt, l.name) {
					v, ok := optionValue(words, &i, val, hasVal)
					if why := check(l.c, v, ok); why != "" {
						return why
					}
					break
				}
			}
		case strings.HasPrefix(w.lit, "-") && w.lit != "-":
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				if strings.IndexByte("lV?", c) >= 0 {
					given = true
				}
				if strings.IndexByte("cfovdhpUFRLPT", c) < 0 {
					continue
				}
				v, ok := optionValue(words, &i, w.lit[j+1:], true)
				if why := check(c, v, ok); why != "" {
					return why
				}
				break
			}
		}
	}
	if !given {
		return readsInput("psql")
	}
	return ""
}

// mysqlCode says why mysql or mariadb (name) runs a command: an -e value
// with system or \! (a client command that runs a shell) or \. (source),
// no -e (it reads commands from its input, also from a dump: mysql db <
// dump.sql), or a word that is not literal.
func mysqlCode(name string, words []cmdWord) string {
	given := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral(name)
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		v, ok, isExec := "", true, false
		switch {
		case strings.HasPrefix(w.lit, "--"):
			// my_getopt takes '_' for '-', a "loose-" prefix and an
			// unambiguous prefix: --loose-pager, --plugin_dir, --ex.
			opt = "--" + strings.TrimPrefix(strings.ReplaceAll(opt[2:], "_", "-"), "loose-")
			if longOption(opt, "--version", "--help") {
				given = true
			}
			if longOption(opt, "--pager", "--plugin-dir", "--default-auth") {
				return runsOption(name, opt) // a pager command, or a plugin it loads
			}
			if longOption(opt, "--tee") {
				if v, ok := optionValue(words, &i, val, hasVal); !ok || codeFile(v) {
					return writesFile(name+" --tee", v)
				}
			}
			if longOption(opt, "--execute") {
				isExec = true
				v, ok = optionValue(words, &i, val, hasVal)
			}
		case strings.HasPrefix(w.lit, "-"):
			if w.lit == "-V" || w.lit == "-?" {
				given = true
			}
			if k := strings.IndexByte(w.lit, 'e'); k > 0 && strings.Trim(w.lit[1:k], "BNsrtvnq") == "" {
				isExec = true
				v, ok = optionValue(words, &i, w.lit[k+1:], true)
			}
		}
		if !isExec {
			continue
		}
		given = true
		l := strings.ToLower(v)
		if !ok || strings.Contains(l, "system") || strings.Contains(l, `\!`) || strings.Contains(l, `\.`) ||
			strings.Contains(l, "pager") || strings.Contains(l, "tee") || strings.Contains(v, `\P`) || strings.Contains(v, `\T`) {
			return runsOption(name, "-e")
		}
	}
	if !given {
		return readsInput(name)
	}
	return ""
}

// replCode says why a program that reads commands from its input, where
// one runs a shell or code, does so here: ed, ftp and lftp (!cmd), ghci
// (after loading a module, too), at and batch (they queue their input as
// a job; not with -f file, -l, -r, -d, -c), crontab (installs its input or
// a file; not with -l or -r), dc (!cmd; -e inline, or no file), gnuplot
// (system(), !cmd; -e inline, or no file) and jshell (no file).
func replCode(name string, words []cmdWord) string {
	var pos []string
	var opts []string
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral(name)
		}
		o, _, hasVal := strings.Cut(w.lit, "=")
		switch {
		case !strings.HasPrefix(w.lit, "-") || w.lit == "-":
			pos = append(pos, w.lit)
		case name == "jshell" && !hasVal && contains([]string{"--class-path", "--module-path", "--add-modules", "--add-exports",
			"--startup", "--feedback", "--execution", "-R", "-J", "-C"}, o):
			i++ // the option's value
		default:
			opts = append(opts, o)
		}
	}
	has := func(list ...string) bool {
		for _, o := range opts {
			if contains(list, o) {
				return true
			}
		}
		return false
	}
	if has("--version", "--help", "-V", "-h") {
		return ""
	}
	switch name {
	case "at", "batch":
		if has("-f", "-l", "-r", "-d", "-c") {
			return ""
		}
	case "crontab":
		if has("-l", "-r") {
			return ""
		}
		return "crontab installs commands that run later, which the matcher cannot read"
	case "dc", "gnuplot":
		// dc (getopt_long) takes -e with its value attached (-e'!rm x')
		// and --expression abbreviated (--e).
		if has("-e", "--expression") || slices.ContainsFunc(opts, func(o string) bool {
			return !strings.HasPrefix(o, "--") && strings.HasPrefix(o, "-e") || strings.HasPrefix(o, "--") && longOption(o, "--expression")
		}) {
			return runsOption(name, "-e")
		}
		if name == "dc" && has("-f", "--file") || len(pos) > 0 && !contains(pos, "-") {
			return ""
		}
	case "jshell", "lftp":
		// lftp (getopt) clusters its short options: -dc 'cmd'.
		if has("-c", "-e") || name == "lftp" && slices.ContainsFunc(opts, func(o string) bool {
			return !strings.HasPrefix(o, "--") && strings.ContainsAny(o, "ce")
		}) {
			return runsOption(name, "-c")
		}
		if has("-f") || len(pos) > 0 && name == "jshell" && !contains(pos, "-") {
			return ""
		}
	}
	return fmt.Sprintf("%q reads commands from its input, where one may run a shell, and the matcher cannot read them", name)
}

// wrapperShellCode says why a wrapper runs a shell command line or a
// shell reading its input: flock -c/--command (after the lock file),
// strace -o '|cmd' or '!cmd', sudo -s or -i and doas -s without a
// command. The wrapper's options end at the command it runs (flock: at
// the word after the lock file).
func wrapperShellCode(name string, words []cmdWord) string {
	argOptions := map[string]string{"flock": "wE", "strace": "abeEIoOpPsSuUX", "sudo": "ugpCDrtTUR", "doas": "uCa"}[name]
	operands := 0
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return "" // checkRunner makes a wrapper with such a word opaque
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		if !strings.HasPrefix(w.lit, "-") || w.lit == "-" {
			operands++
			switch {
			case name == "sudo" && strings.Contains(w.lit, "="):
				continue // VAR=value
			case name == "flock" && operands == 1:
				continue // the lock file
			}
			return "" // the command
		}
		switch name {
		case "flock":
			if strings.HasPrefix(w.lit, "--") && longOption(opt, "--command") || !strings.HasPrefix(w.lit, "--") && flockShortC(w.lit) {
				return runsOption(name, "-c")
			}
			if !hasVal && longOption(opt, "--timeout", "--wait", "--conflict-exit-code") {
				i++ // the option's value
			}
		case "strace":
			v, output := "", false
			if strings.HasPrefix(w.lit, "--") {
				if longOption(opt, "--output") {
					v, _ = optionValue(words, &i, val, hasVal)
					output = true
				}
			} else if k := strings.IndexAny(w.lit[1:], "o"+argOptions) + 1; k > 0 && w.lit[k] == 'o' {
				v, _ = optionValue(words, &i, w.lit[k+1:], true) // -o FILE, -fo FILE, -o|cmd
				output = true
			}
			if strings.HasPrefix(v, "|") || strings.HasPrefix(v, "!") {
				return runsOption(name, "-o")
			}
			if output {
				continue
			}
		case "doas":
			if strings.Contains(w.lit, "s") && !strings.HasPrefix(w.lit, "--") {
				return "doas -s runs a shell reading its input"
			}
		case "sudo":
			if longOption(opt, "--shell", "--login") || !strings.HasPrefix(w.lit, "--") && strings.ContainsAny(w.lit[1:], "si") {
				rest := words[i+1:]
				if !strings.HasPrefix(w.lit, "--") && strings.ContainsAny(w.lit[len(w.lit)-1:], argOptions) && len(rest) > 0 {
					rest = rest[1:] // sudo -su root
				}
				if !hasCommandAfter(rest) {
					return "sudo -s or -i without a command runs a shell reading its input"
				}
				return ""
			}
		}
		if !strings.HasPrefix(w.lit, "--") && strings.ContainsAny(w.lit[len(w.lit)-1:], argOptions) {
			i++ // the option's value
		}
	}
	return ""
}

// hasCommandAfter reports whether words (after sudo -s) hold a command:
// a word that is no option and no VAR=value.
func hasCommandAfter(words []cmdWord) bool {
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return true
		}
		switch {
		case w.lit == "--":
			return i+1 < len(words)
		case strings.HasPrefix(w.lit, "-"):
			if !strings.HasPrefix(w.lit, "--") && strings.ContainsAny(w.lit[len(w.lit)-1:], "ugpCDrtTUR") {
				i++
			}
		case strings.Contains(w.lit, "="):
		default:
			return true
		}
	}
	return false
}

// programCode says why the program name (a base name) with words runs a
// command or code the matcher cannot read, for the programs of this file
// and the writers of commandwrites.go; "" for any other program.
func programCode(name string, words []cmdWord) string {
	switch name {
	case "tar", "gtar", "bsdtar":
		if why := tarCode(words); why != "" {
			return why
		}
		return writesCode(name, words) // tar -x -C ~ (branch policy48)
	case "zip":
		if why := zipCode(words); why != "" {
			return why
		}
		return writesCode(name, words) // zip ~/.bashrc x (branch policy49)
	case "split":
		if why := splitCode(words); why != "" {
			return why
		}
	case "make", "gmake":
		return makeCode(words)
	case "emacs", "emacsclient":
		return emacsCode(name, words)
	case "gdb", "lldb":
		return debuggerCode(name, words)
	case "sqlite3", "sqlite":
		return sqliteCode(name, words)
	case "psql":
		return psqlCode(words)
	case "mysql", "mariadb":
		return mysqlCode(name, words)
	case "ed", "ftp", "lftp", "ghci", "at", "batch", "crontab", "dc", "gnuplot", "jshell":
		return replCode(name, words)
	case "ghc":
		if slices.ContainsFunc(words[1:], func(w cmdWord) bool { return w.unknown || w.lit == "-e" }) {
			return runsOption(name, "-e")
		}
	case "flock", "strace", "sudo", "doas":
		return wrapperShellCode(name, words)
	}
	if isVim(name) {
		return vimCode(name, words)
	}
	if gccFamily(name) {
		if why := gccCode(name, words); why != "" {
			return why
		}
	}
	if why := miscCode(name, words); why != "" {
		return why
	}
	return writesCode(name, words)
}

// flockShortC reports whether opt, a cluster of flock's short options,
// holds -c (-c, -xc, -nc): before -w or -E, which take the rest as their
// value.
func flockShortC(opt string) bool {
	for j := 1; j < len(opt); j++ {
		switch opt[j] {
		case 'c':
			return true
		case 'w', 'E':
			return false
		}
	}
	return false
}
