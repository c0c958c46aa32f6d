package policy

import "testing"

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
