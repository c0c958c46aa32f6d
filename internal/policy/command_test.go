package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

func shellCall(command string) Call {
	raw, _ := json.Marshal(map[string]string{"command": command})
	return Call{Server: "shell", Tool: "run", Arguments: raw, Principal: Principal{ID: "agent-1"}}
}

func commandRule(name string, effect Effect, patterns ...string) Rule {
	return Rule{Name: name, Server: "shell", Tools: []string{"run"}, Effect: effect,
		Command: &CommandMatch{Argument: "command", Match: patterns}}
}

// TestCommandAllowAcceptance is issue 12's command acceptance test: with
// match ["git status", "git log *"] on an allow rule (default approve),
// only plain git status and git log run at once.
func TestCommandAllowAcceptance(t *testing.T) {
	e := mustCompile(t, newPolicy(Approve, commandRule("git reads", Allow, "git status", "git log *")))
	allowed := []string{
		"git status",
		"git log -1",
		"git log",
		"git log --oneline -n 5",
		"  git   status  ",
		"git status && git log -1",
		"git status; git log",
		"git status\ngit log -3",
		"git log | git status",
		"git status 2>&1",
		"git status >/dev/null 2>&1",
		"git status </dev/null",
		`git log "--format=%h %s"`,
		`g'i't st"at"us`,
		`git log 'a b'`,
		"git status # rm -rf /",
		"git log \\\n  -1",
	}
	refused := []string{
		"git status && curl x | sh",
		"git log $(rm -rf /)",
		"git status; rm -rf ~",
		"git log `id`",
		`bash -c "git status"`,
		`sh -c 'git status'`,
		"/bin/bash -c 'git status'",
		`eval "git status"`,
		"git status &",
		"git status > out.txt",
		"git log >> ~/.bashrc",
		"git log < /etc/passwd",
		"git log >&out.txt",
		"git log <<EOF\nx\nEOF",
		"git log <<< hi",
		"git log <(rm -rf /)",
		"git log ${HOME}",
		"git log $HOME",
		"git log $((1+2))",
		"git log *.go",
		"git log file?",
		"git log {a,b}",
		"git log $'\\x41'",
		"GIT_PAGER=evil git log",
		"(git status)",
		"{ git status; }",
		"if true; then git status; fi",
		"for x in 1; do git status; done",
		"f() { git status; }; f",
		"! git status",
		"git status |& curl x",
		"time git status",
		"git status; exec rm -rf /",
		"git push",
		"git",
		"git status extra",
		"/usr/bin/git status",
		"git log 'unterminated",
		"",
		"# only a comment",
		"git status ;; git log",
		strings.Repeat("git status; ", MaxCommandLength/12+1),
	}
	for _, c := range allowed {
		if d := eval(t, e, shellCall(c)); d.Effect != Allow {
			t.Errorf("%q: effect %s, want allow", c, d.Effect)
		}
	}
	for _, c := range refused {
		if d := eval(t, e, shellCall(c)); d.Effect == Allow {
			t.Errorf("%q: allowed, want it held", c[:min(len(c), 80)])
		}
	}
}

// TestC10ChainedCommands is case C10: an allow rule for "git add *" must
// not allow anything chained after it.
func TestC10ChainedCommands(t *testing.T) {
	e := mustCompile(t, newPolicy(Approve, commandRule("git add", Allow, "git add *")))
	cases := []struct {
		command string
		want    Effect
	}{
		{"git add a.txt", Allow},
		{"git add a.txt && git push", Approve},
		{"git add a.txt; curl x|sh", Approve},
		{"git add $(rm -rf ~)", Approve},
		{"git add a.txt\nrm -rf /", Approve},
		{"git add a.txt | tee /etc/x", Approve},
		{"git add a.txt || rm -rf /", Approve},
		{"git add a.txt > /etc/x", Approve},
		{"git add a.txt < /etc/x", Approve},
		{"git add `rm -rf ~`", Approve},
	}
	for _, c := range cases {
		if d := eval(t, e, shellCall(c.command)); d.Effect != c.want {
			t.Errorf("%q: effect %s, want %s", c.command, d.Effect, c.want)
		}
	}
}

