package policy

import (
	"testing"
)

// TestOverruledExactCalls (newuser46): docs/policy.md's "Allowing a call
// no command rule allows" with the deny rule's exception left out passed
// policy check, and the one call the allow rule names was denied. The
// check reports it, naming the rule that decides the call instead; with
// the exception, or where the deny rule does not match, nothing is said.
func TestOverruledExactCalls(t *testing.T) {
	const exact = `args == {"command": "cp -r dotfiles/. ~"}`
	allow := Rule{Name: "restore dotfiles", Server: "shell", Tools: []string{"run"}, When: exact, Effect: Allow}
	noRm := commandRule("no rm", Deny, "rm *")
	agent := func(id string) Principal { return Principal{ID: id, Groups: []string{"eng"}} }
	for _, tc := range []struct {
		name  string
		rules []Rule
		want  []Overruled
	}{
		{"exception left out", []Rule{allow, noRm}, []Overruled{{Rule: 0, By: 1}}},
		{"constant first, a list value", []Rule{
			{Name: "n", Server: "shell", Tools: []string{"run"}, When: `{"flags": [1, "x"], "command": "cp -r dotfiles/. ~"} == args`, Effect: Allow},
			commandRule("held", Approve, "rm *")}, []Overruled{{Rule: 0, By: 1}}},
		{"for a principal", []Rule{
			{Name: "p", Server: "shell", Tools: []string{"run"}, Principals: []string{"desktop", "group:eng"}, When: exact, Effect: Allow},
			{Name: "eng no", Server: "shell", Tools: []string{"run"}, Principals: []string{"group:eng"}, Effect: Deny}}, []Overruled{{Rule: 0, By: 1, Principal: "desktop"}}},
		{"exception kept", []Rule{allow, func() Rule { r := noRm; r.When = `args != {"command": "cp -r dotfiles/. ~"}`; return r }()}, nil},
		{"deny rule does not match", []Rule{{Name: "ok", Server: "shell", Tools: []string{"run"}, When: `args == {"command": "git status"}`, Effect: Allow}, noRm}, nil},
		{"not one exact call", []Rule{{Name: "fam", Server: "shell", Tools: []string{"run"}, When: `args.command.startsWith("cp ")`, Effect: Allow}, noRm}, nil},
		{"not constant", []Rule{{Name: "var", Server: "shell", Tools: []string{"run"}, When: `args == {"command": server}`, Effect: Allow}, noRm}, nil},
		{"a glob tool", []Rule{{Name: "glob", Server: "shell", Tools: []string{"r*"}, When: exact, Effect: Allow}, noRm}, nil},
		{"annotations decide", []Rule{allow, {Name: "destructive", Server: "shell", Annotations: &AnnotationSelector{Destructive: ptr(true)}, Effect: Deny}}, nil},
	} {
		p := newPolicy(Approve, tc.rules...)
		if errs := p.Validate(); len(errs) > 0 {
			t.Fatalf("%s: %v", tc.name, errs)
		}
		got := p.OverruledExactCalls(agent)
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("%s: OverruledExactCalls = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
