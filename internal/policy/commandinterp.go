package policy

import (
	"fmt"
	"path"
	"strings"
)

// Interpreters that run code given inline: python3 -c, perl -e, ruby -e,
// node -e, php -r, lua -e, julia -e, an awk program that calls system() or opens a
// pipe, a sed script with the e command or flag. The matcher does not read
// those languages, so such a command is opaque (as sh -c is): a deny or
// approve rule matches it and an allow rule never allows it, whatever its
// patterns say. So is one that reads its program from its input (python3,
// irb or julia with no script, perl < x.pl, a script named /dev/stdin or
// /proc/...).
// A program named as a file (python3 build.py, awk -f prog.awk) is not:
// the matcher cannot read a file, as it cannot read what ./build.sh does.

// inlineInterp is how one interpreter takes its program on the command
// line: short options (clustered as -ne) that give code inline, that take
// an argument (attached or the next word), that name a module to run
// instead of a script, or that only print and exit; long options that
// give code inline or take an argument as the next word.
type inlineInterp struct {
	inline, args, module, exits string
	longInline, longArgs        []string
}

// interpreterFor returns the interpreter named name (a base name), or nil.
func interpreterFor(name string) *inlineInterp {
	switch {
	case versioned(name, "python"), versioned(name, "pypy"):
		return &interpreters[0]
	case versioned(name, "perl"):
		return &interpreters[1]
	case versioned(name, "ruby"):
		return &interpreters[2]
	case name == "node", name == "nodejs":
		return &interpreters[3]
	case versioned(name, "php"):
		return &interpreters[4]
	case versioned(name, "lua"), name == "luajit":
		return &interpreters[5]
	case name == "Rscript":
		return &interpreters[6]
	case name == "R":
		return &interpreters[7]
	case versioned(name, "tclsh"), versioned(name, "wish"):
		return &interpreters[8]
	case name == "expect":
		return &interpreters[9]
	case name == "osascript":
		return &interpreters[10]
	case name == "julia":
		return &interpreters[11]
	case name == "irb":
		return &interpreters[12]
	}
	return nil
}

var interpreters = [...]inlineInterp{
	{inline: "ci", args: "WX", module: "m", exits: "hV?", longArgs: []string{"--check-hash-based-pycs"}},
	// perl -M'strict;system q(rm x)' and -d:... run code too.
	{inline: "eEMmd", args: "I", exits: "hvV"},
	{inline: "e", args: "IrCE", exits: "hv"},
	{inline: "ep", args: "r", exits: "hv", longInline: []string{"--eval", "--print"},
		longArgs: []string{"--require", "--import", "--loader", "--experimental-loader", "--conditions", "--input-type", "--title"}},
	{inline: "rRBEF", args: "cdz", exits: "hvim"},
	{inline: "e", args: "l", exits: "v"},
	{inline: "e"},              // Rscript
	{inline: "e", module: "f"}, // R -f file
	{},                         // tclsh, wish: a script, or commands from the input
	{inline: "ci", module: "f"},
	{inline: "e", args: "ls"}, // osascript -l JavaScript -e
	{inline: "eEi", args: "JpHtCL", exits: "hv", longInline: []string{"--eval", "--print"},
		longArgs: []string{"--sysimage", "--home", "--threads", "--procs", "--load", "--machine-file", "--cpu-target"}},
	{args: "Ir", exits: "hv"}, // irb: a script, or code from its input
}

// versioned reports whether name is base or base followed by a version
// (python3, python3.12, perl5.36).
func versioned(name, base string) bool {
	v, ok := strings.CutPrefix(name, base)
	return ok && strings.Trim(v, "0123456789.") == ""
}

