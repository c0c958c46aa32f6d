package policy

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Files written now and run later (branch policy45). A command that
// writes a file some program later runs as code (a shell's startup file,
// git's configuration or hooks, a Makefile, a debugger's or database
// client's startup file, a crontab) plants code the matcher cannot read,
// whether the program then runs in the same command string ("… >
// Makefile && make") or in a later call, which the matcher cannot tie to
// this one. So the write itself is opaque: a redirection to such a file
// (> >> >| &> &>> <>), tee or sponge naming one, the destination of cp, mv,
// install, ln or rsync, dd of=, sed -i on one, curl -o and -O, wget; and
// git config setting a key that may run a command (gitConfigCode). A
// target that is an expansion is read by the text after the expansion
// ("> $HOME/.bashrc" as /.bashrc; "> $f" names no such file).

// codeFileNames are base names of files a program runs as code.
var codeFileNames = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin",
	".zlogout", ".kshrc", ".mkshrc", ".cshrc", ".tcshrc", ".login", ".logout", ".gitconfig", ".vimrc", ".exrc", ".gvimrc",
	".curlrc", "_curlrc", ".wgetrc", // read at start: output = ~/.bashrc, -w %output{…}
	".gdbinit", ".lldbinit", ".sqliterc", ".psqlrc", ".envrc", ".npmrc", ".yarnrc", ".pythonrc", "sitecustomize.py",
	"usercustomize.py", "Makefile", "makefile", "GNUmakefile", "crontab",
	".yarnrc.yml", ".pnpmfile.cjs", "pip.conf", "pip.ini", // yarnPath, a pnpm hook file, pip's index (branch policy47)
	"bunfig.toml", ".bunfig.toml", // preload scripts bun runs first (branch policy47)
	// Command lines a plain-looking call runs (npm test, deno task, just,
	// task) and pnpm's project settings (branch attack47).
	"package.json", "deno.json", "deno.jsonc", "justfile", ".justfile", "Taskfile.yml", "Taskfile.yaml", "Taskfile.dist.yml",
	"Taskfile.dist.yaml", "pnpm-workspace.yaml",
	// The same programs' other startup files (branch attack47): npm's
	// global npmrc ($PREFIX/etc/npmrc) and init module, curl's and wget's
	// files without a dot ($XDG_CONFIG_HOME/curlrc, /etc/wgetrc), gdb's
	// ~/.config/gdb/gdbinit and early init, vim's ~/.vim/vimrc, the
	// aliases Debian's .bashrc sources, R's, irb's, pry's and direnv's
	// startup files, conda's channels.
	"npmrc", ".npm-init.js", "curlrc", "wgetrc", "gdbinit", ".gdbearlyinit", "vimrc", "_vimrc", ".bash_aliases",
	".Rprofile", "Rprofile.site", ".irbrc", ".pryrc", "direnvrc", ".condarc",
	// uv's and poetry's settings (a package index, an environments'
	// directory; branch policy48).
	"uv.toml", "poetry.toml",
	// Files that choose the program a plain call runs: asdf's and
	// mise's versions (a path: or ref: version, mise's tasks, hooks and
	// env._.source), rustup's toolchain (path = …; branch policy48).
	".tool-versions", ".mise.toml", "mise.toml", ".mise.local.toml", "mise.local.toml", ".rtx.toml", "rust-toolchain",
	"rust-toolchain.toml",
	// Build files other build tools run as make runs a Makefile (branch
	// attack48): cmake, meson, ninja, Bazel, Gradle, Maven, rake, tox,
	// nox, pre-commit, and the project scripts of pdm, hatch and poetry.
	// Bazel's BUILD and WORKSPACE without a suffix are not: names are
	// compared in any case, and build/ and workspace/ are everyday
	// directories.
	"CMakeLists.txt", "CMakePresets.json", "CMakeUserPresets.json", "meson.build", "meson_options.txt", "meson.options",
	"build.ninja", ".bazelrc", "bazel.bazelrc", "BUILD.bazel", "WORKSPACE.bazel", "WORKSPACE.bzlmod",
	"MODULE.bazel", ".bazelversion", "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts",
	"gradle.properties", "gradle-wrapper.properties", "gradlew", "gradlew.bat", "pom.xml", "mvnw", "mvnw.cmd", "Rakefile",
	"rakefile", "Rakefile.rb", "rakefile.rb", "Gemfile", "gems.rb", "tox.ini", "noxfile.py", ".pre-commit-config.yaml",
	".pre-commit-config.yml", "pyproject.toml",
	// Files that choose the program or environment a plain call runs
	// (branch attack48): .env (just's dotenv-load, pipenv run, docker
	// compose: PATH=…), version files naming an interpreter (uv reads a
	// path in .python-version), and startup files of pdb, ghci, julia,
	// mongosh, tmux, screen, Mercurial (hooks), gem and lefthook's git
	// hooks.
	".env", ".python-version", ".python-versions", ".ruby-version", ".node-version", ".nvmrc", ".java-version", ".sdkmanrc",
	".go-version", ".pdbrc", ".ghci", "startup.jl", ".mongoshrc.js", ".mongorc.js", ".tmux.conf", "tmux.conf", ".screenrc",
	".hgrc", "hgrc", ".gemrc", "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml", "lefthook-local.yml",
	".overcommit.yml",
	// env-cmd -e ENV reads its environments from these (review48b).
	".env-cmdrc", ".env-cmdrc.js", ".env-cmdrc.json",
	// Options ack and ug read from the working or home directory
	// (--pager, --filter; branch policy49).
	".ackrc", ".ugrep",
}

