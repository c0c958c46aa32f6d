package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Keystrokes into an editor (branch policy49b). A program that may start
// an interactive editor (git commit without -m, git rebase -i, git add
// -p, crontab -e, visudo, …) starts vi by default, and vi reads
// keystrokes from its input when that is not a terminal: "printf
// ':!rm -rf ~\n:q!\n' | git commit --allow-empty" ran rm. The input the
// matcher sees is a pipe or a redirection; so such a program whose input
// comes from a pipe (cmd | git commit, also |&), a here-document or
// here-string, or a redirection from anything but /dev/null (< file, <
// <(cmd), 0<&3, exec < file before it) is opaque: deny and approve rules
// match it, an allow rule never allows it. With its message given (git
// commit -m x, -F FILE, -F -, -C REV, --no-edit) it starts no editor and
// is read as before. EDITOR, VISUAL, GIT_EDITOR and git -c core.editor
// are opaque already (commandenv.go, gitKeySafe).

// checkFedEditors marks opaque each simple command of f whose input is fed
// by the command string (a pipe or a redirection) and that may start an
// editor reading it (editorCode), also as the command a wrapper runs. A
// function's body, a coprocess and a >(…) substitution count as fed:
// their input is what the call, or the shell's writes, give them.
//
// src is the command's text: one without '|', '<', '(', "coproc" or
// "function" has no pipe, input redirection, substitution, coprocess or
// function, and is not walked (no allocation on the common path).
func checkFedEditors(src string, f *syntax.File, opaque func(string)) {
	if !strings.ContainsAny(src, "|<(") && !strings.Contains(src, "coproc") && !strings.Contains(src, "function") {
		return
	}
	all := false // exec < file feeds every later command
	syntax.Walk(f, func(n syntax.Node) bool { return visitFed(n, &all, opaque) })
}

// visitFed is checkFedEditors's walk: it checks what a node feeds and
// reports whether to walk into it. all is set from an exec < file on.
func visitFed(n syntax.Node, all *bool, opaque func(string)) bool {
	switch n := n.(type) {
	case *syntax.CoprocClause:
		// The shell writes to a coprocess's input (>&"${COPROC[1]}").
		checkEditorsIn(n.Stmt, opaque)
		return false
	case *syntax.ProcSubst:
		if n.Op == syntax.CmdOut { // >(cmd): the outer command writes its input
			for _, st := range n.Stmts {
				checkEditorsIn(st, opaque)
			}
			return false
		}
	case *syntax.FuncDecl:
		// A function's body runs with the input of the call naming it
		// (printf … | f): read as fed wherever it is called.
		checkEditorsIn(n.Body, opaque)
		return false
	}
	st, ok := n.(*syntax.Stmt)
	if !ok {
		return true
	}
	fed := fedRedirect(st)
	if call, ok := st.Cmd.(*syntax.CallExpr); fed && (st.Cmd == nil || ok && (len(call.Args) == 0 ||
		len(call.Args) == 1 && call.Args[0].Lit() == "exec")) {
		*all = true
	}
	if *all || fed {
		checkEditorsIn(st, opaque)
		return false
	}
	if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) {
		syntax.Walk(b.X, func(m syntax.Node) bool { return visitFed(m, all, opaque) })
		checkEditorsIn(b.Y, opaque)
		return false
	}
	return true
}

// fedRedirect reports whether st's input comes from the command string:
// a here-document or here-string, or an input redirection from anything
// but /dev/null or a duplication of descriptor 0 (<&0) or a closing
// (<&-).
func fedRedirect(st *syntax.Stmt) bool {
	for _, r := range st.Redirs {
		if r.N != nil && r.N.Value != "0" {
			continue // 2< x feeds another descriptor
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc, syntax.RdrInOut:
			return true
		case syntax.RdrIn:
			if t, ok := plainLiteral(r.Word); !ok || t != "/dev/null" {
				return true
			}
		case syntax.DplIn:
			if t, ok := plainLiteral(r.Word); !ok || t != "0" && t != "-" {
				return true
			}
		}
	}
	return false
}

