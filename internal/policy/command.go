package policy

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// CommandMatch is a rule's shell-aware command selector: the string
// argument named Argument is parsed as a shell command (bash syntax,
// mvdan.cc/sh/v3) and its simple commands are matched against Match.
//
// A pattern is a list of words separated by spaces. The first word matches
// the command name and each further word one argument, each word as a glob
// ([Match]: '*' and '?' do not cross into the next argument). A last word
// that is exactly "*" matches any number of further arguments, none
// included: "git log *" matches "git log" and "git log -1 --oneline".
//
// For an allow rule the selector holds only when the command is provably
// a list of plain simple commands (joined by ;, &&, ||, | or newlines)
// each matching some pattern; docs/policy.md lists what is refused. For
// a deny or approve rule it holds when any simple command anywhere in the
// command (in substitutions, subshells, functions, after a wrapper such as
// sudo or xargs) matches a pattern, or when the command runs code the
// matcher cannot see (a shell, eval, source, an unparsable string).
// docs/policy.md states the guarantee in full.
type CommandMatch struct {
	// Argument is the name of a top-level string argument of the tool.
	Argument string `yaml:"argument" json:"argument"`
	// Match lists the patterns; at least one.
	Match []string `yaml:"match" json:"match"`
}

// MaxCommandLength is the longest command string the matcher parses, in
// bytes; a longer one is an error (never allowed).
const MaxCommandLength = 64 << 10

// commandPattern is a compiled pattern: one glob per word, and whether a
// trailing "*" takes the rest.
type commandPattern struct {
	src   string
	words []glob
	rest  bool
}

func compileCommandPattern(src string) (commandPattern, error) {
	fields := strings.Fields(src)
	if len(fields) == 0 {
		return commandPattern{}, errors.New("empty pattern")
	}
	p := commandPattern{src: src}
	if len(fields) > 1 && fields[len(fields)-1] == "*" {
		p.rest = true
		fields = fields[:len(fields)-1]
	}
	for _, f := range fields {
		g, err := compileGlob(f)
		if err != nil {
			return commandPattern{}, err
		}
		p.words = append(p.words, g)
	}
	return p, nil
}

// match reports whether the words of a simple command match p. A word
// that is not literal (only deny and approve rules see them) may expand to
// any number of words, so it matches whatever the pattern still wants.
// With base set, the command name also matches by its base name (/bin/rm
// as rm).
func (p *commandPattern) match(words []cmdWord, base bool) bool {
	for i, g := range p.words {
		if i >= len(words) {
			return false
		}
		w := words[i]
		if w.unknown {
			return true
		}
		if g.match(w.lit) {
			continue
		}
		if i == 0 && base && strings.Contains(w.lit, "/") && g.match(path.Base(w.lit)) {
			continue
		}
		return false
	}
	if len(words) > len(p.words) && !p.rest {
		return slices.ContainsFunc(words[len(p.words):], func(w cmdWord) bool { return w.unknown })
	}
	return true
}

// commandMatcher is a compiled CommandMatch.
type commandMatcher struct {
	argument string
	patterns []commandPattern
}

// compileCommand compiles m; errs lists every problem, each starting with
// the key it is about ("argument: ...", "match[1] ...").
func compileCommand(m *CommandMatch) (*commandMatcher, []error) {
	var errs []error
	if strings.TrimSpace(m.Argument) == "" {
		errs = append(errs, errors.New("argument: required (the name of the tool's string argument that holds the command)"))
	}
	if len(m.Match) == 0 {
		errs = append(errs, errors.New("match: at least one pattern is required"))
	}
	cm := &commandMatcher{argument: m.Argument}
	for k, s := range m.Match {
		p, err := compileCommandPattern(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("match[%d] %q: %w", k, s, err))
			continue
		}
		cm.patterns = append(cm.patterns, p)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return cm, nil
}

// cmdWord is one word of a simple command: its literal value after quote
// removal, or unknown when it holds an expansion; then tail is the literal
// text after the last expansion ("/.bashrc" of "$HOME/.bashrc").
type cmdWord struct {
	lit     string
	unknown bool
	tail    string
}

