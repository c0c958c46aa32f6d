package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Programs that run a command line or code given in an option, which the
// matcher reads here: rsync's -e (parsed as a command, addRsync) and
// --rsync-path or -M (opaque); git's -c and --config-env for a key that
// may run a command (core.pager, core.sshCommand, alias.x='!sh', …: every
// key outside gitKeySafe), and its subcommands that run a command given as
// an argument (rebase --exec, submodule foreach, bisect run, difftool
// --extcmd, filter-branch, --upload-pack, --receive-pack, clone -u,
// archive --exec); scp and sftp with an ssh option that runs a command
// (-o ProxyCommand=…, -F) or a program given as an option (-S, -D, sftp
// -s), and sftp reading its commands (whose ! runs a shell) from its
// input; deno eval, deno repl, deno with no subcommand and bun -e, bun -p,
// bun exec. Each of these is opaque: deny and approve rules match it, an
// allow rule never allows it.

// addRsync reads rsync's words (words[0] is rsync): the -e/--rsh value is
// a command line (addEmbedded); --rsync-path and -M/--remote-option make
// the remote shell run what they say; a word that is not literal may be
// any of these.
func (pc *parsedCommand) addRsync(words []cmdWord, depth int, unsafe, opaque func(string)) {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			opaque("rsync gets a word that is not literal, which may be an option that runs a command")
			return
		}
		if w.lit == "--" {
			return
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case longOption(opt, "--rsync-path", "--remote-option"):
			// An abbreviation, too (--rsync-p): popt's table is not read
			// here, and one that may name either runs a command.
			opaque(fmt.Sprintf("rsync %s runs a command line on the remote host the matcher does not read", opt))
			return
		case longOption(opt, "--rsh"):
			if !hasVal && i+1 < len(words) {
				i++
				val = words[i].lit
				if words[i].unknown {
					opaque("rsync -e gets a command that is not literal")
					return
				}
			}
			pc.addEmbedded(val, depth, "rsync's -e command", unsafe, opaque)
		case strings.HasPrefix(w.lit, "--") || !strings.HasPrefix(w.lit, "-"):
		default:
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				if c == 'M' {
					opaque("rsync -M runs a command line on the remote host the matcher does not read")
					return
				}
				if strings.IndexByte("eBfT@", c) < 0 {
					continue
				}
				v := w.lit[j+1:]
				if v == "" && i+1 < len(words) {
					i++
					if words[i].unknown {
						opaque("rsync gets an option value that is not literal")
						return
					}
					v = words[i].lit
				}
				if c == 'e' {
					pc.addEmbedded(v, depth, "rsync's -e command", unsafe, opaque)
				}
				break
			}
		}
	}
}

// gitKeySafe reports whether git configuration key (lower case) runs no
// command: keys of the sections below, and some core keys. Every other key
// may (core.pager, core.sshCommand, core.fsmonitor, alias.*,
// diff.*.textconv, filter.*.smudge, credential.helper, …), and the list
// fails closed.
func gitKeySafe(key string) bool {
	section, _, _ := strings.Cut(key, ".")
	switch key {
	case "init.templatedir", "help.autocorrect":
		// init.templateDir installs that directory's hooks (clone runs
		// post-checkout); help.autocorrect=immediate runs the subcommand
		// a misspelled one is taken for (git rebse -x 'rm y' runs rebase -x).
		return false
	}
	switch section {
	case "user", "color", "advice", "init", "i18n", "column", "log", "status", "help", "pull", "push", "fetch", "safe", "commit", "tag", "gc":
		return true
	}
	return contains([]string{"core.quotepath", "core.autocrlf", "core.safecrlf", "core.abbrev", "core.filemode", "core.ignorecase",
		"core.longpaths", "core.symlinks", "core.eol", "core.whitespace", "core.precomposeunicode"}, key)
}