// codeFileDirs are path parts (each between slashes, the path given a
// slash at both ends) of files a program runs as code: git hooks and
// configuration, ssh's configuration and rc, sshd's authorized_keys
// (command="…") and environment, system startup files, cron,
// ld.so.preload, editor and desktop startup directories.
var codeFileDirs = []string{
	// Anything in a .git directory, and a .git file (gitdir: DIR): git
	// reads config from .git/commondir's directory and from the gitfile's
	// (branch attack47), besides .git/config and .git/hooks.
	"/.git/", "/.husky/", "/git/config/", "/.ssh/config/", "/.ssh/rc/", "/.ssh/authorized_keys/", "/.ssh/authorized_keys2/", "/.ssh/environment/", "/etc/profile/",
	"/etc/profile.d/", "/etc/bash.bashrc/", "/etc/zsh/", "/etc/environment/", "/etc/rc.local/", "/etc/ld.so.preload/",
	"/etc/sudoers", "/etc/cron", "/spool/cron/", "/etc/systemd/", "/.config/systemd/", "/.config/autostart/",
	"/.config/fish/", "/.config/nvim/", "/go/env/", "/.cargo/config/", "/.cargo/config.toml/", // cargo's runner, rustc-wrapper
	"/.yarn/releases/", "/.yarn/plugins/", // the yarn release (yarnPath) and plugins .yarnrc.yml names (branch attack47)
	"/pnpm/rc/", "/.vim/", "/.ssh/config.d/", "/etc/ssh/", "/.bashrc.d/", "/environment.d/", // (branch attack47)
	"/.bundle/config/", // Bundler's settings: BUNDLE_GEMFILE, shebang, local.* (branch policy48)
	// Package code a later npm test, npx X or ./node_modules/.bin/X runs
	// (the .bin entries link into the packages), and mise's other
	// configuration files (branch policy48).
	"/node_modules/", "/.mise/", "/.config/mise/",
	"/mise/config.toml/", "/.mvn/", "/.gradle/init.d/", "/.gradle/init.gradle/", "/.hg/", "/.ghci.d/", // (branch attack48)
}

