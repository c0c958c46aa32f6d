package policy

import "testing"

// denyRm and the helpers below check strings against a deny rule for "rm
// *" (want deny, or allow for the harmless ones) and an allow rule for
// the given patterns (want it held, or allowed).
func checkCommands(t *testing.T, allowPatterns []string, deny, harmless, held, allowed []string) {
	t.Helper()
	denyRm := mustCompile(t, newPolicy(Allow, commandRule("no rm", Deny, "rm *")))
	for _, c := range deny {
		if d := eval(t, denyRm, shellCall(c)); d.Effect != Deny {
			t.Errorf("%q: effect %s, want deny (it runs rm or code the matcher cannot read)", c, d.Effect)
		}
	}
	for _, c := range harmless {
		if d := eval(t, denyRm, shellCall(c)); d.Effect != Allow {
			t.Errorf("%q: effect %s (unseen %v), want allow", c, d.Effect, d.Unseen)
		}
	}
	allow := mustCompile(t, newPolicy(Approve, commandRule("patterns", Allow, allowPatterns...)))
	for _, c := range held {
		if d := eval(t, allow, shellCall(c)); d.Effect == Allow {
			t.Errorf("%q: allowed by %q, want it held", c, allowPatterns)
		}
	}
	for _, c := range allowed {
		if d := eval(t, allow, shellCall(c)); d.Effect != Allow {
			t.Errorf("%q: effect %s under %q, want allow", c, d.Effect, allowPatterns)
		}
	}
}

// TestCommandSSHRemote (policy44): ssh joins the words after the
// destination with spaces and the remote shell runs the result, so each
// string below runs rm on the remote host (options before and after the
// host, --, a clustered -vvp22), or runs code the matcher cannot read (a
// shell there, ProxyCommand or a -F file locally, a shell reading ssh's
// input). On 8308deeb a deny rule for "rm *" saw only ssh and missed
// every one, and an allow rule for "ssh prod uptime" and "ssh prod git log
// *" allowed "ssh prod git log '$(rm x)'", which runs rm there.
func TestCommandSSHRemote(t *testing.T) {
	checkCommands(t, []string{"ssh prod uptime", "ssh prod git log *", "ssh -p 22 prod uptime"},
		[]string{
			"ssh prod rm x",
			"ssh prod 'rm x'",
			"ssh -p 22 -i key prod 'ls; rm x'",
			"ssh -o StrictHostKeyChecking=no prod rm x",
			"ssh -J jump prod -- rm x",
			"ssh prod -p 22 rm x",
			"ssh -- prod rm x",
			"ssh -vvp22 prod rm -rf /",
			"ssh prod 'echo $(rm x)'",
			"ssh prod echo '`rm x`'",
			"ssh prod sudo rm x",
			"sudo ssh prod rm x",
			"timeout 5 ssh prod rm x",
			"ssh prod bash -c \"'rm x'\"",
			"ssh prod ssh other 'rm x'",
			"ssh -o ProxyCommand='rm x' prod ls",
			"ssh -oLocalCommand='rm x' -o PermitLocalCommand=yes prod ls",
			"ssh -F ./cfg prod ls",
			"echo 'rm x' | ssh prod",
			"ssh prod \"$CMD\"",
			"ssh prod ssh a ssh b ssh c ssh d ssh e ls",
			"ssh -o 'ProxyCommand\trm x' prod ls",
			"sshpass -p pw ssh prod rm x",
		},
		[]string{"ssh prod uptime", "ssh -p 22 prod ls -la", "ssh -N -L 8080:localhost:80 prod", "ssh -V", "ssh prod 'git log -1 | head -3'"},
		[]string{
			"ssh prod 'uptime; rm x'",
			"ssh prod uptime ';' rm x",
			"ssh prod git log '$(rm x)'",
			"ssh prod 'git log -1 | sh'",
			"ssh prod uptime '&&' rm x",
			"ssh -o ProxyCommand='rm x' prod uptime",
			"ssh prod",
			"ssh prod git log '> ~/.bashrc'",
		},
		[]string{"ssh prod uptime", "ssh prod git log -1", "ssh prod 'git log --oneline'", "ssh -p 22 prod uptime", "ssh prod 'uptime && git log -1'"},
	)
}

