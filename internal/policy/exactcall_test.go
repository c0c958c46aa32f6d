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

// TestOverruledFamilies (policy47): the documented family form, "size(args)
// == 1 && args.command.matches('^…$')", passed policy check with the
// deny rule's exception left out, and every call the family names was
// denied. The check now tries strings the pattern admits and reports the
// first a deny or approve rule decides, quoting it; with the exception,
// where no member is overruled, or for another form, nothing is said.
func TestOverruledFamilies(t *testing.T) {
	const fam = `size(args) == 1 && args.command.matches("^psql -d app < migrations/[0-9]{4}_[a-z_]+[.]sql$")`
	family := func(when string) Rule {
		return Rule{Name: "migrations", Server: "shell", Tools: []string{"run"}, When: when, Effect: Allow}
	}
	noRm := commandRule("no rm", Deny, "rm *")
	excepted := noRm
	excepted.When = "!(" + fam + ")"
	agent := func(id string) Principal { return Principal{ID: id} }
	for _, tc := range []struct {
		name  string
		rules []Rule
		want  []Overruled
	}{
		{"exception left out", []Rule{family(fam), noRm},
			[]Overruled{{Rule: 0, By: 1, Example: "psql -d app < migrations/0000__.sql"}}},
		{"size second, member size, global matches", []Rule{
			family(`matches(args.command, "^psql -d app < migrations/[0-9]+[.]sql$") && args.size() == 1`), commandRule("held", Approve, "rm *")},
			[]Overruled{{Rule: 0, By: 1, Example: "psql -d app < migrations/0.sql"}}},
		{"the second alternative", []Rule{family(`size(args) == 1 && args.command.matches("^(git status|cp -r dotfiles/[.] ~)$")`), noRm},
			[]Overruled{{Rule: 0, By: 1, Example: "cp -r dotfiles/. ~"}}},
		{"an optional part", []Rule{family(`size(args) == 1 && args.command.matches("^git status( && rm -rf /)?$")`), noRm},
			[]Overruled{{Rule: 0, By: 1, Example: "git status && rm -rf /"}}},
		{"exception kept", []Rule{family(fam), excepted}, nil},
		{"no member overruled", []Rule{family(`size(args) == 1 && args.command.matches("^git (status|log -1)$")`), noRm}, nil},
		{"no size test", []Rule{family(`args.command.matches("^psql -d app < m[.]sql$")`), noRm}, nil},
		{"size two", []Rule{family(`size(args) == 2 && args.command.matches("^psql -d app < m[.]sql$")`), noRm}, nil},
		{"a pattern no string matches", []Rule{family(`size(args) == 1 && args.command.matches("^psql\\bx$")`), noRm}, nil},
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