// codeFile reports whether p (a path as written, ~ kept) names a file a
// program runs as code, or a directory of such files (.git/hooks). Case
// is ignored: on macOS's and Windows's usual file systems ~/.BASHRC is
// ~/.bashrc and .GIT/HOOKS is .git/hooks (branch policy45b).
func codeFile(p string) bool {
	if p == "" {
		return false
	}
	c := strings.ToLower(path.Clean(p))
	base := path.Base(c)
	if slices.ContainsFunc(codeFileNames, func(n string) bool { return strings.EqualFold(n, base) }) || strings.HasSuffix(base, ".mk") ||
		strings.HasPrefix(base, "makefile.") || strings.HasPrefix(base, "gnumakefile.") ||
		strings.HasSuffix(base, ".pth") || strings.HasPrefix(base, ".psqlrc-") || // python's site runs a .pth's import lines; psql's versioned rc
		slices.ContainsFunc([]string{".cmake", ".ninja", ".bzl", ".bazel", ".gradle", ".gradle.kts", ".rake"}, func(x string) bool {
			return strings.HasSuffix(base, x) // build files by suffix (branch attack48)
		}) {
		return true
	}
	s := "/" + c + "/"
	if searchDir(c, s) || buildAgentFile(c, s) || fixerConfigFile(base) || tsConfigFile(base) { // buildAgentFile: commandattack49.go; fixerConfigFile: commandfixers.go; tsConfigFile: commandtsc.go
		return true
	}
	for _, d := range codeFileDirs {
		if strings.Contains(s, d) {
			return true
		}
	}
	return false
}

func writesFile(name, file string) string {
	return fmt.Sprintf("%s writes %q, which a program may later run as code the matcher cannot read", name, file)
}

// redirectWritesCode says why redirection r writes a file a program runs
// as code, or "".
func redirectWritesCode(r *syntax.Redirect) string {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll, syntax.RdrInOut, syntax.DplOut:
	default:
		return ""
	}
	if r.Word == nil {
		return ""
	}
	if target := fileOf(literalWord(r.Word, func(string) {})); codeFile(target) {
		return writesFile("a redirection", target)
	}
	return ""
}

// fileOf returns the path w names as far as the matcher knows it: its
// text, or for a word with an expansion the text after the last one
// ("$HOME/.bashrc" as "/.bashrc").
func fileOf(w cmdWord) string {
	if w.unknown {
		return w.tail
	}
	return w.lit
}

// valueWord returns the value of the option words[*i]: attached (text
// after '=' or the option letter) when hasAttached, else the next word,
// advancing *i.
func valueWord(words []cmdWord, i *int, attached string, hasAttached bool) cmdWord {
	if hasAttached && attached != "" {
		return cmdWord{lit: attached}
	}
	if *i+1 >= len(words) {
		return cmdWord{}
	}
	*i++
	return words[*i]
}