// inlineCode says why words (words[0] is the program, literal) run code
// the matcher cannot read, or "" when they do not (or are no interpreter).
func inlineCode(words []cmdWord) string {
	name := programName(path.Base(words[0].lit))
	if why := linkCode(name, words); why != "" { // ln -s .git/hooks h (commandlinks.go)
		return why
	}
	if why := ctestNinjaCode(name, words); why != "" { // ctest --test-command, ninja -t msvc (commandctest.go)
		return why
	}
	if why := attack49Code(name, words); why != "" { // pytest --junitxml, go -ldflags=-extld, sed -f (commandattack49.go)
		return why
	}
	if why := cmd50Code(name, words); why != "" { // prettier --write .git/config, eslint -f ./x.js (commandformat.go, commandplugins.go)
		return why
	}
	switch name {
	case "awk", "gawk", "mawk", "nawk":
		return awkCode(name, words)
	case "sed", "gsed":
		return sedCode(name, words)
	case "git":
		if why := gitCode(words); why != "" {
			return why
		}
		return writesCode(name, words) // git archive -o, git diff --output (branch attack47)
	case "scp", "sftp":
		if why := scpCode(name, words); why != "" || name == "sftp" {
			return why
		}
		return writesCode(name, words) // scp h:x ~/.bashrc
	case "deno", "bun":
		return denoBunCode(name, words)
	case "npm", "pnpm", "yarn", "npx", "pnpx":
		return packageManagerCode(name, words)
	case "go":
		if why := goChdirCode(words); why != "" { // go build -C .git/hooks -o pre-commit (commandgochdir.go)
			return why
		}
		if why := goCode(words); why != "" {
			return why
		}
		return writesCode(name, words) // go build -o (branch attack47)
	}
	if versioned(name, "pip") {
		return pipCode(words)
	}
	if why := toolConfigCode(name, words); why != "" {
		return why
	}
	if why := programCode(name, words); why != "" {
		return why
	}
	ip := interpreterFor(path.Base(words[0].lit))
	if ip == nil {
		ip = interpreterFor(name)
	}
	if ip == nil {
		return ""
	}
	for _, w := range words[1:] {
		if strings.Contains(w.lit, "data:") {
			// node --import 'data:text/javascript,…', php -d
			// auto_prepend_file=data://…: code in a URL.
			return fmt.Sprintf("%q gets code in a data: URL", name)
		}
	}
	exits := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case w.unknown:
			return fmt.Sprintf("%q gets an option or script that is not literal", name)
		case w.lit == "--":
			if i+1 < len(words) {
				return scriptFile(name, words[i+1])
			}
			return readsInput(name)
		case strings.HasPrefix(w.lit, "--"):
			opt, _, hasValue := strings.Cut(w.lit, "=")
			switch {
			case contains(ip.longInline, opt):
				return fmt.Sprintf("%q %s runs code the matcher cannot read", name, opt)
			case opt == "--help" || opt == "--version":
				exits = true
			case contains(ip.longArgs, opt) && !hasValue:
				i++
			}
		case strings.HasPrefix(w.lit, "-") && w.lit != "-":
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				switch {
				case strings.IndexByte(ip.inline, c) >= 0:
					return fmt.Sprintf("%q -%c runs code the matcher cannot read", name, c)
				case strings.IndexByte(ip.module, c) >= 0:
					// Runs a named module; python3 -m pip is pip (branch
					// policy47: pip config set).
					m := valueWord(words, &i, w.lit[j+1:], true)
					if c == 'm' && versioned(name, "python") && m.lit == "pip" {
						return pipCode(append([]cmdWord{{lit: "pip"}}, words[i+1:]...))
					}
					return ""
				case strings.IndexByte(ip.exits, c) >= 0:
					exits = true
				case strings.IndexByte(ip.args, c) >= 0:
					if j == len(w.lit)-1 {
						i++
					}
					j = len(w.lit)
				}
			}
		default:
			return scriptFile(name, w)
		}
	}
	if exits {
		return ""
	}
	return readsInput(name)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scriptFile says why the script w that name runs is code the matcher
// cannot read although it looks like a file: "-", or a path under /dev or
// /proc (/dev/stdin, /dev/fd/0, /proc/self/fd/0) that reads its input.
func scriptFile(name string, w cmdWord) string {
	if w.unknown {
		return fmt.Sprintf("%q runs a script that is not literal", name)
	}
	if w.lit == "-" || strings.HasPrefix(path.Clean(w.lit), "/dev/") || strings.HasPrefix(path.Clean(w.lit), "/proc/") {
		return readsInput(name)
	}
	return ""
}