// parsedCommand is what the matcher learned from one command string.
type parsedCommand struct {
	// Simple lists every simple command found anywhere, in source order.
	Simple [][]cmdWord
	// Unsafe says why the command can never be allowed by a command rule
	// (the first reason found); "" when it is a plain list of literal
	// simple commands.
	Unsafe string
	// Opaque says why the command may run commands the matcher cannot see
	// (a shell, eval, a non-literal command name, a parse error); "" when
	// every command it can run is in Simple.
	Opaque string
	// allowed, when not nil, is what an allow rule matches instead of
	// Simple: an ssh invocation there is its remote simple commands after
	// ssh's words (commandremote.go).
	allowed [][]cmdWord
}

// markUnsafe records why an allow rule may not allow the command, unless
// a reason is recorded already (the first one found is kept).
func (pc *parsedCommand) markUnsafe(why string) {
	if pc.Unsafe == "" {
		pc.Unsafe = why
	}
}

// markOpaque records why the command runs code the matcher cannot read
// (the first reason found is kept); an opaque command is unsafe too.
func (pc *parsedCommand) markOpaque(why string) {
	if pc.Opaque == "" {
		pc.Opaque = why
	}
	pc.markUnsafe(why)
}

// isShellLike reports whether name (a base name) is a program or builtin
// that runs code given to it as a string or file, which the matcher cannot
// read: an allow rule never allows it and a deny or approve rule treats it
// as matching. Besides shells and eval-like builtins, bash builtins that
// run a string or make a name run another program count: "hash -p /bin/rm
// ls" makes a later "ls" run rm, "enable -f" loads a builtin from a
// shared object, "compgen -C", "complete -C", "mapfile -C" and "readarray
// -C" run a command string (in a non-interactive shell too); sg runs its
// command string through /bin/sh, as "su -c" and "runuser -c" do (and su
// and runuser without a command run a shell reading their input).
func isShellLike(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish", "csh", "tcsh", "busybox", "toybox", "rbash",
		"eval", "source", ".", "trap", "alias", "su", "sg", "watch", "script", "parallel",
		"hash", "enable", "compgen", "complete", "mapfile", "readarray", "runuser",
		"pwsh", "powershell", "pwsh.exe", "powershell.exe", "cmd.exe", "nu", "xonsh", "elvish", "osh", "ysh", "mosh",
		// Programs that run their words as a shell command line (branch
		// attack48): parallel's sem, hyperfine, concurrently, watchexec,
		// nix-shell (--run, or a shell reading the input).
		"sem", "hyperfine", "concurrently", "watchexec", "nix-shell":
		return true
	}
	return false
}

// isWrapper reports whether name (a base name) runs its arguments as a
// command: a deny or approve rule also matches the command in any suffix of
// its arguments.
func isWrapper(name string) bool {
	switch name {
	case "sudo", "doas", "env", "nice", "nohup", "timeout", "time", "command", "builtin", "exec",
		"xargs", "find", "stdbuf", "setsid", "ionice", "taskset", "flock", "chrt", "unbuffer", "strace", "ltrace", "chroot",
		"runuser", "pkexec", "setpriv", "unshare", "nsenter", "fakeroot", "firejail", "systemd-run", "numactl", "caffeinate",
		"setarch", "linux32", "linux64", "prlimit", "eatmydata", "faketime", "gosu", "su-exec", "chpst", "valgrind", "catchsegv",
		"tini", "dumb-init", "sshpass",
		// (branch attack48)
		"entr", "chronic", "ifne", "torsocks", "proxychains", "proxychains4", "xvfb-run", "dbus-run-session", "ssh-agent",
		"mpirun", "mpiexec", "srun", "retry", "env-cmd", "cross-env", "dotenv", "with-contenv", "s6-setuidgid", "authbind",
		"trickle", "nocache", "rlwrap", "unbuffer-run", "daemonize", "start-stop-daemon", "sudo-rs", "run0",
		"gfind", "bfs", "gxargs": // find and xargs by other names (commandAliases; review49b)
		return true
	}
	return false
}