// writesCode says why the writer name (a base name) with words writes a
// file a program runs as code: tee's and sponge's files, the destination
// of cp, mv, install, ln and rsync (the -t value, else the last operand),
// dd's of=, what curl and wget download to (downloadFiles) and their
// other files (curlFiles, wgetCode), and find's
// -fprint, -fprint0, -fprintf and -fls files.
func writesCode(name string, words []cmdWord) string {
	var files []string
	switch name {
	case "tee", "sponge":
		for _, w := range words[1:] {
			if !strings.HasPrefix(w.lit, "-") {
				files = append(files, fileOf(w))
			}
		}
	case "cp", "mv", "install", "ln", "rsync":
		files = copyDestinations(name, words)
		files = append(files, backups(name, words, files)...) // cp -b -S rc x ~/.bash (branch attack48)
	case "scp":
		files = copyDestinations("cp", scpOperands(words))
	case "aws", "gsutil", "gcloud", "rclone", "azcopy", "docker", "podman", "kubectl", "oc", "b2", "gh", "s3cmd", "mc":
		// Cloud and container copies (aws s3 cp s3://b/x ~/.bashrc,
		// docker cp, rclone copyto, gh release download -O): every
		// operand is read as a destination file and directory, as the
		// matcher does not know each one's options (branch attack48).
		if containerNoFiles(name, words) { // docker stop ID (commandfindnames.go)
			break
		}
		for i := 1; i < len(words); i++ {
			w := words[i].lit
			opt, val, hasVal := strings.Cut(w, "=")
			switch {
			case name == "gh" && (contains([]string{"-O", "--output", "-D", "--dir"}, opt)):
				v := fileOf(valueWord(words, &i, val, hasVal))
				files = append(files, v, v+"/*")
			case !strings.HasPrefix(w, "-"):
				files = append(files, fileOf(words[i]), fileOf(words[i])+"/*")
			}
		}
	case "dd":
		for _, w := range words[1:] {
			if v, ok := strings.CutPrefix(w.lit, "of="); ok {
				files = append(files, v)
			}
		}
	case "curl":
		if why := curlOptionsCode(name, words); why != "" {
			return why
		}
		files = append(downloadFiles(name, words), curlFiles(words)...)
	case "wget":
		why, logs := wgetCode(words)
		if why != "" {
			return why
		}
		files = append(downloadFiles(name, words), logs...)
	case "find", "gfind", "bfs":
		// -fprint, -fprint0, -fprintf and -fls write their file
		// (find . -maxdepth 0 -fprintf ~/.bashrc 'rm x\n').
		for i := 1; i+1 < len(words); i++ {
			if contains([]string{"-fprint", "-fprint0", "-fprintf", "-fls"}, words[i].lit) {
				files = append(files, fileOf(words[i+1]))
			}
		}
	default:
		files = append(outputFiles(words), positionalWrites(name, words)...) // uniq IN OUT, unzip -d (branch policy48)
	}
	for _, f := range files {
		if dir, entries := strings.CutSuffix(f, "/*"); codeFile(f) || entries && (codeDir(dir) || aboveCodeDirs(dir)) {
			return writesFile(name, strings.TrimSuffix(dir, "/x"))
		}
	}
	return ""
}

// outputFiles returns the values of another program's output options
// in words (branch attack47): -o FILE, -oFILE, -o=FILE, --output[…][=]FILE,
// --outfile, --out-file, --out, -out, -output: go build -o, gcc -o, sort
// -o, git archive -o, git diff --output, patch -o, openssl -out, gpg -o
// each write that file (go build -o .git/hooks/pre-commit plants a
// hook). A -o that takes no value (git commit -o, grep -o) reads the next
// word as one (fails closed).
func outputFiles(words []cmdWord) []string {
	var files []string
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		if w == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(w, "=")
		switch {
		case contains([]string{"-o", "-out", "--out", "-output", "--outfile", "--out-file"}, opt) || strings.HasPrefix(opt, "--output"):
			files = append(files, fileOf(valueWord(words, &i, val, hasVal)))
		case strings.HasPrefix(w, "-o") && !strings.HasPrefix(w, "--") && len(w) > 2:
			files = append(files, w[2:])
		}
	}
	return files
}

// downloadFiles returns the files curl or wget (name) writes: curl's -o
// values, and the URLs' base names with -O or --remote-name; wget's -O
// value, else the URLs' base names; each also under the directory of
// curl's --output-dir or wget's -P/--directory-prefix.
func downloadFiles(name string, words []cmdWord) []string {
	var files, urls []string
	short, long, remote := "o", "--output", false
	dirLong, dirShort, dir := "--output-dir", "", "" // curl --output-dir D, wget -P D: where the files land
	if name == "wget" {
		short, long, remote = "O", "--output-document", true
		dirLong, dirShort = "--directory-prefix", "P"
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case strings.HasPrefix(w.lit, "--"):
			// curl's --outp may name --output or --output-dir: its value
			// is read as both.
			out, isDir := longOption(opt, long), opt != long && longOption(opt, dirLong)
			if out || isDir {
				v := fileOf(valueWord(words, &i, val, hasVal))
				if out {
					files = append(files, v)
					remote = false
				}
				if isDir {
					dir = v
				}
			}
			if name == "curl" && longOption(opt, "--remote-name", "--remote-name-all") {
				remote = true
			}
			if name == "curl" && hasVal && longOption(opt, "--url") {
				urls = append(urls, val) // --url=https://x/.bashrc -O; a separate value is read below
			}
		case strings.HasPrefix(w.lit, "-"):
			if k := strings.Index(w.lit, dirShort); dirShort != "" && k > 0 {
				dir = fileOf(valueWord(words, &i, w.lit[k+1:], true))
				continue
			}
			if name == "curl" && strings.Contains(w.lit, "O") {
				remote = true
			}
			if k := strings.Index(w.lit, short); k > 0 {
				files = append(files, fileOf(valueWord(words, &i, w.lit[k+1:], true)))
				remote = remote && name == "curl"
			}
		default:
			urls = append(urls, fileOf(w))
		}
	}
	if remote {
		for _, u := range urls {
			files = append(files, remoteName(u)...)
		}
	}
	if dir != "" {
		for _, f := range files {
			files = append(files, dir+"/"+f) // both, where -o is absolute or not under the directory
		}
	}
	return files
}