func readsInput(name string) string {
	return fmt.Sprintf("%q reads its program from its input, which the matcher cannot read", name)
}

// awkCode says why an awk command may run commands: a word of it (the
// program, an -e/--source value, an operand) calls system(), holds a pipe
// (print | "cmd", "cmd" | getline), gawk's @ (indirect calls, @load,
// @include) or a backslash-newline; a word is not literal; or a program
// file is read from input (-f /dev/stdin, -f -). Values of -v and -F are
// data; -f, -E, -i and -l name files.
func awkCode(name string, words []cmdWord) string {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return fmt.Sprintf("%q gets a word that is not literal", name)
		}
		kind, val := byte(0), ""
		if opt, v, ok := strings.Cut(w.lit, "="); strings.HasPrefix(opt, "--") {
			if kind = awkLong(opt[2:]); kind == 0 {
				continue
			}
			val = v
			if !ok {
				val = "" // the next word
			}
		} else if len(w.lit) > 1 && w.lit[0] == '-' {
			for j := 1; j < len(w.lit) && kind == 0; j++ {
				if c := w.lit[j]; strings.IndexByte("vFfEeilW", c) >= 0 {
					kind, val = c, w.lit[j+1:]
				}
			}
			if kind == 0 {
				continue // flags such as -b, -c, -P
			}
		}
		if kind != 0 && val == "" && i+1 < len(words) {
			i++
			if words[i].unknown {
				return fmt.Sprintf("%q gets an option value that is not literal", name)
			}
			val = words[i].lit
		}
		switch kind {
		case 'v', 'F':
			continue
		case 'f', 'E', 'i', 'l':
			if why := scriptFile(name, cmdWord{lit: val}); why != "" {
				return why
			}
			continue
		case 'W':
			// gawk reads -W name[=value] as --name[=value] (getopt's
			// "W;"), abbreviated too: -W so='BEGIN{…}', -W fi=/dev/stdin.
			opt, v, ok := strings.Cut(val, "=")
			if strings.HasPrefix(val, "e") {
				return fmt.Sprintf("%q -W exec reads a program the matcher does not check", name)
			}
			if k := awkLong(opt); k != 0 {
				if !ok && i+1 < len(words) {
					i++
					if words[i].unknown {
						return fmt.Sprintf("%q gets an option value that is not literal", name)
					}
					v = words[i].lit
				}
				if k == 'f' {
					if why := scriptFile(name, cmdWord{lit: v}); why != "" {
						return why
					}
					continue
				}
				if k == 'v' {
					continue
				}
				val = v
			}
		case 0:
			val = w.lit
		}
		if strings.Contains(val, "system") || strings.ContainsAny(val, "|@") || strings.Contains(val, "\\\n") || awkPrintRedirect(val) {
			return fmt.Sprintf("%q runs a program that may run commands (system, a pipe or @)", name)
		}
	}
	return ""
}

// awkLong returns the kind of gawk's long option opt (without dashes),
// also abbreviated as getopt_long takes it: 'e' for --source (a
// program), 'f' for --file, --exec, --include and --load (a file), 'v'
// for --assign and --field-separator (data), else 0. gawk's table is not
// read here: an ambiguous prefix (--s, --f) counts as the first kind it
// may name, which at worst reads a word as a program or a file.
func awkLong(opt string) byte {
	switch {
	case longPrefix(opt, "source"):
		return 'e'
	case longPrefix(opt, "file", "exec", "include", "load"):
		return 'f'
	case longPrefix(opt, "assign", "field-separator"):
		return 'v'
	}
	return 0
}

