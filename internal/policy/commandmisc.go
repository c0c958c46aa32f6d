package policy

import (
	"fmt"
	"path"
	"strings"
)

// Programs that run a command line or program named in an option, and
// writers whose destination the matcher read nowhere else (branch
// attack48):
//
//   - split --filter=CMD (a shell command line per chunk), sort
//     --compress-program=PROG, man -P/--pager/-H/--html (a pager or
//     browser command line), socat with an EXEC: or SYSTEM: address,
//     nc/ncat/netcat -e/-c/--exec/--sh-exec/--lua-exec, tmux (its
//     commands take shell command lines: new-session, split-window,
//     run-shell, if-shell, send-keys; but listing ones), screen (it runs
//     its operands as a command), rename/prename/file-rename/perl-rename
//     (a Perl expression chooses the new names and may run code),
//     rustup toolchain link and rustup default/override set naming a
//     path, poetry env use with a path (a Python the environment runs),
//     bundle plugin install (a plugin every bundle command loads),
//     bundle binstubs --shebang or --path and bundle install
//     --binstubs into a guarded directory; each is opaque;
//   - the files cpio -p DEST and -D DIR, pax -r -w … DEST, patch's
//     ORIGFILE operand and -d DIR (miscWrites), gcc's -aux-info FILE
//     (gccDepFiles) and git mv's destination write, read as writes
//     (writesCode);
//   - an awk program whose print or printf redirects (print > "f"): the
//     file name is an awk expression the matcher does not evaluate
//     (awkCode).