// parseCommand parses src as a bash command. Besides the simple commands
// it records why the command is Unsafe for an allow rule:
//
//   - it does not parse, or is longer than MaxCommandLength;
//   - a command or process substitution, a parameter or arithmetic
//     expansion, an extended glob, a brace expansion, an unquoted '*', '?'
//     or '[' (pathname expansion), or a $'...' string anywhere;
//   - a here-document or here-string, or a redirection other than a file
//     descriptor duplication (2>&1, >&-) or to or from /dev/null;
//   - a background job (&), a coprocess, a negation (!), a variable
//     assignment (FOO=1 cmd);
//   - a subshell, a { } block, if, while, until, for, case, select, a
//     function definition, [[ ]], (( )), let, declare, export, time;
//   - a command named after a shell or an eval-like builtin (isShellLike:
//     bash, sh -c, eval, source, trap, ...), by name or path.
//
// and why it is Opaque (deny and approve rules then match): it does not
// parse, a command name is not literal, or an isShellLike command appears
// anywhere (also as the command a wrapper such as sudo or xargs runs).
func parseCommand(src string) parsedCommand {
	return parseCommandDepth(src, 0)
}

// parseCommandDepth is parseCommand for a string found depth levels deep
// in ssh's remote commands (commandremote.go).
func parseCommandDepth(src string, depth int) parsedCommand {
	var pc parsedCommand
	if len(src) > MaxCommandLength {
		pc.Unsafe = fmt.Sprintf("the command is longer than %d bytes", MaxCommandLength)
		pc.Opaque = pc.Unsafe
		return pc
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		pc.Unsafe = "the command does not parse as shell"
		pc.Opaque = pc.Unsafe
		return pc
	}
	unsafe, opaque := pc.markUnsafe, pc.markOpaque
	// The structure an allow rule accepts: lists of simple commands.
	for _, st := range f.Stmts {
		checkStmt(st, unsafe)
	}
	// Every simple command anywhere, and everything that cannot be
	// literal, for all rules.
	// What the walk learns, in one variable: the closure below moves
	// each variable it assigns to the heap, one allocation apiece.
	var seen struct {
		evaluates, sets, prompt bool                          // commandsubscript.go
		fedFound                map[*syntax.CallExpr][]string // find -print0 | xargs -0 (commandfindnames.go)
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		seen.evaluates = seen.evaluates || evaluatesText(n)
		seen.sets = seen.sets || setsText(n)
		seen.prompt = seen.prompt || expandsPrompt(n)
		switch n := n.(type) {
		case *syntax.CallExpr:
			if len(n.Assigns) > 0 {
				unsafe("a variable assignment")
			}
			if len(n.Args) == 0 {
				return true
			}
			words := make([]cmdWord, len(n.Args))
			for i, w := range n.Args {
				words[i] = literalWord(w, unsafe)
			}
			if k := sshAt(words); k >= 0 {
				pc.addSSH(words, k, depth, unsafe, opaque)
			} else {
				pc.appendSimple(words)
				pc.addRunInner(words)
				if k, s := runnerAt(words); s > 0 {
					pc.addRunner(words[k:], s-k, depth, unsafe, opaque)
				}
				if k := commandAt(words, "go"); k >= 0 {
					pc.addGoCommands(words[k:], depth, unsafe, opaque)
				}
			}
			pc.checkEnvWords(words, depth, unsafe, opaque)
			if k := makeAt(words); k >= 0 {
				pc.addMakeVars(words[k:], depth, unsafe, opaque)
			}
			if k := commandAt(words, "rsync"); k >= 0 {
				pc.addRsync(words[k:], depth, unsafe, opaque)
			}
			checkRunner(words, opaque)
			checkRunInnerDepth(words, 0, seen.fedFound[n], opaque)
			checkNames(words, n.Args, unsafe, opaque)
		case *syntax.BinaryCmd:
			seen.fedFound = xargsFedFound(n, seen.fedFound)
		case *syntax.Assign:
			pc.checkAssign(n, depth, unsafe, opaque)
		case *syntax.WordIter:
			if envVar(n.Name.Value) != envPlain {
				opaque(fmt.Sprintf("a loop sets %s, which may make a program run code", n.Name.Value))
			}
		case *syntax.CmdSubst:
			unsafe("a command substitution")
		case *syntax.ProcSubst:
			unsafe("a process substitution")
		case *syntax.ParamExp:
			unsafe("a parameter expansion")
		case *syntax.ArithmExp:
			unsafe("an arithmetic expansion")
		case *syntax.ExtGlob:
			unsafe("an extended glob")
		case *syntax.Redirect:
			if why := redirectWritesCode(n); why != "" {
				opaque(why)
			}
			if n.Hdoc != nil || n.Op == syntax.Hdoc || n.Op == syntax.DashHdoc || n.Op == syntax.WordHdoc {
				unsafe("a here-document")
			} else if !harmlessRedirect(n) {
				unsafe("a redirection to or from a file")
			}
		}
		return true
	})
	checkFedEditors(src, f, opaque) // commandstdin.go
	switch {
	case seen.prompt:
		opaque("PS4 or ${x@P}: bash expands the text as a prompt, command substitutions included")
	case seen.evaluates && seen.sets:
		opaque("text bash evaluates as an arithmetic expression or variable name may hold an array subscript it runs as code")
	}
	return pc
}