// checkEditorsIn marks opaque the first simple command within n that may
// start an editor (editorCode), by name or after a wrapper.
func checkEditorsIn(n syntax.Node, opaque func(string)) {
	syntax.Walk(n, func(m syntax.Node) bool {
		call, ok := m.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		words := make([]cmdWord, len(call.Args))
		for i, w := range call.Args {
			words[i] = literalWord(w, func(string) {})
		}
		if why := fedEditor(words); why != "" {
			opaque(why + ", and its input comes from the command string (a pipe or a redirection): an editor reads it as keystrokes the matcher cannot read")
			return false
		}
		if why := fedExec(words); why != "" { // docker exec -i (commandexecstdin.go)
			opaque(why)
			return false
		}
		if k := sshAt(words); k >= 0 {
			// ssh passes its input to the remote command.
			if sc := parseSSH(words[k:], 0); sc.remote != nil {
				for _, r := range sc.remote.Simple {
					if why := fedEditor(r); why != "" {
						opaque("ssh's remote " + why + ", and ssh's input comes from the command string: an editor reads it as keystrokes the matcher cannot read")
						return false
					}
				}
			}
		}
		return true
	})
}

// fedEditor says why words may start an editor (editorCode), by name or
// as the command a wrapper runs, or "".
func fedEditor(words []cmdWord) string {
	start := wrapperStart(words)
	for i := range words {
		if i > 0 && (start == 0 || i < start) {
			continue
		}
		if why := editorCode(words[i:]); why != "" {
			return why
		}
	}
	return ""
}

// editorCode says why the program words[0] may start an interactive
// editor (or an interactive patch editor) that reads its input, or "".
// A word that is not literal may be an option that starts one.
func editorCode(words []cmdWord) string {
	if words[0].unknown {
		return ""
	}
	name := programName(path.Base(words[0].lit))
	opts := readOptions(words[1:], "")
	switch name {
	case "git":
		return gitEditorCode(words)
	case "visudo", "vipw", "vigr", "sudoedit", "edquota", "fc", "vidir", "vipe":
		return fmt.Sprintf("%q starts an editor", name)
	case "crontab":
		if opts.unknown || opts.short("e") {
			return "crontab -e starts an editor"
		}
	case "sudo", "sudo-rs":
		if opts.unknown || opts.short("e") || opts.long("--edit") {
			return "sudo -e starts an editor"
		}
	case "systemctl", "kubectl", "oc", "virsh":
		if opts.unknown || contains(opts.positional, "edit") || opts.long("--edit") {
			return fmt.Sprintf("%s edit starts an editor", name)
		}
	case "svn", "hg":
		// svn commit and hg commit start an editor without a message.
		vals := map[string]string{"svn": "F", "hg": "lmIXu"}[name]
		opts = readOptions(words[1:], vals)
		if opts.unknown || len(opts.positional) > 0 && contains([]string{"commit", "ci", "import", "propedit", "pe", "histedit",
			"record", "crecord", "amend"}, opts.positional[0]) && !opts.short("mFl") && !opts.long("--message", "--file", "--logfile") {
			return fmt.Sprintf("%s %s starts an editor without a message", name, strings.Join(opts.positional[:min(1, len(opts.positional))], ""))
		}
	}
	return ""
}

// cmdOptions is what readOptions found in a program's words.
type cmdOptions struct {
	shorts     string   // every short option letter
	longs      []string // every long option, before '='
	values     map[string]string
	positional []string
	unknown    bool // a word is not literal
}

// short reports whether any of letters was given as a short option.
func (o *cmdOptions) short(letters string) bool { return strings.ContainsAny(o.shorts, letters) }

// long reports whether one of names, or an abbreviation of it, was given.
func (o *cmdOptions) long(names ...string) bool {
	for _, l := range o.longs {
		if longOption(l, names...) {
			return true
		}
	}
	return false
}