// gitCode says why git's words run a command the matcher cannot read.
// git's top-level options (git.c's handle_options) are exact names, no
// abbreviation; those listed below take the next word as their value.
func gitCode(words []cmdWord) string {
	for _, w := range words[1:] {
		if strings.Contains(w.lit, "ext::") {
			// git's ext:: transport runs the rest as a command line where
			// protocol.ext.allow or GIT_ALLOW_PROTOCOL admits it (git ls-remote
			// 'ext::sh -c touch% F' ran touch; branch attack47).
			return "git's ext:: transport runs a command the matcher cannot read"
		}
	}
	// bareDir: a -C directory that is neither the working directory nor a
	// .git directory; bareOff: the last setting of safe.bareRepository
	// git reads is -c safe.bareRepository=explicit; gitDir: --git-dir
	// names the git directory (branch policy48; review48: only options git
	// reads count, not a word another option takes as its value).
	i, bareDir, bareOff, gitDir := 1, false, false, false
	key := func(kv string) string {
		k, _, _ := strings.Cut(kv, "=")
		if !gitKeySafe(strings.ToLower(k)) {
			return fmt.Sprintf("git configuration %q may run a command the matcher cannot read", k)
		}
		return ""
	}
	next := func() (string, bool) {
		if i+1 >= len(words) {
			return "", true
		}
		i++
		return words[i].lit, !words[i].unknown
	}
	for ; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return "git gets a word that is not literal"
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case w.lit == "-c" || opt == "--config-env" && !hasVal:
			v, ok := next()
			if !ok {
				return "git gets a configuration that is not literal"
			}
			if why := key(v); why != "" {
				return why
			}
			bareOff = gitBareOff(v, w.lit == "-c", bareOff)
		case strings.HasPrefix(w.lit, "-c"):
			if why := key(w.lit[2:]); why != "" {
				return why
			}
			bareOff = gitBareOff(w.lit[2:], true, bareOff)
		case opt == "--config-env":
			if why := key(val); why != "" {
				return why
			}
			bareOff = gitBareOff(val, false, bareOff)
		case strings.HasPrefix(w.lit, "--exec-path="):
			// git runs its programs from there, and puts it first in the
			// PATH of every program it starts (ssh, remote helpers, hooks'
			// commands): "git --exec-path=. push" runs ./ssh.
			return "git --exec-path= runs programs from a directory the matcher cannot read"
		case w.lit == "--git-dir" || opt == "--git-dir" && hasVal:
			// A repository's config (core.pager, alias.*, hooks) is read
			// from that directory; the matcher guards writes to .git/config
			// only, so any other directory (a bare repository x/config
			// planted earlier) is read as code (branch policy47).
			dir, ok := val, true
			if !hasVal {
				dir, ok = next()
			}
			if !ok || !dotGitDir(dir) {
				return "git --git-dir reads a repository's configuration (core.pager, aliases, hooks) from a directory the matcher does not guard"
			}
			gitDir = true
		case w.lit == "--bare":
			// git --bare takes the working directory as the git directory
			// and reads its config (aliases, core.pager) from ./config, a
			// name the matcher does not guard: opaque as --git-dir=. is
			// (checked with git 2.39: an alias in ./config ran).
			return "git --bare reads a repository's configuration (core.pager, aliases, hooks) from the working directory, which the matcher does not guard"
		case w.lit == "-C":
			// git -C DIR finds its repository from DIR as from the working
			// directory: DIR/.git (whose writes the matcher guards), or DIR
			// itself when it looks like a bare repository (HEAD, objects/,
			// refs/), whose DIR/config (aliases, core.pager, hooks) a file
			// write or a checked-out tree may have planted under a name the
			// matcher does not guard (branch policy48). So DIR must be the
			// working directory or a .git directory, or bare discovery must
			// be off (-c safe.bareRepository=explicit, a protected setting).
			dir, ok := next()
			if !ok {
				return "git gets a word that is not literal"
			}
			if path.Clean(dir) != "." && !dotGitDir(dir) {
				bareDir = true
			}
		case contains([]string{"--work-tree", "--namespace", "--super-prefix", "--attr-source", "--shallow-file"}, w.lit):
			if _, ok := next(); !ok {
				return "git gets a word that is not literal"
			}
		case strings.HasPrefix(w.lit, "-"):
		default:
			if bareDir && !bareOff && !gitDir {
				return gitBareDirWhy
			}
			return gitSubcommandCode(w.lit, words[i+1:])
		}
	}
	if bareDir && !bareOff && !gitDir {
		return gitBareDirWhy
	}
	return ""
}

// gitBareDirWhy is why git -C DIR, DIR neither the working directory nor
// a .git directory, with no --git-dir and bare discovery not turned off,
// is opaque (gitCode).
const gitBareDirWhy = "git -C DIR may read a bare repository's configuration (core.pager, aliases, hooks) from a directory the matcher does not guard"