// checkStmt reports structure an allow rule refuses in st.
func checkStmt(st *syntax.Stmt, unsafe func(string)) {
	switch {
	case st.Background || st.Disown:
		unsafe("a background job")
	case st.Coprocess:
		unsafe("a coprocess")
	case st.Negated:
		unsafe("a negated command")
	}
	switch c := st.Cmd.(type) {
	case nil:
		// A statement of redirections only: judged by the walk.
	case *syntax.CallExpr:
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe, syntax.PipeAll:
			checkStmt(c.X, unsafe)
			checkStmt(c.Y, unsafe)
		default:
			unsafe("an operator " + c.Op.String())
		}
	case *syntax.Subshell:
		unsafe("a subshell")
	case *syntax.Block:
		unsafe("a { } block")
	case *syntax.FuncDecl:
		unsafe("a function definition")
	case *syntax.CoprocClause:
		unsafe("a coprocess")
	default:
		unsafe(fmt.Sprintf("a compound command (%s)", commandKind(c)))
	}
}

func commandKind(c syntax.Command) string {
	switch c.(type) {
	case *syntax.IfClause:
		return "if"
	case *syntax.WhileClause:
		return "while"
	case *syntax.ForClause:
		return "for"
	case *syntax.CaseClause:
		return "case"
	case *syntax.ArithmCmd:
		return "(( ))"
	case *syntax.TestClause:
		return "[[ ]]"
	case *syntax.DeclClause:
		return "declare"
	case *syntax.LetClause:
		return "let"
	case *syntax.TimeClause:
		return "time"
	case *syntax.TestDecl:
		return "@test"
	}
	return fmt.Sprintf("%T", c)
}

// checkRunner reports a simple command that runs code the matcher cannot
// see: a non-literal command name, or an isShellLike command as the name or,
// after a wrapper, as any later word.
func checkRunner(words []cmdWord, opaque func(string)) {
	name := words[0]
	if name.unknown {
		opaque("a command name that is not literal")
		return
	}
	base := path.Base(name.lit)
	if isShellLike(base) {
		opaque(fmt.Sprintf("%q runs code the matcher cannot read", base))
		return
	}
	if why := inlineCode(words); why != "" {
		opaque(why)
		return
	}
	start := wrapperStart(words)
	if start == 0 {
		return
	}
	envOptions := base == "env" // env's own options: up to its command
	for i := start; i < len(words); i++ {
		w := words[i]
		if envOptions && envSplit(w.lit) {
			opaque(`"env -S" runs a command line the matcher cannot read`)
			return
		}
		if w.unknown {
			opaque(fmt.Sprintf("%q runs a command that is not literal", base))
			return
		}
		switch {
		case !envOptions:
		case w.lit == "-u" || w.lit == "-C" || w.lit == "--unset" || w.lit == "--chdir":
			i++ // its value
			continue
		case !strings.HasPrefix(w.lit, "-") && !strings.Contains(w.lit, "="):
			envOptions = false
		}
		if b := path.Base(w.lit); isShellLike(b) && (b != "." || !runsPrograms(base)) {
			opaque(fmt.Sprintf("%q runs %q, which runs code the matcher cannot read", base, b))
			return
		}
		if why := inlineCode(words[i:]); why != "" {
			opaque(fmt.Sprintf("%q runs %s", base, why))
			return
		}
	}
}