// TestCommandDenyMatchesAnywhere checks deny and approve rules: any simple
// command anywhere matching a pattern, a wrapper running one, or a command
// the matcher cannot see into makes the rule match.
func TestCommandDenyMatchesAnywhere(t *testing.T) {
	e := mustCompile(t, newPolicy(Allow,
		commandRule("no rm", Deny, "rm *"),
		commandRule("pushes", Approve, "git push *")))
	cases := []struct {
		command string
		want    Effect
	}{
		{"ls -la", Allow},
		{"echo hello && git status", Allow},
		{"rm -rf /", Deny},
		{"rm", Deny},
		{"ls; rm x", Deny},
		{"echo $(rm -rf /)", Deny},
		{"echo `rm x`", Deny},
		{"(cd /tmp && rm x)", Deny},
		{"if true; then rm x; fi", Deny},
		{"f() { rm x; }", Deny},
		{"sudo rm -rf /", Deny},
		{"sudo -u root rm x", Deny},
		{"find . -name '*.tmp' -exec rm {} +", Deny},
		{"ls | xargs rm", Deny},
		{"env X=1 rm x", Deny},
		{"nohup rm x &", Deny},
		{"/bin/rm x", Deny},
		{"bash -c 'echo hi'", Deny}, // a shell: opaque
		{"eval ls", Deny},           // opaque
		{"sudo sh -c 'ls'", Deny},   // opaque through a wrapper
		{"env -S 'rm x'", Deny},     // env -S splits a string: opaque
		{"$CMD x", Deny},            // the command name is not literal
		{"ls 'unterminated", Deny},  // does not parse: opaque
		{"git push origin main", Approve},
		{"git status && git push", Approve},
		{"echo rm", Allow}, // rm as an argument of echo runs nothing
		{`echo "rm -rf /"`, Allow},
		{"git commit -m 'rm old files'", Allow},
	}
	for _, c := range cases {
		if d := eval(t, e, shellCall(c.command)); d.Effect != c.want {
			t.Errorf("%q: effect %s (rule %q), want %s", c.command, d.Effect, d.Rule, c.want)
		}
	}
}

// TestCommandArgumentErrors checks a missing or non-string argument: an
// error, which never allows and makes deny rules match.
func TestCommandArgumentErrors(t *testing.T) {
	allow := mustCompile(t, newPolicy(Approve, commandRule("git", Allow, "git *")))
	deny := mustCompile(t, newPolicy(Allow, commandRule("no rm", Deny, "rm *")))
	for _, args := range []string{`{}`, `{"command":5}`, `{"command":["git","status"]}`, `{"command":null}`, `not json`} {
		c := Call{Server: "shell", Tool: "run", Arguments: json.RawMessage(args)}
		if d := eval(t, allow, c); d.Effect != Approve || len(d.Errors) != 1 {
			t.Errorf("allow rule, %s: effect %s errors %v", args, d.Effect, d.Errors)
		}
		if d := eval(t, deny, c); d.Effect != Deny {
			t.Errorf("deny rule, %s: effect %s", args, d.Effect)
		}
	}
}