// gitBareOff returns whether bare discovery is off after git reads the
// setting kv (KEY=VALUE of -c when literal, KEY=ENVVAR of --config-env
// otherwise), off before: a setting of safe.bareRepository turns it off
// only as the literal explicit (git reads that setting from the command
// line, never from the repository, and its last setting wins); any other
// key leaves off as it was.
func gitBareOff(kv string, literal, off bool) bool {
	key, val, _ := strings.Cut(kv, "=")
	if !strings.EqualFold(key, "safe.bareRepository") {
		return off
	}
	return literal && val == "explicit"
}

// gitSubcommandCode says why git subcommand sub with args runs a command
// given as an argument.
func gitSubcommandCode(sub string, args []cmdWord) string {
	runs := func(what string) string {
		return fmt.Sprintf("git %s %s runs a command the matcher cannot read", sub, what)
	}
	if sub == "filter-branch" {
		return runs("(its filters)")
	}
	if sub == "config" {
		return gitConfigCode(args)
	}
	if sub == "grep" {
		return gitGrepCode(args) // git grep -O'rm x' (branch policy49)
	}
	if sub == "submodule" || sub == "worktree" || sub == "subtree" {
		// git submodule add URL .husky, git worktree add .husky, git
		// subtree add --prefix=.husky: a repository's files land there,
		// as with git clone (branch attack48).
		for k, a := range args {
			v := a.lit
			if p, ok := strings.CutPrefix(v, "--prefix="); ok {
				v = p
			} else if (v == "--prefix" || v == "-P") && k+1 < len(args) {
				v = args[k+1].lit
			}
			if !strings.HasPrefix(v, "-") && (codeFile(v) || codeFile(v+"/x") || codeDir(v)) {
				return fmt.Sprintf("git %s writes a repository's files into %q, whose files a program may run as code", sub, v)
			}
		}
	}
	if sub == "mv" {
		// git mv SRC DEST writes DEST as mv does (branch attack48).
		for _, f := range copyDestinations("mv", append([]cmdWord{{lit: "mv"}}, args...)) {
			if codeFile(f) {
				return writesFile("git mv", f)
			}
		}
	}
	for k, a := range args {
		if a.unknown {
			return "git gets a word that is not literal"
		}
		opt, val, hasVal := strings.Cut(a.lit, "=")
		long := strings.HasPrefix(a.lit, "--")
		// parse-options takes an unambiguous prefix of a long option
		// (--upload-p, --exe, --con); the subcommand's table is not read
		// here, so any prefix counts. clone's short options cluster
		// (-qu cmd, -qc key=value).
		switch {
		case long && longOption(opt, "--upload-pack", "--receive-pack", "--exec", "--extcmd"):
			return runs(opt)
		case (sub == "clone" || sub == "init") && long && longOption(opt, "--template"):
			return runs(opt + " (it installs that directory's hooks)")
		case sub == "clone" && !strings.HasPrefix(a.lit, "-") && (codeFile(a.lit) || codeFile(a.lit+"/x")):
			// The repository's files land there: git clone URL .husky,
			// ~/.config/autostart. Every operand is read as the
			// directory (a value of an option too: fails closed).
			return fmt.Sprintf("git clone writes a repository into %q, whose files a program may run as code", a.lit)
		case sub == "clone" && !long && strings.HasPrefix(a.lit, "-") && cloneShort(a.lit) == 'u':
			return runs("-u")
		case sub == "clone" && (long && longOption(opt, "--config") || !long && strings.HasPrefix(a.lit, "-") && cloneShort(a.lit) == 'c'):
			kv, given := val, long && hasVal
			if !long {
				kv = a.lit[strings.IndexByte(a.lit, 'c')+1:]
				given = kv != ""
			}
			if !given {
				if k+1 >= len(args) || args[k+1].unknown {
					return runs(a.lit + " (a configuration that is not literal)")
				}
				kv = args[k+1].lit
			}
			if key, _, _ := strings.Cut(kv, "="); !gitKeySafe(strings.ToLower(key)) {
				return runs(fmt.Sprintf("-c %s (a configuration that may run a command)", key))
			}
		case (sub == "rebase" || sub == "difftool") && strings.HasPrefix(a.lit, "-") && !strings.HasPrefix(a.lit, "--") && strings.Contains(a.lit, "x"):
			return runs("-x")
		case sub == "submodule" && a.lit == "foreach", sub == "bisect" && a.lit == "run":
			return runs(a.lit)
		}
	}
	return ""
}

