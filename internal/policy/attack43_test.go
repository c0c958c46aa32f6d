package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestCommandDenyBuiltinsThatRunCode (attack43): bash builtins that run a
// command string or make one name run another program, and wrappers that
// run their arguments as a command, make a deny rule for "rm *" match;
// each string below runs rm (hash -p, compgen -C and mapfile -C checked by
// hand in bash 5: each removed the file named). On 812d89d0 every one was
// allowed: the matcher saw only ls, compgen, mapfile, sg or the wrapper.
// An allow rule whose patterns name those builtins allows none of them.
func TestCommandDenyBuiltinsThatRunCode(t *testing.T) {
	deny := mustCompile(t, newPolicy(Allow, commandRule("no rm", Deny, "rm *")))
	for _, c := range []string{
		"hash -p /bin/rm ls; ls x",
		"enable -f ./evil.so ls; ls x",
		"compgen -C 'rm x' y",
		"complete -C 'rm x' y",
		"mapfile -C 'rm x #' -c 1 < list",
		"readarray -C 'rm x #' -c 1 < list",
		"sg staff 'rm x'",
		"sg staff -c 'rm x'",
		"runuser -u nobody -- rm x",
		"pkexec rm x",
		"setpriv --reuid=1000 rm x",
		"unshare -r rm x",
		"nsenter -t 1 -m rm x",
		"fakeroot rm x",
		"firejail rm x",
		"systemd-run --user rm x",
		"numactl -N0 rm x",
		"caffeinate rm x",
		"setarch x86_64 rm x",
		"prlimit --nofile=64 rm x",
		"eatmydata rm x",
		"faketime '2020-01-01' rm x",
		"gosu nobody rm x",
		"su-exec nobody rm x",
		"valgrind rm x",
		"tini -- rm x",
		"toybox rm x",
	} {
		if d := eval(t, deny, shellCall(c)); d.Effect != Deny {
			t.Errorf("%q: effect %s, want deny (it runs rm)", c, d.Effect)
		}
	}
	allow := mustCompile(t, newPolicy(Approve, commandRule("listing", Allow, "ls *", "hash *", "compgen *", "mapfile *", "sg *")))
	for _, c := range []string{"hash -p /bin/rm ls; ls x", "compgen -C 'rm x' y", "mapfile -C 'rm x #' -c 1", "sg staff 'rm x'"} {
		if d := eval(t, allow, shellCall(c)); d.Effect == Allow {
			t.Errorf("%q: allowed, want it held (it runs rm)", c)
		}
	}
	if d := eval(t, deny, shellCall("ls -la; git status")); d.Effect != Allow {
		t.Errorf("ls -la; git status: effect %s, want allow", d.Effect)
	}
}

// TestCommandSubscriptCode (attack43): bash evaluates an array subscript
// in a string it reads as a variable name or arithmetic expression, command
// substitutions included, and a name in arithmetic through its value; with
// set -x it expands PS4 as a prompt. So quoted text given to printf -v,
// read, test -v, [[ ]], let, declare or $(( )) can run any program (each
// plain string below, and the PS4, ${x@P}, (( x )) and read-then-$((x))
// ones, ran rm in bash 5.2.15, checked by hand). On 812d89d0 an allow rule
// for "printf *", "read *" and "test *" allowed the plain ones, although
// the allow guarantee (docs/policy.md) says the shell runs only the
// programs the patterns saw, and a deny rule for "rm *" missed every one.
// printf -v PATH /tmp/x; ls (allowed by "printf *" and "ls *" on
// 812d89d0) ran /tmp/x/ls, an assignment of PATH in another form.
func TestCommandSubscriptCode(t *testing.T) {
	plain := []string{
		"printf -v 'a[$(rm x)]' y",
		"printf -v 'a[`rm x`]' y",
		"echo y | read 'a[$(rm x)]'",
		"read 'a[$(rm x)]' < /dev/null",
		"test -v 'a[$(rm x)]'",
		"[ -v 'a[$(rm x)]' ]",
		"command printf -v 'a[$(rm x)]' y",
		// The subscript names a variable whose value, spelled by
		// printf's escapes, is the code.
		"printf -v x 'b\\x5b\\x24(rm y)]'; printf -v 'a[x]' z",
		"printf -v x 'b\\x5b\\x24(rm y)]'; read 'a[x]' < /dev/null",
		// With set -x, bash expands PS4 before each command it traces.
		"printf -v PS4 '%s' '$(rm x)'; set -x; true",
	}
	allow := mustCompile(t, newPolicy(Approve, commandRule("harmless", Allow, "printf *", "read *", "test *", "echo *", "command *", "set *", "true", "ls *")))
	// A variable bash itself reads, set as an assignment would (which an
	// allow rule refuses): ls runs /tmp/x/ls.
	for _, c := range append(plain, "printf -v PATH /tmp/x; ls", "read PATH < /dev/null; ls") {
		if d := eval(t, allow, shellCall(c)); d.Effect == Allow {
			t.Errorf("%q: allowed, want it held (bash runs the subscript's command)", c)
		}
	}
	deny := mustCompile(t, newPolicy(Allow, commandRule("no rm", Deny, "rm *")))
	for _, c := range append(plain,
		"[[ 'a[$(rm x)]' -eq 1 ]]",
		"let 'a[$(rm x)]'",
		"declare -i n='a[$(rm x)]'",
		"declare -n r='a[$(rm x)]'; r=1",
		"echo $(( 'a[$(rm x)]' ))",
		"x='a[$(rm x)]'; printf -v \"$x\" y",
		"x='a[$(rm x)]'; echo ${!x}",
		"x='a[$(rm x)]'; s=abc; echo ${s:x}",
		"x='a[$(rm x)]'; [[ $x -eq 1 ]]",
		"x=$'a[\\x24(rm x)]'; (( x ))",
		"printf -v \"$(cat name)\" y",
		"PS4='$(rm x)'; set -x; true",
		"x='$(rm y)'; echo ${x@P}",
		"printf -v x 'b\\x5b\\x24(rm y)]'; (( x ))",
		"read x < f; echo $((x))",
		"for v in $(cat f); do (( v )); done",
	) {
		if d := eval(t, deny, shellCall(c)); d.Effect != Deny {
			t.Errorf("%q: effect %s, want deny (bash runs rm)", c, d.Effect)
		}
	}
	// Names and arithmetic without a subscript to run stay as they were.
	for _, c := range []string{"printf -v out '%s' hi", "printf '%s\\n' \"$HOME\"", "read -r line < /dev/null", "test -f 'a[1].txt'", "[[ $n -eq 1 ]]", "echo $((1+2))", "echo 'a[$(x)]'",
		"[ -f x ] && echo $((1+2))", "for i in 1 2 3; do echo $((i*2)); done", "n=5; echo $((n+1))", "printf '%s\\n' 'price[$5]'"} {
		if d := eval(t, deny, shellCall(c)); d.Effect != Allow {
			t.Errorf("%q: effect %s (unseen %v), want allow", c, d.Effect, d.Unseen)
		}
	}
	for _, c := range []string{"printf '%s' hi", "printf -- '-v %s' x", "test -f a.txt", "test -v HOME", "ls -l"} {
		if d := eval(t, allow, shellCall(c)); d.Effect != Allow {
			t.Errorf("%q: effect %s, want allow", c, d.Effect)
		}
	}
}