// readOptions reads words (after the program or subcommand name): short
// option clusters, the letters in valued taking a value (the rest of the
// cluster or the next word), long options (a value only after '='),
// positionals, and "--" ending the options. A long option in valuedLong
// without '=' takes the next word as its value.
func readOptions(words []cmdWord, valued string, valuedLong ...string) cmdOptions {
	o := cmdOptions{values: map[string]string{}}
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w.unknown:
			o.unknown = true
		case w.lit == "--":
			for _, p := range words[i+1:] {
				o.positional = append(o.positional, p.lit)
				o.unknown = o.unknown || p.unknown
			}
			return o
		case strings.HasPrefix(w.lit, "--"):
			opt, val, hasVal := strings.Cut(w.lit, "=")
			o.longs = append(o.longs, opt)
			if !hasVal && contains(valuedLong, opt) && i+1 < len(words) {
				i++
				val = words[i].lit
				o.unknown = o.unknown || words[i].unknown
			}
			o.values[opt] = val
		case strings.HasPrefix(w.lit, "-") && w.lit != "-":
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				o.shorts += string(c)
				if strings.IndexByte(valued, c) < 0 {
					continue
				}
				v := w.lit[j+1:]
				if v == "" && i+1 < len(words) {
					i++
					v = words[i].lit
					o.unknown = o.unknown || words[i].unknown
				}
				o.values["-"+string(c)] = v
				break
			}
		default:
			o.positional = append(o.positional, w.lit)
		}
	}
	return o
}

// gitEditor describes a git subcommand that may start an editor: always
// unless a message option is given (message), or only when an option
// forcing one is given (forces); short letters and long options (exact
// names; an abbreviation counts as the option that forces) of each, and
// the options that take a value.
type gitEditor struct {
	message       bool
	msgShort      string
	msgLong       []string
	forceShort    string
	forceLong     []string
	valued        string
	valuedLong    []string
	forcePositive []string // positionals (git notes edit, git config edit)
}

// gitEditors lists git's subcommands that may start an editor or an
// interactive patch editor (add -p's "e") reading git's input.
var gitEditors = map[string]gitEditor{
	"commit": {message: true, msgShort: "mFC", msgLong: []string{"--message", "--file", "--reuse-message", "--no-edit"},
		forceShort: "ecp", forceLong: []string{"--edit", "--reedit-message", "--interactive", "--patch"},
		valued: "mFCct", valuedLong: []string{"--message", "--file", "--reuse-message", "--reedit-message", "--template",
			"--author", "--date", "--cleanup", "--fixup", "--squash", "--trailer", "--pathspec-from-file"}},
	"tag": {message: true, msgShort: "mFldv", msgLong: []string{"--message", "--file", "--list", "--delete", "--verify"},
		forceShort: "e", forceLong: []string{"--edit"}, valued: "mFu",
		valuedLong: []string{"--message", "--file", "--local-user", "--cleanup", "--contains", "--points-at", "--sort", "--format"}},
	"merge": {message: true, msgLong: []string{"--no-edit", "--ff-only", "--abort", "--quit", "--no-commit", "--squash"}, forceShort: "e", forceLong: []string{"--edit", "--continue"}, valued: "mFsX",
		valuedLong: []string{"--message", "--file", "--strategy", "--strategy-option", "--cleanup", "--into-name"}},
	"pull": {message: true, msgLong: []string{"--no-edit", "--ff-only", "--no-commit", "--squash"},
		forceShort: "e", forceLong: []string{"--edit", "--rebase", "--interactive"}, valued: "sX",
		valuedLong: []string{"--strategy", "--strategy-option", "--depth", "--upload-pack", "--recurse-submodules"}},
	"revert": {message: true, msgShort: "n", msgLong: []string{"--no-edit", "--no-commit", "--abort", "--quit", "--skip"},
		forceShort: "e", forceLong: []string{"--edit"}, valued: "mX", valuedLong: []string{"--mainline", "--strategy", "--strategy-option"}},
	"notes": {message: true, msgShort: "mFCl", msgLong: []string{"--message", "--file", "--reuse-message", "--list"},
		forceShort: "ce", forceLong: []string{"--edit", "--reedit-message"}, valued: "mFCc",
		valuedLong:    []string{"--message", "--file", "--reuse-message", "--reedit-message", "--ref"},
		forcePositive: []string{"edit"}},
	"cherry-pick": {forceShort: "e", forceLong: []string{"--edit", "--continue"}, valued: "mX",
		valuedLong: []string{"--mainline", "--strategy", "--strategy-option"}},
	"rebase": {forceShort: "i", forceLong: []string{"--interactive", "--edit-todo", "--continue"}, valued: "sXC",
		valuedLong: []string{"--onto", "--strategy", "--strategy-option", "--exec"}},
	"add":             {forceShort: "epi", forceLong: []string{"--edit", "--patch", "--interactive"}},
	"checkout":        {forceShort: "p", forceLong: []string{"--patch"}, valued: "bB"},
	"reset":           {forceShort: "p", forceLong: []string{"--patch"}},
	"restore":         {forceShort: "p", forceLong: []string{"--patch"}, valued: "s", valuedLong: []string{"--source"}},
	"stash":           {forceShort: "p", forceLong: []string{"--patch"}, valued: "m", valuedLong: []string{"--message"}},
	"branch":          {forceLong: []string{"--edit-description"}},
	"config":          {forceShort: "e", forceLong: []string{"--edit"}, valued: "f", valuedLong: []string{"--file", "--blob"}, forcePositive: []string{"edit"}},
	"am":              {forceShort: "i", forceLong: []string{"--interactive"}},
	"replace":         {forceShort: "e", forceLong: []string{"--edit"}},
	"send-email":      {message: true},
	"mergetool":       {message: true},
	"difftool":        {message: true},
	"citool":          {message: true},
	"commit-graph":    {},
	"sparse-checkout": {},
}

