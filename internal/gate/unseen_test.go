package gate

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"toolgate/internal/policy"
)

// TestDenialSaysTheCommandWasUnseen: a call denied by a command rule only
// because its command cannot be read in full is told so (newuser5: the
// agent read `denied by policy rule "no rm"` for `echo "unterminated` and
// could not tell why); a command the rule saw gets the plain denial.
func TestDenialSaysTheCommandWasUnseen(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	p := testPolicy(time.Minute)
	p.Rules = append(p.Rules, policy.Rule{Name: "no rm", Server: "shell", Tools: []string{"run"}, Effect: policy.Deny,
		Command: &policy.CommandMatch{Argument: "command", Match: []string{"rm *"}}})
	g := New(f.db, policy.NewHolder(p), &f.gate.opts)
	call := func(command string) Admission {
		raw, _ := json.Marshal(map[string]string{"command": command})
		return g.Admit(t.Context(), Call{Principal: agent, Server: "shell", Tool: "run", Arguments: raw})
	}
	if a := call(`echo "unterminated`); a.Allowed || !strings.Contains(a.Message, `denied by policy rule "no rm" (the command does not parse as shell, or runs code the policy cannot read`) {
		t.Errorf("unparsable command: %q, want the denial to say the command could not be read", a.Message)
	}
	if a := call(`rm -rf build`); a.Allowed || a.Message != `denied by policy rule "no rm": this call to shell__run is not allowed` {
		t.Errorf("rm: %q, want the plain denial", a.Message)
	}
	// newuser46: a command the matcher cannot read in full that also runs
	// rm is denied for the rm it saw, and says so plainly.
	if a := call(`cp -r dotfiles/. ~ && rm -rf /`); a.Allowed || a.Message != `denied by policy rule "no rm": this call to shell__run is not allowed` {
		t.Errorf("cp into ~ and rm: %q, want the plain denial", a.Message)
	}
	if a := call(`cp -r dotfiles/. ~`); a.Allowed || !strings.Contains(a.Message, `a file written for a program to run later`) {
		t.Errorf("cp into ~: %q, want the denial to name files a program runs later among what cannot be read", a.Message)
	}
}