// miscCode says why the program name (a base name) with words runs a
// command or writes a guarded file the matcher cannot read; "" for any
// other program.
func miscCode(name string, words []cmdWord) string {
	has := func(short string, long ...string) bool {
		for _, w := range words[1:] {
			if w.lit == "--" {
				return false
			}
			opt, _, _ := strings.Cut(w.lit, "=")
			if strings.HasPrefix(w.lit, "--") && len(long) > 0 && longOption(opt, long...) ||
				short != "" && !strings.HasPrefix(w.lit, "--") && strings.HasPrefix(w.lit, "-") && strings.ContainsAny(w.lit[1:], short) {
				return true
			}
		}
		return false
	}
	pos := func() []string {
		var out []string
		for _, w := range words[1:] {
			if !strings.HasPrefix(w.lit, "-") {
				out = append(out, w.lit)
			}
		}
		return out
	}
	if why := searchToolCode(name, words); why != "" {
		return why // rg --pre, ugrep --filter, … (branch policy49)
	}
	switch name {
	case "split":
		if has("", "--filter") {
			return runsOption(name, "--filter")
		}
	case "sort":
		if has("", "--compress-program") {
			return runsOption(name, "--compress-program")
		}
	case "man":
		if has("PH", "--pager", "--html") {
			return runsOption(name, "-P")
		}
	case "socat":
		return socatCode(words)
	case "nc", "ncat", "netcat", "nc.openbsd", "nc.traditional":
		if has("ec", "--exec", "--sh-exec", "--lua-exec") {
			return runsOption(name, "-e")
		}
	case "tmux":
		return tmuxCode(words)
	case "screen":
		// Only these leave screen without running a command: -l alone
		// (login mode) runs one, as -L, -d -m, -S and the rest do
		// (review48b: screen -l rm x).
		if len(words) < 2 || len(words) > 3 || !contains([]string{"-ls", "-list", "-v", "--version", "-wipe"}, words[1].lit) {
			return "screen runs a command or a shell reading its input"
		}
	case "entr":
		// entr -s runs its first argument with $SHELL (review48b).
		for _, w := range words[1:] {
			if !strings.HasPrefix(w.lit, "-") || w.lit == "--" {
				break
			}
			if !strings.HasPrefix(w.lit, "--") && strings.Contains(w.lit, "s") {
				return runsOption(name, "-s")
			}
		}
	case "env-cmd", "dotenv":
		// env-cmd --use-shell runs its command with a shell; env-cmd
		// -f/-r and dotenv -e set the environment from a file the
		// matcher does not read (PATH, NODE_OPTIONS; review48b).
		if name == "env-cmd" && has("fr", "--use-shell", "--file", "--rc-file") || name == "dotenv" && has("e") {
			return fmt.Sprintf("%s runs its command with a shell or an environment from a file the matcher cannot read", name)
		}
	case "nodemon":
		if has("x", "--exec") {
			return runsOption(name, "--exec")
		}
	case "uv", "pdm", "rye", "pipenv", "pyenv", "asdf", "mise", "rtx", "corepack":
		// An interpreter or tool chosen by path (uv python pin
		// /tmp/x/python writes it to .python-version; asdf's and mise's
		// path: and ref: versions), mise set PATH=…, corepack's shims
		// placed in a directory (branch attack48).
		p := pos()
		for _, w := range words[1:] {
			v := w.lit
			if _, after, ok := strings.Cut(v, "="); ok && strings.HasPrefix(v, "--") {
				v = after
			}
			if strings.Contains(v, "path:") || strings.Contains(v, "ref:") || len(p) > 0 && w.lit == p[0] {
				if strings.Contains(v, "path:") || strings.Contains(v, "ref:") {
					return fmt.Sprintf("%s chooses a tool by %q, a program the matcher cannot read", name, v)
				}
				continue
			}
			if strings.ContainsAny(v, `/\`) && !strings.HasPrefix(w.lit, "-") && pinsInterpreter(name, p) {
				return fmt.Sprintf("%s chooses the interpreter %q, a program the matcher cannot read", name, v)
			}
		}
		if name == "pipenv" && has("", "--python") {
			return "pipenv --python chooses the interpreter the environment runs"
		}
		if (name == "mise" || name == "rtx") && len(p) > 0 && p[0] == "set" || name == "corepack" && has("", "--install-directory") {
			return fmt.Sprintf("%s sets the environment or directory later calls find their programs by", name)
		}
	case "rename", "prename", "file-rename", "perl-rename":
		return "rename chooses its files' new names by an expression (Perl code for prename) the matcher cannot read"
	case "rustup":
		p := pos()
		if len(p) >= 2 && p[0] == "toolchain" && p[1] == "link" || len(p) >= 1 && p[0] == "default" && len(p) >= 2 && strings.Contains(p[1], "/") ||
			len(p) >= 3 && p[0] == "override" && p[1] == "set" && strings.Contains(p[2], "/") {
			return "rustup links or chooses a toolchain from a directory whose programs the matcher cannot read"
		}
	case "poetry":
		p := pos()
		if len(p) >= 3 && p[0] == "env" && p[1] == "use" && strings.ContainsAny(p[2], `/\`) {
			return "poetry env use PATH makes the environment run a Python the matcher cannot read"
		}
	case "bundle", "bundler":
		p := pos()
		if len(p) >= 2 && p[0] == "plugin" && p[1] == "install" {
			return "bundle plugin install installs a plugin every later bundle command loads"
		}
		if len(p) >= 1 && p[0] == "binstubs" && has("", "--shebang", "--path") {
			return "bundle binstubs --shebang or --path chooses the program or place of its stubs"
		}
		if has("", "--binstubs") {
			return "bundle install --binstubs writes stubs into a directory the matcher does not read"
		}
	}
	return ""
}

// awkPrintRedirect reports whether prog, awk program text, holds a print
// or printf statement with a > (or >>) outside parentheses and strings:
// print $1 > "f" writes f. A > before print ($1 > 5 {print}) or inside
// parentheses (print ($1 > 5)) is a comparison.
func awkPrintRedirect(prog string) bool {
	for i := strings.Index(prog, "print"); i >= 0; {
		depth, quoted := 0, false
	scan:
		for j := i + len("print"); j < len(prog); j++ {
			c := prog[j]
			switch {
			case quoted && c == '\\':
				j++
			case c == '"':
				quoted = !quoted
			case quoted:
			case c == '(':
				depth++
			case c == ')':
				depth--
			case c == ';' || c == '}' || c == '\n':
				break scan
			case c == '>' && depth <= 0:
				if !awkStdTarget(prog[j+1:]) {
					return true
				}
			}
		}
		k := strings.Index(prog[i+1:], "print")
		if k < 0 {
			break
		}
		i += 1 + k
	}
	return false
}

// miscWrites returns the files cpio, pax and patch (name, words) write:
// anywhere ("//*") for cpio -i without --no-absolute-filenames, pax -r
// without -w and pax -s; cpio -p DEST and -D DIR as DIR/*, pax -r -w's last operand as DIR/*, patch's
// first operand (ORIGFILE), -d DIR as DIR/*, and the directory its
// backup prefix -B/--prefix or -Y/--basename-prefix puts backups in.
func miscWrites(name string, words []cmdWord) []string {
	var out, pos []string
	pass, read, write := false, false, false
	copyIn, relative, rename := false, false, false // cpio -i, --no-absolute-filenames; pax -s
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		opt, val, hasVal := strings.Cut(w, "=")
		switch {
		case strings.HasPrefix(w, "--"):
			if name == "cpio" && longOption(opt, "--directory") || name == "patch" && longOption(opt, "--directory") {
				out = append(out, fileOf(valueWord(words, &i, val, hasVal))+"/*")
			}
			if name == "cpio" && longOption(opt, "--pass-through") {
				pass = true
			}
			copyIn = copyIn || name == "cpio" && longOption(opt, "--extract")
			relative = relative || name == "cpio" && longOption(opt, "--no-absolute-filenames")
			if name == "patch" && longOption(opt, "--prefix", "--basename-prefix") {
				out = append(out, backupPrefixDir(fileOf(valueWord(words, &i, val, hasVal))))
				continue
			}
			if name == "patch" && !hasVal && longOption(opt, "--input", "--strip", "--reject-file", "--output", "--suffix",
				"--prefix", "--basename-prefix", "--fuzz", "--backup-if-mismatch", "--quoting-style", "--read-only", "--get") {
				i++
			}
		case strings.HasPrefix(w, "-") && len(w) > 1:
			for j := 1; j < len(w); j++ {
				c := w[j]
				copyIn = copyIn || name == "cpio" && c == 'i'
				rename = rename || name == "pax" && c == 's'
				switch {
				case name == "cpio" && c == 'p', name == "pax" && c == 'r' && !write:
					pass, read = pass || name == "cpio", true
				case name == "pax" && c == 'w':
					write = true
				case (name == "cpio" || name == "patch") && c == 'D' || name == "patch" && c == 'd':
					out = append(out, fileOf(valueWord(words, &i, w[j+1:], true))+"/*")
					j = len(w)
				case name == "patch" && (c == 'B' || c == 'Y'):
					// -B/-Y PREFIX: backups go to PREFIX+name (review48b).
					out = append(out, backupPrefixDir(fileOf(valueWord(words, &i, w[j+1:], true))))
					j = len(w)
				case name == "patch" && strings.IndexByte("iopBrVYzFgD", c) >= 0,
					name == "cpio" && strings.IndexByte("EFHIMORs", c) >= 0,
					name == "pax" && strings.IndexByte("bfopsSTxU", c) >= 0:
					if j+1 == len(w) {
						i++
					}
					j = len(w)
				}
				if name == "pax" && c == 'r' {
					read = true
				}
			}
		default:
			pos = append(pos, fileOf(words[i]))
		}
	}
	// GNU cpio -i keeps an entry's absolute name (/home/u/.bashrc) unless
	// --no-absolute-filenames; pax -r keeps it too, and pax -s renames
	// entries: written anywhere, read as / (review48b).
	if copyIn && !pass && !relative || name == "pax" && (read && !write || rename) {
		return []string{"//*"}
	}
	switch {
	case name == "patch" && len(pos) > 0:
		out = append(out, pos[0])
	case name == "cpio" && pass && len(pos) > 0, name == "pax" && read && write && len(pos) > 0:
		out = append(out, pos[len(pos)-1]+"/*")
	}
	return out
}

// pinsInterpreter reports whether name's positional words p (its
// subcommand first) choose an interpreter or tool: uv python pin, pdm
// use, rye pin, pyenv local/global/shell, asdf local/global/set/shell,
// mise and rtx use, pipenv --python (read by the caller).
func pinsInterpreter(name string, p []string) bool {
	first := ""
	if len(p) > 0 {
		first = p[0]
	}
	switch name {
	case "uv":
		return first == "python" && len(p) > 1 && p[1] == "pin" || first == "venv"
	case "pdm":
		return first == "use"
	case "rye":
		return first == "pin"
	case "pyenv", "asdf":
		return contains([]string{"local", "global", "shell", "set"}, first)
	case "mise", "rtx":
		return contains([]string{"use", "u", "local", "global", "shell"}, first)
	}
	return false
}

// awkStdTarget reports whether rest, awk text after a print's >, names
// standard output, standard error or /dev/null as a string literal
// (print > "/dev/stderr").
func awkStdTarget(rest string) bool {
	rest = strings.TrimLeft(strings.TrimPrefix(rest, ">"), " \t")
	for _, t := range []string{`"/dev/stderr"`, `"/dev/stdout"`, `"/dev/null"`, `"/dev/fd/1"`, `"/dev/fd/2"`} {
		if strings.HasPrefix(rest, t) {
			return true
		}
	}
	return false
}

// tmuxCommands are tmux's commands that neither run a shell command line
// nor start a shell: listing, showing and killing.
var tmuxCommands = []string{"ls", "list-sessions", "list-windows", "lsw", "list-panes", "lsp", "has-session", "has",
	"kill-session", "kill-server", "kill-window", "kill-pane", "capture-pane", "capturep", "list-clients", "lsc",
	"list-buffers", "lsb", "show-buffer", "showb"}

// tmuxCode says why tmux's words run a shell command line, or "": any
// command but tmuxCommands (new-session, send-keys, run-shell), -c (a
// shell command) and -f (a configuration file of commands) before it, a
// second command after a ";" (also an argument ending in one), and a
// format's #(…), which runs a command. -L, -S and -T take a value
// (tmux -L ls new 'rm x' runs rm; review48b).
func tmuxCode(words []cmdWord) string {
	const why = "tmux runs shell command lines (new-session, send-keys, run-shell) the matcher cannot read"
	cmd := ""
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		if strings.HasSuffix(w, ";") || strings.Contains(w, "#(") {
			return why
		}
		switch {
		case cmd != "":
		case strings.HasPrefix(w, "-") && strings.ContainsAny(w[1:], "cf"):
			return why
		case strings.HasPrefix(w, "-") && strings.ContainsAny(w[len(w)-1:], "LST"):
			i++ // the option's value
		case strings.HasPrefix(w, "-"):
		default:
			cmd = w
		}
	}
	if !contains(tmuxCommands, cmd) {
		return why
	}
	return ""
}

// socatCode says why socat's words (addresses, joined by !! for two
// ways) run a command or write a guarded file, or "": an EXEC, SYSTEM or
// SHELL address (socat 1.8's SHELL: review48b), or a file address (OPEN,
// CREATE, GOPEN, a bare path with a /) naming a guarded file.
func socatCode(words []cmdWord) string {
	for _, w := range words[1:] {
		if w.unknown {
			return notLiteral("socat")
		}
		up := strings.ToUpper(w.lit)
		for _, k := range []string{"EXEC:", "SYSTEM:", "SHELL:", "EXEC,", "SYSTEM,", "SHELL,"} {
			if strings.Contains(up, k) {
				return "socat with an EXEC:, SYSTEM: or SHELL: address runs a command the matcher cannot read"
			}
		}
		for _, a := range strings.Split(w.lit, "!!") {
			first, _, _ := strings.Cut(a, ",")
			kind, rest, typed := strings.Cut(first, ":")
			switch up := strings.ToUpper(kind); {
			case up == "EXEC" || up == "SYSTEM" || up == "SHELL":
				return "socat with an EXEC:, SYSTEM: or SHELL: address runs a command the matcher cannot read"
			case typed && (up == "OPEN" || up == "CREATE" || up == "CREAT" || up == "GOPEN"):
				first = rest
			case typed || !strings.Contains(first, "/"):
				continue
			}
			if codeFile(first) {
				return writesFile("socat", first)
			}
		}
	}
	return ""
}

// backupPrefixDir returns the files a backup prefix p writes (patch -B
// .git/hooks/ keeps pre-commit's old text as .git/hooks/pre-commit; -B
// ~/.bash keeps rc as ~/.bashrc): every file of p's directory, DIR/*.
func backupPrefixDir(p string) string {
	return path.Dir(p+"x") + "/*"
}