// gitNoEditor lists git's subcommands that start no editor whatever
// their options (those of gitEditors aside); with its input fed, any other
// word after git may be an alias of one that does.
var gitNoEditor = []string{"apply", "archive", "blame", "bundle", "cat-file", "check-attr", "check-ignore", "check-mailmap",
	"check-ref-format", "cherry", "clean", "clone", "commit-tree", "count-objects", "credential", "describe", "diff",
	"diff-files", "diff-index", "diff-tree", "fast-export", "fast-import", "fetch", "for-each-ref", "format-patch", "fsck",
	"gc", "grep", "hash-object", "index-pack", "init", "interpret-trailers", "log", "ls-files", "ls-remote", "ls-tree",
	"mailinfo", "mailsplit", "merge-base", "merge-file", "mktag", "mktree", "mv", "name-rev", "pack-objects", "patch-id",
	"push", "range-diff", "read-tree", "reflog", "remote", "repack", "rev-list", "rev-parse", "rm", "shortlog", "show",
	"show-ref", "status", "stripspace", "switch", "symbolic-ref", "unpack-objects", "update-index", "update-ref", "var",
	"verify-pack", "version", "whatchanged", "worktree", "write-tree", "sparse-checkout", "maintenance", "bisect",
	"submodule", "init-db", "show-branch", "verify-commit", "verify-tag", "annotate"}

// gitEditorCode says why git's words may start an editor: a subcommand of
// gitEditors without its message, or with an option that forces one.
func gitEditorCode(words []cmdWord) string {
	sub, k := "", 0
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return "git gets a word that is not literal, which may start an editor"
		}
		opt, _, hasVal := strings.Cut(w.lit, "=")
		if contains([]string{"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env",
			"--attr-source", "--shallow-file", "--exec-path", "--list-cmds"}, opt) && !hasVal {
			i++
			continue
		}
		if strings.HasPrefix(w.lit, "-") {
			continue
		}
		sub, k = w.lit, i
		break
	}
	spec, ok := gitEditors[sub]
	if !ok {
		if sub != "" && !contains(gitNoEditor, sub) {
			// An alias (ci = commit in ~/.gitconfig) is not seen.
			return fmt.Sprintf("git %s is not a subcommand the matcher knows: an alias may start an editor", sub)
		}
		return ""
	}
	o := readOptions(words[k+1:], spec.valued, spec.valuedLong...)
	starts := fmt.Sprintf("git %s may start an editor", sub)
	switch {
	case o.unknown:
		return starts + " (a word is not literal)"
	case spec.forceShort != "" && o.short(spec.forceShort), o.long(spec.forceLong...):
		return starts
	case len(o.positional) > 0 && contains(spec.forcePositive, o.positional[0]):
		return starts
	case strings.HasPrefix(o.values["--fixup"], "amend:") || strings.HasPrefix(o.values["--fixup"], "reword:"):
		return starts
	case !spec.message:
		return ""
	case sub == "commit" && o.values["--fixup"] != "":
		return ""
	case spec.msgShort != "" && o.short(spec.msgShort):
		return ""
	case slices.ContainsFunc(o.longs, func(l string) bool { return contains(spec.msgLong, l) }):
		return ""
	case sub == "notes" && (len(o.positional) == 0 || !contains([]string{"add", "append"}, o.positional[0])):
		return "" // git notes list, show, remove
	case sub == "tag" && len(o.positional) == 0:
		return "" // git tag lists
	}
	return starts + " (no message given)"
}