// scpOperands returns scp's words as cp's: "cp", "-r" when scp copies a
// tree, and scp's operands without its options and their values (the
// letters of scpCode's argFlags take one). scp h:x ~/.bashrc writes
// ~/.bashrc as cp does; a remote destination (h:.bashrc) is read as a
// local one (fails closed, as rsync's).
func scpOperands(words []cmdWord) []cmdWord {
	out := []cmdWord{{lit: "cp"}}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.lit == "--" {
			return append(out, words[i+1:]...)
		}
		if !strings.HasPrefix(w.lit, "-") || w.lit == "-" {
			out = append(out, w)
			continue
		}
		for j := 1; j < len(w.lit); j++ {
			if w.lit[j] == 'r' {
				out = append(out, cmdWord{lit: "-r"})
			}
			if strings.IndexByte("cDFiJloPSX", w.lit[j]) >= 0 {
				if j+1 == len(w.lit) {
					i++ // the value is the next word
				}
				break
			}
		}
	}
	return out
}

// remoteName returns the names a download of URL u may take: its last
// path part without the query or fragment (curl -O 'https://x/.bashrc#a'
// writes .bashrc), also after a backslash (curl on Windows) and with its
// %XX escapes decoded (wget saves https://x/%2ebashrc as .bashrc).
func remoteName(u string) []string {
	u, _, _ = strings.Cut(u, "?")
	u, _, _ = strings.Cut(u, "#")
	b := u[strings.LastIndexAny(u, `/\`)+1:]
	names := []string{path.Base(u), b}
	if d, err := url.PathUnescape(b); err == nil && d != b {
		names = append(names, d, d[strings.LastIndexAny(d, `/\`)+1:])
	}
	return names
}

// gitConfigCode says why git config with args (after "config") sets a
// key that may run a command (gitKeySafe): core.pager, alias.x '!cmd',
// include.path, core.hooksPath, … run later, in this command string or a
// later call. Reads (--get, --list, get, list) and removals are not.
func gitConfigCode(args []cmdWord) string {
	var pos []string
	read := false
	for k := 0; k < len(args); k++ {
		a := args[k]
		if a.unknown {
			return "git gets a word that is not literal"
		}
		opt, _, hasVal := strings.Cut(a.lit, "=")
		switch {
		case strings.HasPrefix(a.lit, "-"):
			if contains([]string{"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool",
				"-l", "--list", "--unset", "--unset-all", "--remove-section", "--rename-section"}, opt) {
				read = true
			}
			if !hasVal && contains([]string{"-f", "--file", "--blob", "--type", "-t", "--default", "--comment", "--value", "--url"}, opt) {
				k++
			}
		default:
			pos = append(pos, a.lit)
		}
	}
	if len(pos) > 0 && contains([]string{"get", "list", "unset", "remove-section", "rename-section", "edit"}, pos[0]) {
		return ""
	}
	if len(pos) > 0 && pos[0] == "set" {
		pos = pos[1:]
	}
	if read || len(pos) < 2 || gitKeySafe(strings.ToLower(pos[0])) {
		return ""
	}
	return fmt.Sprintf("git config sets %q, which may run a command later that the matcher cannot read", pos[0])
}

// shortTarget returns the index of the -t letter in opt, a cluster of
// name's short options (-vt DIR, -t.git/hooks), or -1: the letters before
// it take no value (install's -m, -o, -g, -S and ln's -S, cp's and mv's
// -S take one, so a t after them is part of that value).
func shortTarget(name, opt string) int {
	takes := map[string]string{"install": "mogS", "cp": "S", "mv": "S", "ln": "S"}[name]
	for j := 1; j < len(opt); j++ {
		switch {
		case opt[j] == 't':
			return j
		case strings.IndexByte(takes, opt[j]) >= 0:
			return -1
		}
	}
	return -1
}

// copyDestinations returns the paths cp, mv, install, ln or rsync (name)
// may write: the destination (the -t directory, with "/x" appended, else
// the last operand), each source's base name under it where that is
// surely a directory (cp x/.bashrc ~ writes ~/.bashrc; cp -r hooks .git/
// writes .git/hooks/…; a -t directory, a trailing slash, . or .., a
// codeDir, several sources), and, for a
// tree copied (-r, -R, -a, --recursive, --archive; mv and rsync always)
// into a directory that holds startup files (codeDir: a home directory,
// .git, .ssh, .config, /etc), that directory with "/.bashrc" appended.
func copyDestinations(name string, words []cmdWord) []string {
	var operands []string
	target := ""
	hasTarget := false
	tree := name == "mv" || name == "rsync"
	for i := 1; i < len(words); i++ {
		w := words[i]
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case w.lit == "--":
			for _, o := range words[i+1:] {
				operands = append(operands, fileOf(o))
			}
			i = len(words)
		case strings.HasPrefix(w.lit, "--"):
			if longOption(opt, "--target-directory") {
				target, hasTarget = fileOf(valueWord(words, &i, val, hasVal)), true
			}
			tree = tree || longOption(opt, "--recursive", "--archive")
		case strings.HasPrefix(w.lit, "-") && w.lit != "-":
			if name != "rsync" && shortTarget(name, w.lit) >= 0 {
				k := shortTarget(name, w.lit)
				target, hasTarget = fileOf(valueWord(words, &i, w.lit[k+1:], true)), true // -t DIR, -vtDIR
			}
			tree = tree || name == "cp" && strings.ContainsAny(w.lit[1:], "rRa")
		default:
			operands = append(operands, fileOf(w))
		}
	}
	var files []string
	sources := operands
	if hasTarget {
		files = append(files, target+"/x")
	} else if len(operands) > 0 {
		target, sources = operands[len(operands)-1], operands[:len(operands)-1]
		files = append(files, target)
	}
	if target == "" {
		return files
	}
	// Where the destination is surely a directory, each source lands in
	// it under its base name; "cp ~/.bashrc /tmp/b" is read as /tmp/b.
	if hasTarget || strings.HasSuffix(target, "/") || contains([]string{".", ".."}, path.Base(target)) ||
		codeDir(target) || len(sources) > 1 {
		for _, src := range sources {
			b := path.Base(strings.TrimRight(src, "/"))
			files = append(files, target+"/"+b, target+"/"+b+"/x")
		}
	}
	if tree && len(sources) > 0 && codeDir(target) {
		files = append(files, target+"/.bashrc")
	}
	return files
}

// codeDir reports whether p names a directory whose direct entries
// include files a program runs as code: a home directory (~, ~user,
// /root, /home/NAME, /Users/NAME), .git, .ssh, .config or /etc.
func codeDir(p string) bool {
	c := strings.ToLower(path.Clean(p))
	parts := strings.Split(strings.TrimPrefix(c, "/"), "/")
	switch {
	case strings.HasPrefix(c, "~") && !strings.Contains(c, "/"), c == "/root", c == "/etc":
		return true
	case len(parts) == 2 && (parts[0] == "home" || parts[0] == "users") && strings.HasPrefix(c, "/"):
		return true
	}
	return contains([]string{".git", ".ssh", ".config"}, path.Base(c))
}

// aboveCodeDirs reports whether p names a directory above home
// directories or system startup files (/, /home, /Users, /var,
// /var/spool), where an archive's entries (root/.bashrc,
// etc/profile.d/x) land in guarded places (branch policy48).
func aboveCodeDirs(p string) bool {
	return contains([]string{"/", "/home", "/users", "/var", "/var/spool"}, strings.ToLower(path.Clean(p)))
}

// searchDir reports whether c (a cleaned path in lower case; s is
// "/"+c+"/") is in a directory where a later plain call finds its
// program (branch attack48): a system or home bin directory (/usr/bin,
// /usr/local/bin, /opt/homebrew/bin, ~/bin, ~/.local/bin: Ubuntu's
// .profile puts the home ones first on PATH, so ~/.local/bin/git runs for
// git status), a tool's bin or shims directory (~/.cargo/bin, ~/go/bin,
// ~/.bun/bin, pyenv's, rbenv's, asdf's and mise's shims, nvm's
// versions), or a virtual environment's bin (.venv/bin/pytest runs for
// uv run pytest, poetry run pytest). A project's bin/ (go build -o
// bin/server) is not: a call runs it by its path (bin/server), which an
// allow rule names as written.
func searchDir(c, s string) bool {
	for _, p := range []string{"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/usr/local/sbin/",
		"/opt/homebrew/bin/", "/opt/homebrew/sbin/", "/opt/local/bin/", "/root/bin/", "/root/.local/bin/",
		"/usr/games/", "/usr/local/games/", "/snap/bin/"} { // (the last three: Ubuntu's PATH; review48b)
		if strings.HasPrefix(c+"/", p) {
			return true
		}
	}
	if parts := strings.Split(c, "/"); len(parts) > 3 && parts[0] == "" && (parts[1] == "home" || parts[1] == "users") && parts[3] == "bin" {
		return true // /home/u/bin/x
	}
	if strings.HasPrefix(c, "~") && strings.Contains(c, "/") && strings.HasPrefix(c[strings.IndexByte(c, '/'):]+"/", "/bin/") {
		return true // ~/bin/x, ~u/bin/x
	}
	for _, d := range []string{"/.local/bin/", "/.cargo/bin/", "/go/bin/", "/.npm-global/bin/", "/.deno/bin/", "/.bun/bin/",
		"/.volta/bin/", "/shims/", "/.nvm/versions/", "/.venv/bin/", "/venv/bin/", "/.venv/scripts/", "/venv/scripts/",
		"/.local/share/mise/installs/", "/.asdf/installs/", "/.pyenv/versions/", "/.rbenv/versions/", "/.tox/",
		// (review48b) yarn's, nix's, dotnet tools', pnpm's and pixi's bin directories
		"/.yarn/bin/", "/.nix-profile/bin/", "/.dotnet/tools/", "/.local/share/pnpm/", "/library/pnpm/", "/.pixi/bin/"} {
		if strings.Contains(s, d) {
			return true
		}
	}
	return false
}

// backups returns the backup files cp, mv, install, ln or rsync (name)
// makes of the files it writes (dests) given a suffix (-S SUFFIX, -SSUFFIX
// in a cluster, --suffix[=]SUFFIX: cp -b -S rc x ~/.bash moves the old
// ~/.bash to ~/.bashrc), and rsync's --backup-dir as DIR/*.
func backups(name string, words []cmdWord, dests []string) []string {
	var out []string
	suffix := ""
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		if w == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(w, "=")
		switch {
		case strings.HasPrefix(w, "--"):
			if longOption(opt, "--suffix") {
				suffix = fileOf(valueWord(words, &i, val, hasVal))
			}
			if name == "rsync" && longOption(opt, "--backup-dir") {
				out = append(out, fileOf(valueWord(words, &i, val, hasVal))+"/*")
			}
		case strings.HasPrefix(w, "-") && name != "rsync":
			if k := strings.IndexByte(w, 'S'); k > 0 && shortTarget(name, w[:k]) < 0 {
				suffix = fileOf(valueWord(words, &i, w[k+1:], true))
			}
		}
	}
	if suffix != "" {
		for _, d := range dests {
			out = append(out, d+suffix)
		}
	}
	return out
}