// dotGitDir reports whether dir names a work tree's .git directory
// (.git, ../x/.git), whose config the matcher guards as a code file.
func dotGitDir(dir string) bool {
	return strings.EqualFold(path.Base(path.Clean(dir)), ".git")
}

// cloneShort returns the first letter of w, a cluster of git clone's
// short options, that takes a value (u, c, o, b, j), or 0.
func cloneShort(w string) byte {
	if k := strings.IndexAny(w[1:], "ucobj"); k >= 0 {
		return w[1+k]
	}
	return 0
}

// scpCode says why scp or sftp (name) runs a command the matcher cannot
// read: an option that runs one (sshOptionRuns; -S names the program to
// connect with, -D a local server program, sftp -s a remote subsystem or
// command), an option it does not have, a word that is not literal, or
// (sftp) commands read from its input, where "!cmd" runs a shell.
func scpCode(name string, words []cmdWord) string {
	flags, argFlags := "346ABCOpqRrTv", "cDFiJloPSX"
	if name == "sftp" {
		flags, argFlags = "46AaCfNpqrv", "BbcDFiJloPRSsX"
	}
	batch := ""
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return fmt.Sprintf("%s gets a word that is not literal", name)
		}
		if w.lit == "--" {
			break
		}
		if !strings.HasPrefix(w.lit, "-") || w.lit == "-" {
			continue
		}
		for j := 1; j < len(w.lit); j++ {
			c := w.lit[j]
			if strings.IndexByte(flags, c) >= 0 {
				continue
			}
			if strings.IndexByte(argFlags, c) < 0 {
				return fmt.Sprintf("%s gets an option it does not have (-%c)", name, c)
			}
			val := w.lit[j+1:]
			if val == "" && i+1 < len(words) {
				i++
				if words[i].unknown {
					return fmt.Sprintf("%s gets an option value that is not literal", name)
				}
				val = words[i].lit
			}
			switch c {
			case 'S', 'D', 's':
				return fmt.Sprintf("%s -%c runs a program the matcher cannot read", name, c)
			case 'b':
				batch = val
			}
			if why := sshOptionRuns(c, val); why != "" {
				return strings.Replace(why, "ssh", name, 1)
			}
			break
		}
	}
	if name == "sftp" && (batch == "" || scriptFile(name, cmdWord{lit: batch}) != "") {
		return "sftp reads its commands from its input, where ! runs a shell"
	}
	return ""
}

// denoBunCode says why deno or bun (name) runs code given inline: deno
// eval, deno repl, deno with no subcommand (a REPL reading its input),
// deno run -; bun -e/--eval, -p/--print, bun exec (a shell command line);
// a data: URL or a word that is not literal for either.
func denoBunCode(name string, words []cmdWord) string {
	sub := ""
	for _, w := range words[1:] {
		if w.unknown {
			return fmt.Sprintf("%q gets a word that is not literal", name)
		}
		opt, _, _ := strings.Cut(w.lit, "=")
		switch {
		case strings.Contains(w.lit, "data:"):
			return fmt.Sprintf("%q gets code in a data: URL", name)
		case name == "bun" && contains([]string{"-e", "--eval", "-p", "--print"}, opt):
			return fmt.Sprintf("bun %s runs code the matcher cannot read", opt)
		case name == "deno" && sub == "run" && w.lit == "-":
			return readsInput(name)
		case sub == "" && !strings.HasPrefix(w.lit, "-"):
			sub = w.lit
		}
	}
	switch {
	case name == "deno" && (sub == "eval" || sub == "repl"):
		return fmt.Sprintf("deno %s runs code the matcher cannot read", sub)
	case name == "deno" && sub == "" && !slices.ContainsFunc(words[1:], func(w cmdWord) bool {
		return contains([]string{"-h", "--help", "-V", "--version"}, w.lit)
	}):
		return readsInput(name)
	case name == "bun" && sub == "exec":
		return "bun exec runs a shell command line the matcher cannot read"
	}
	return ""
}