// wrapperStart returns the index in words from which a wrapper's
// arguments may be the command it runs: 1 for isWrapper, after the
// subcommand for a package runner (npx, npm exec: runnerStart); 0 for any
// other command.
func wrapperStart(words []cmdWord) int {
	if words[0].unknown {
		return 0
	}
	if isWrapper(path.Base(words[0].lit)) {
		return 1
	}
	return runnerStart(words)
}

// envSplit reports whether w is env's -S/--split-string: alone, in a
// cluster of short options (-iS 'rm x', before a letter that takes the
// rest as its value) or abbreviated as getopt_long takes it (--s).
func envSplit(w string) bool {
	opt, _, _ := strings.Cut(w, "=")
	if strings.HasPrefix(w, "--") {
		return longOption(opt, "--split-string")
	}
	if k := strings.IndexAny(w, "SCu"); strings.HasPrefix(w, "-") && k > 0 {
		return w[k] == 'S'
	}
	return false
}

// runsPrograms reports whether the wrapper name (a base name) runs only
// programs, never a shell builtin: "." among its words (find . -name x)
// is then a directory, not bash's "." builtin. command, builtin and exec
// run builtins too.
func runsPrograms(name string) bool {
	return name != "command" && name != "builtin" && name != "exec"
}

// harmlessRedirect reports whether r neither reads nor writes a file: a
// file descriptor duplication or closing (2>&1, <&0, >&-), or a plain
// redirection to or from /dev/null.
func harmlessRedirect(r *syntax.Redirect) bool {
	if r.N != nil && !isDigits(r.N.Value) {
		return false // {varname}> allocates a descriptor into a variable
	}
	target, ok := plainLiteral(r.Word)
	if !ok {
		return false
	}
	switch r.Op {
	case syntax.DplIn, syntax.DplOut:
		return target == "-" || isDigits(target)
	case syntax.RdrOut, syntax.AppOut, syntax.RdrIn, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
		return target == "/dev/null"
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// plainLiteral returns the value of w when it is literal (quotes removed).
func plainLiteral(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	cw := literalWord(w, func(string) {})
	return cw.lit, !cw.unknown
}

// literalWord returns the value of w after quote removal, or an unknown
// word when w holds an expansion. It reports through unsafe what an allow
// rule refuses: expansions, unquoted glob characters, brace expansions and
// $'...' strings.
func literalWord(w *syntax.Word, unsafe func(string)) cmdWord {
	var b strings.Builder
	unknown := false
	tail := 0 // where the text after the last expansion starts in b
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v, glob := unquotedLiteral(p.Value)
			if glob {
				unsafe("an unquoted '*', '?' or '[' (pathname expansion)")
			}
			b.WriteString(v)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
			if p.Dollar {
				unsafe("a $'...' string")
				unknown, tail = true, b.Len()
			}
		case *syntax.DblQuoted:
			if p.Dollar {
				unsafe(`a $"..." string`)
				unknown, tail = true, b.Len()
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					unknown, tail = true, b.Len() // an expansion; the walk reports it
					continue
				}
				b.WriteString(quotedLiteral(l.Value))
			}
		default:
			unknown, tail = true, b.Len() // an expansion; the walk reports it
		}
	}
	if hasBraceExpansion(w) {
		unsafe("a brace expansion")
		unknown = true
	}
	if unknown {
		return cmdWord{unknown: true, tail: b.String()[tail:]}
	}
	return cmdWord{lit: b.String()}
}