// sedCode says why a sed command may run commands: a script (the first
// operand, or an -e/--expression value) uses GNU sed's e command or the e
// flag of s (sedRuns), a word is not literal, a script file is read from
// input, or -i writes a file a program runs as code (codeFile: sed -i
// '1i rm x' ~/.bashrc). With --sandbox sed refuses e, r and w.
func sedCode(name string, words []cmdWord) string {
	var scripts []string
	given := false // a script was given by -e or -f
	var operands []string
	inPlace := false // -i, --in-place: the operands are written
	suffix := ""     // -iSUFFIX, --in-place=SUFFIX: a backup of each (branch attack48)
	sandbox := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return fmt.Sprintf("%q gets a word that is not literal", name)
		}
		kind, val := byte(0), ""
		switch opt, v, ok := strings.Cut(w.lit, "="); {
		case w.lit == "--sandbox":
			sandbox = true
			continue
		case sedLong(opt, "--in-place"):
			inPlace, suffix = true, v
			continue
		case w.lit == "--":
			for _, o := range words[i+1:] {
				if o.unknown {
					return fmt.Sprintf("%q gets a word that is not literal", name)
				}
				operands = append(operands, o.lit)
			}
			i = len(words)
			continue
		case sedLong(opt, "--expression") || sedLong(opt, "--file") || sedLong(opt, "--line-length"):
			kind, val = opt[2], v // also abbreviated, as getopt_long takes them: --exp, --in
			if !ok {
				val = ""
			}
		case strings.HasPrefix(w.lit, "--"):
			continue
		case len(w.lit) > 1 && w.lit[0] == '-':
			for j := 1; j < len(w.lit) && kind == 0; j++ {
				switch c := w.lit[j]; c {
				case 'e', 'f', 'l':
					kind, val = c, w.lit[j+1:]
				case 'i':
					inPlace, suffix = true, w.lit[j+1:]
					j = len(w.lit) // -i[SUFFIX]
				}
			}
			if kind == 0 {
				continue
			}
		default:
			operands = append(operands, w.lit)
			continue
		}
		if val == "" && i+1 < len(words) {
			i++
			if words[i].unknown {
				return fmt.Sprintf("%q gets an option value that is not literal", name)
			}
			val = words[i].lit
		}
		switch kind {
		case 'e':
			scripts, given = append(scripts, val), true
		case 'f':
			given = true
			if why := scriptFile(name, cmdWord{lit: val}); why != "" {
				return why
			}
		}
	}
	if !given && len(operands) > 0 {
		scripts, operands = append(scripts, operands[0]), operands[1:]
	}
	for _, f := range operands {
		if inPlace && codeFile(f) {
			return writesFile(name+" -i", f)
		}
		if b := backupName(f, suffix); inPlace && suffix != "" && codeFile(b) {
			return writesFile(name+" -i", b) // sed -irc … ~/.bash keeps ~/.bash as ~/.bashrc
		}
	}
	// GNU sed joins the -e scripts with newlines (a\ in one, its text in
	// the next).
	written := ""
	runs := sedRuns(strings.Join(scripts, "\n"), func(f string) {
		if written == "" && codeFile(f) {
			written = f
		}
	})
	if !sandbox && written != "" {
		return writesFile(name+" w", written) // sed 'w .git/hooks/pre-commit'
	}
	if !sandbox && runs {
		return fmt.Sprintf("%q runs a script that may run commands (the e command or flag, or one the matcher does not know)", name)
	}
	return ""
}