// TestConditionKeysThatFoldTogether (attack43): an upstream that decodes
// its arguments into a struct with Go's encoding/json matches keys without
// regard to case and keeps the last, so {"path":"/tmp/work/a",
// "PATH":"/etc/shadow"} reads /etc/shadow there while a condition reads
// args.path as /tmp/work/a. On 812d89d0 the allow rule below allowed it;
// keys equal under simple case folding (also "ſ" against "s", the Kelvin
// sign against "k", in nested objects too) are now an error of the whole
// arguments, as repeated keys are: the allow rule does not match, a deny
// rule's condition does.
func TestConditionKeysThatFoldTogether(t *testing.T) {
	allow := mustCompile(t, newPolicy(Approve, Rule{Name: "work dir", Server: "fs", Tools: []string{"write_file"}, Effect: Allow,
		When: `path.within(args.path, "/tmp/work")`}))
	deny := mustCompile(t, newPolicy(Allow, Rule{Name: "no secrets", Server: "fs", Tools: []string{"write_file"}, Effect: Deny,
		When: `has(args.path) && args.path == "/etc/shadow"`}))
	call := func(args string) Call {
		return Call{Server: "fs", Tool: "write_file", Arguments: []byte(args), Principal: Principal{ID: "agent-1"}}
	}
	for _, args := range []string{
		`{"path":"/tmp/work/a","PATH":"/etc/shadow"}`,
		`{"path":"/tmp/work/a","Path":"/etc/shadow"}`,
		`{"path":"/tmp/work/a","secret":1,"\u017fecret":2}`,
		`{"path":"/tmp/work/a","opts":{"k":1,"\u212a":2}}`,
	} {
		if d := eval(t, allow, call(args)); d.Effect == Allow {
			t.Errorf("%s: allowed, want it held (keys that differ only in case)", args)
		}
		if d := eval(t, deny, call(args)); d.Effect != Deny {
			t.Errorf("%s: effect %s under the deny rule, want deny", args, d.Effect)
		}
	}
	for _, args := range []string{`{"path":"/tmp/work/a","content":"x"}`, `{"path":"/tmp/work/a","a":{"path":1},"b":{"path":2}}`} {
		if d := eval(t, allow, call(args)); d.Effect != Allow {
			t.Errorf("%s: effect %s, want allow", args, d.Effect)
		}
	}
}

// TestFoldsWithKeyPastScan checks the index foldsWithKey keeps for an
// object of more than foldScan keys: a fold pair among many keys is found.
func TestFoldsWithKeyPastScan(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"path":"/tmp/work/a"`)
	for i := range 2 * foldScan {
		fmt.Fprintf(&b, `,"k%d":%d`, i, i)
	}
	if _, err := decodeArgs([]byte(b.String() + `}`)); err != nil {
		t.Fatalf("%d distinct keys: %v", 2*foldScan+1, err)
	}
	if _, err := decodeArgs([]byte(b.String() + `,"K7":0}`)); !errors.Is(err, errArgsFoldKey) {
		t.Errorf("k7 and K7 after %d keys: %v, want errArgsFoldKey", 2*foldScan, err)
	}
}