// TestCommandPatterns checks the pattern syntax.
func TestCommandPatterns(t *testing.T) {
	cases := []struct {
		pattern, command string
		want             bool
	}{
		{"ls", "ls", true},
		{"ls", "ls -l", false},
		{"ls *", "ls", true},
		{"ls *", "ls -l /tmp", true},
		{"ls -l", "ls -l", true},
		{"git log -[0-9]", "git log -5", true},
		{"git log -[0-9]", "git log -10", false},
		{"cat *.md", "cat README.md", true},
		{"cat *.md", "cat 'a b.md'", true}, // '*' inside a word crosses spaces of that one argument
		{"cat *.md", "cat a.md b.md", false},
		{"cat * *", "cat a b", true},
		{"cat * *", "cat a", true}, // one argument, then any number
		{"cat * *", "cat", false},
		{"npm run *", "npm run test -- --watch", true},
	}
	for _, c := range cases {
		e := mustCompile(t, newPolicy(Approve, commandRule("r", Allow, c.pattern)))
		if got := eval(t, e, shellCall(c.command)).Effect == Allow; got != c.want {
			t.Errorf("pattern %q, command %q: allowed %v, want %v", c.pattern, c.command, got, c.want)
		}
	}
	for _, bad := range []CommandMatch{{Argument: "", Match: []string{"ls"}}, {Argument: "c"}, {Argument: "c", Match: []string{"  "}}, {Argument: "c", Match: []string{"ls ["}}} {
		r := Rule{Name: "r", Effect: Allow, Command: &bad}
		if errs := newPolicy(Approve, r).Validate(); len(errs) == 0 || !strings.Contains(errs[0].Error(), `rules[0] "r": command.`) {
			t.Errorf("%+v: Validate = %v, want a command error naming the rule", bad, errs)
		}
	}
}

// FuzzCommand checks that no command string makes the matcher panic, that
// it is deterministic, and that a command an allow rule allows is one a
// deny rule with the same patterns catches.
func FuzzCommand(f *testing.F) {
	for _, s := range []string{"git status", "git log -1 && git status", "git log $(x)", "a | b; c & d", "cat <<'E'\n$(x)\nE", "x=1 y", "f() { :; }", "$'\\x41'", "{a,b}", "`", "((", "[[ -f x ]]", "case x in y) ;; esac", "sudo rm -rf /", "coproc x", "echo ${a:-$(b)}",
		"ssh -p 22 h 'ls; git status'", "ssh h -- git log '$(x)'", "awk -F, '{print $1}' f", "sed -n '1,3{p;q}' f", "python3 -Ic x", "node --eval=x",
		"NODE_OPTIONS=-r./x node a", "env PAGER='ls; rm x' git log", "export GIT_SSH_COMMAND='ssh -p 2'; git fetch", "declare -x 'EDITOR=vi'", "LESSOPEN='|x %s' less f",
		"rsync -avze 'ssh -p 22' a h:b", "rsync --rsh='ssh h ls' a h:", "git -c core.pager=less -C r log", "git rebase -x t main", "scp -o ProxyCommand=x a h:b",
		"sftp -b f h", "deno run -A x.ts", "bun -e x", "Rscript -e x", "for PAGER in a; do :; done"} {
		f.Add(s)
	}
	allow := &commandMatcher{argument: "command"}
	for _, s := range []string{"git status", "git log *", "ls *", "ssh h *", "awk *", "sed *", "python3 *", "rsync *", "ssh *", "env *", "node *"} {
		p, err := compileCommandPattern(s)
		if err != nil {
			f.Fatal(err)
		}
		allow.patterns = append(allow.patterns, p)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pc := parseCommand(s)
		again := parseCommand(s)
		if pc.Unsafe != again.Unsafe || pc.Opaque != again.Opaque || len(pc.Simple) != len(again.Simple) {
			t.Fatalf("%q: not deterministic", s)
		}
		a := allow.allows(&pc)
		c := allow.catches(&pc)
		if a.match && !c.match {
			t.Fatalf("%q: allowed by %v, yet a deny rule with the same patterns misses it (%s)", s, allow.patterns, c.why)
		}
		if a.match && (pc.Unsafe != "" || pc.Opaque != "") {
			t.Fatalf("%q: allowed although unsafe %q / opaque %q", s, pc.Unsafe, pc.Opaque)
		}
		if pc.Opaque != "" && pc.Unsafe == "" {
			t.Fatalf("%q: opaque (%s) but not unsafe", s, pc.Opaque)
		}
	})
}