// sedRuns reports whether a sed script may run a command: GNU sed's e
// command or the e flag of s. It reads the script as GNU sed does and
// fails closed: a command it does not know, or text after a command where
// the next one should begin, counts as running one. It calls wrote with
// the file each w and W command and s///w flag writes.
func sedRuns(s string, wrote func(string)) bool {
	i := 0
	skip := func(set string) {
		for i < len(s) && strings.IndexByte(set, s[i]) >= 0 {
			i++
		}
	}
	// delimited skips text up to the unescaped delimiter d, past it; false
	// when there is none.
	delimited := func(d byte) bool {
		for ; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case d:
				i++
				return true
			}
		}
		return false
	}
	toEOL := func() {
		for i < len(s) && s[i] != '\n' {
			i++
		}
	}
	for {
		skip(" \t\n;")
		if i >= len(s) {
			return false
		}
		// Addresses: N, $, /re/, \cREc, first~step, addr,+N, addr,~N, !.
		for range 2 {
			switch {
			case s[i] == '/':
				i++
				if !delimited('/') {
					return true
				}
				skip("IM")
			case s[i] == '\\' && i+1 < len(s):
				i += 2
				if !delimited(s[i-1]) {
					return true
				}
				skip("IM")
			default:
				skip("0123456789$~+")
			}
			skip(" \t")
			if i < len(s) && s[i] == ',' {
				i++
				skip(" \t")
				if i >= len(s) {
					return true
				}
				continue
			}
			break
		}
		skip(" \t!")
		if i >= len(s) {
			return true
		}
		c := s[i]
		i++
		switch c {
		case '{':
			continue // a command may follow at once
		case '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'q', 'Q', 'l', 'L':
			skip(" \t0123456789")
		case '#', 'r', 'R', 'w', 'W':
			start := i
			toEOL() // a comment or a file name
			if c == 'w' || c == 'W' {
				wrote(strings.TrimLeft(s[start:i], " \t"))
			}
			continue
		case 'a', 'i', 'c':
			// Text to the end of the line; a line ending in a backslash
			// goes on.
			for toEOL(); i < len(s) && s[i-1] == '\\'; toEOL() {
				i++
			}
			continue
		case ':', 'b', 't', 'T', 'v':
			for i < len(s) && s[i] != '\n' && s[i] != ';' {
				i++
			}
			continue
		case 's', 'y':
			if i >= len(s) || s[i] == '\\' || s[i] == '\n' {
				return true
			}
			d := s[i]
			i++
			for range 2 { // the pattern, then the replacement
				if !delimited(d) {
					return true
				}
			}
			if c == 's' {
				for i < len(s) && strings.IndexByte("gpiImM0123456789", s[i]) >= 0 {
					i++
				}
				if i < len(s) && s[i] == 'w' {
					start := i + 1
					toEOL()
					wrote(strings.TrimLeft(s[start:i], " \t"))
					continue
				}
			}
		default:
			return true // e, or a command this reading does not know
		}
		skip(" \t")
		if i < len(s) && strings.IndexByte(";\n}#", s[i]) < 0 {
			return true // the e flag, or text sed would refuse
		}
	}
}

// programName returns base (a command's base name) as the program it
// runs where the spelling does not matter: in lower case, as macOS's and
// Windows's usual file systems find TAR as tar, and without a ".exe"
// suffix (tar.exe in Git Bash) or a ".cmd" or ".bat" one (npm.cmd,
// npx.cmd: Node's Windows shims; branch attack47); Debian's vim.basic,
// vim.tiny and kin as vim (branch policy45b).
func programName(base string) string {
	n := strings.ToLower(base)
	n = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, ".exe"), ".cmd"), ".bat")
	if v, _, ok := strings.Cut(n, "."); ok && isVim(v) {
		return v
	}
	return n
}

// sedLong reports whether opt (a word's text before '=') is sed's long
// option name or an abbreviation of it ("--in" for "--in-place", "--exp"
// for "--expression"); an ambiguous one ("--f" for --file or
// --follow-symlinks) counts, which at worst reads a word as a script.
func sedLong(opt, name string) bool {
	return len(opt) >= 3 && strings.HasPrefix(name, opt)
}

// backupName returns the backup sed -i, cp -b and kin make of f with
// suffix: f+suffix, or, when suffix holds a *, suffix with each *
// replaced by f's base name, in f's directory unless it is absolute (GNU
// sed's -i'bak/*').
func backupName(f, suffix string) string {
	if !strings.Contains(suffix, "*") {
		return f + suffix
	}
	b := strings.ReplaceAll(suffix, "*", path.Base(f))
	if strings.HasPrefix(b, "/") || strings.HasPrefix(b, "~") {
		return b
	}
	return path.Join(path.Dir(f), b)
}