// TestCommandInlineInterpreters (policy44): an interpreter given code
// inline, or reading it from its input, runs what the matcher cannot read
// (each string below removed a file in bash 5.2 where the interpreter was
// installed: python3, perl, node, mawk, GNU sed). On 8308deeb a deny rule
// for "rm *" missed every one but the sh, bash and env -S ones, and an
// allow rule for "python3 *", "awk *", "sed *" allowed the inline ones;
// docs/policy.md now lists them among the opaque commands. A script named
// as a file, an awk program without system(), a pipe or @, and a sed
// script without the e command or flag stay as they were.
func TestCommandInlineInterpreters(t *testing.T) {
	checkCommands(t, []string{"python3 *", "perl *", "node *", "awk *", "sed *", "ls *"},
		[]string{
			`python3 -c 'import os; os.remove("x")'`,
			`python3 -Ic 'import os'`,
			`python3.12 -W ignore -c 'x'`,
			`/usr/bin/python3 -c x`,
			`echo 'import os' | python3`,
			`python3 - < script`,
			`python3 /dev/stdin < script`,
			`perl -e 'unlink "x"'`,
			`perl -ne 'print' f`,
			`perl -M'strict;unlink q(x)' a.pl`,
			`ruby -e 'File.delete("x")'`,
			`node -e 'x'`,
			`node --eval='x'`,
			`node -p x`,
			`node --import 'data:text/javascript,import "child_process"' app.js`,
			`php -r 'unlink("x");'`,
			`lua -e 'os.remove("x")'`,
			`awk 'BEGIN{system("rm x")}'`,
			`awk '{print | "sh"}' f`,
			`gawk 'BEGIN{f="sys" "tem"; @f("rm x")}'`,
			`awk -f /dev/stdin`,
			`awk -F, -v n=1 'BEGIN { "rm x" | getline }'`,
			`awk -- 'BEGIN{system("rm x")}'`,
			`sed 's/x/rm y/e' f`,
			`sed -n '1e rm x' f`,
			`sed -e 's/x/rm y/' -e e f`,
			`sed -ne 's/x/rm y/ep' f`,
			`sed '1!G;s/x/y/;e' f`,
			`sed -f - f`,
			`sudo python3 -c x`,
			`xargs perl -e 'unlink @ARGV'`,
			`find . -exec perl -e 'unlink "x"' ';'`,
			`find . -name '*.tmp' -exec rm {} ';'`,
			`env -S 'rm x'`,
			`bash -c 'rm x'`,
			`xargs sh -c 'rm x'`,
		},
		[]string{
			`awk '{print $1}' f`,
			`awk -F'|' '{print $2}' f`,
			`awk -v n=1 'NR==n' f`,
			`sed -n 's/a/b/gp' f`,
			`sed -i.bak 's/x/y/g' f`,
			`sed '1,3d;$!N;/re/I{p;q}' f`,
			`sed --sandbox 's/x/y/e' f`,
			`sed -E 's#a/b#c#2w out' f`,
			`python3 build.py -c x`,
			`python3 -m pytest -q`,
			`python3 --version`,
			`perl script.pl`,
			`node app.js`,
			`lua x.lua`,
		},
		[]string{`python3 -c 'import os'`, `awk 'BEGIN{system("rm x")}'`, `sed 's/x/rm y/e' f`, `node -e x`, `perl -e x`, `ls | python3`},
		[]string{`awk '{print $1}' f`, `sed -n 5p f`, `python3 build.py`, `ls | awk '{print $9}'`},
	)
}

// TestCommandArithmeticSpelledCode (policy44): text that printf '%b', a
// command substitution or ${x@E} spells, with no '[' or $'...' in the
// string, evaluated as arithmetic or a name runs the subscript's code
// (each checked by hand in bash 5.2.15: rm removed y). On 8308deeb a deny
// rule for "rm *" missed every one.
func TestCommandArithmeticSpelledCode(t *testing.T) {
	checkCommands(t, []string{"echo *"},
		[]string{
			`x='b\x5b\x24(rm y)]'; (( ${x@E} ))`,
			`x='b\x5b\x24(rm y)]'; echo $(( ${x@E} ))`,
			`(( $(printf '%b' 'b\x5b\x24(rm y)]') ))`,
			`[[ $(printf '%b' 'a\x5b\x24(rm y)]') -eq 1 ]]`,
			`x='a\x5b\x24(rm y)]'; [[ "${x@E}" -eq 1 ]]`,
			`echo $(( $(cat f) ))`,
		},
		[]string{`echo $((1+2))`, `echo "$(date)"`, `[[ -f x ]] && echo ok`},
		[]string{`echo $(( $(cat f) ))`},
		[]string{`echo hi`},
	)
}