// hasBraceExpansion reports whether bash would brace-expand w ({a,b},
// {1..3}).
func hasBraceExpansion(w *syntax.Word) bool {
	if !slices.ContainsFunc(w.Parts, func(p syntax.WordPart) bool {
		l, ok := p.(*syntax.Lit)
		return ok && strings.Contains(l.Value, "{")
	}) {
		return false
	}
	c := &syntax.Word{Parts: slices.Clone(w.Parts)}
	if !syntax.SplitBraces(c) {
		return false
	}
	found := false
	syntax.Walk(c, func(n syntax.Node) bool {
		if _, ok := n.(*syntax.BraceExp); ok {
			found = true
		}
		return !found
	})
	return found
}

// unquotedLiteral removes the backslash escapes of an unquoted literal
// ("\x" is x, a backslash-newline disappears) and reports an unescaped
// pathname-expansion character.
func unquotedLiteral(s string) (string, bool) {
	if !strings.ContainsAny(s, `\*?[`) {
		return s, false
	}
	var b strings.Builder
	glob := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
			continue
		case c == '*' || c == '?' || c == '[':
			glob = true
		}
		b.WriteByte(c)
	}
	return b.String(), glob
}

// quotedLiteral removes the escapes a double-quoted literal allows: \$, \`,
// \", \\ and backslash-newline; other backslashes stay.
func quotedLiteral(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				b.WriteByte(s[i+1])
				i++
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// verdict is the outcome of a command selector for one call.
type verdict struct {
	match bool
	// why says, for explain, what decided.
	why string
	// unseen is set on a match that holds only because the matcher cannot
	// read the whole command (parsedCommand.Opaque): no simple command it
	// read matches a pattern.
	unseen bool
}

// allows reports whether an allow rule's selector holds for pc: nothing
// unsafe and every simple command matches a pattern.
func (m *commandMatcher) allows(pc *parsedCommand) verdict {
	if pc.Unsafe != "" {
		return verdict{why: "never allowed by a command rule: " + pc.Unsafe}
	}
	list := pc.allowList()
	if len(list) == 0 {
		return verdict{why: "the command has no simple command"}
	}
	for _, words := range list {
		if m.first(words, false) < 0 {
			return verdict{why: fmt.Sprintf("simple command %q matches no pattern", joinWords(words))}
		}
	}
	return verdict{match: true, why: fmt.Sprintf("each of its %d simple command(s) matches a pattern", len(list))}
}

// catches reports whether a deny or approve rule's selector holds for pc:
// some simple command (or the command a wrapper runs) matches a pattern,
// or the command is opaque. A simple command that matches is named first,
// also in an opaque command, so that explain and the agent's denial name
// what was seen (`cp -r x/. ~ && rm -rf /` matches "rm *"; newuser46).
func (m *commandMatcher) catches(pc *parsedCommand) verdict {
	for _, words := range pc.Simple {
		if k := m.first(words, true); k >= 0 {
			return verdict{match: true, why: fmt.Sprintf("simple command %q matches pattern %q", joinWords(words), m.patterns[k].src)}
		}
		if s := wrapperStart(words); s > 0 {
			for i := s; i < len(words); i++ {
				if k := m.first(words[i:], true); k >= 0 {
					return verdict{match: true, why: fmt.Sprintf("%q runs %q, which matches pattern %q", words[0].lit, joinWords(words[i:]), m.patterns[k].src)}
				}
			}
		}
	}
	if pc.Opaque != "" {
		return verdict{match: true, unseen: true, why: "the matcher cannot see every command it runs: " + pc.Opaque}
	}
	return verdict{why: "no simple command matches a pattern"}
}

// first returns the index of the first pattern matching words, or -1.
func (m *commandMatcher) first(words []cmdWord, base bool) int {
	for k := range m.patterns {
		if m.patterns[k].match(words, base) {
			return k
		}
	}
	return -1
}

func joinWords(words []cmdWord) string {
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = w.lit
		if w.unknown {
			parts[i] = "<expansion>"
		}
	}
	return strings.Join(parts, " ")
}
