package policy

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docsPolicy returns the policy of the yaml block of docs/policy.md that
// holds marker.
func docsPolicy(t *testing.T, marker string) *Policy {
	t.Helper()
	b, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range yamlBlockRE.FindAllStringSubmatch(string(b), -1) {
		if !strings.Contains(m[1], marker) {
			continue
		}
		var top struct {
			Policy *Policy `yaml:"policy"`
		}
		if err := yaml.Unmarshal([]byte(m[1]), &top); err != nil || top.Policy == nil {
			t.Fatalf("the block with %q: %v", marker, err)
		}
		top.Policy.Approval = defaults // the config's defaults for what the block leaves out
		return top.Policy
	}
	t.Fatalf("docs/policy.md has no yaml block with %q", marker)
	return nil
}

// TestCommandAllowedByCondition (policy46): the block of docs/policy.md
// ("Allowing a call no command rule allows") allows exactly the calls it
// names, which every command allow rule refuses (a tree copied into a
// home directory, psql reading SQL from its input), and nothing near
// them: a copy into .git/hooks, a second command, a trailing newline or
// space, an environment argument, another caller, psql writing a hook.
// Without the deny rule's exception the exact calls are denied; without
// the deny rule the variants are held.
func TestCommandAllowedByCondition(t *testing.T) {
	const dotfiles = "cp -r dotfiles/. ~"
	const migration = "psql -d app < migrations/0042_index.sql"
	call := func(principal string, args map[string]any) Call {
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		return Call{Server: "shell", Tool: "run", Arguments: raw, Principal: Principal{ID: principal}}
	}
	cmd := func(c string) map[string]any { return map[string]any{"command": c} }

	// Both calls are refused by every command allow rule and caught by
	// every deny rule: the matcher cannot read them.
	plain := mustCompile(t, newPolicy(Approve, commandRule("everything", Allow, "cp *", "psql *"), commandRule("no rm", Deny, "rm *")))
	for _, c := range []string{dotfiles, migration} {
		if d := eval(t, plain, call("desktop", cmd(c))); d.Effect != Deny || !d.Unseen {
			t.Fatalf("%q under [cp *, psql *] and a deny rule for rm *: %s by %q (unseen %v), want deny, unseen", c, d.Effect, d.Rule, d.Unseen)
		}
	}

	p := docsPolicy(t, "restore dotfiles")
	e := mustCompile(t, p)
	allowed := []struct {
		principal, command, rule string
	}{
		{"desktop", dotfiles, "restore dotfiles"},
		{"desktop", migration, "migrations"},
		{"ci", migration, "migrations"},
		{"ci", "git log -1", "git reads"},
	}
	for _, a := range allowed {
		if d := eval(t, e, call(a.principal, cmd(a.command))); d.Effect != Allow || d.Rule != a.rule {
			t.Errorf("%s: %q: %s by %q, want allow by %q", a.principal, a.command, d.Effect, d.Rule, a.rule)
		}
	}
	variants := []map[string]any{
		cmd("cp -r dotfiles/. .git/hooks"),
		cmd("cp -r dotfiles/. ~/.git/hooks"),
		cmd(dotfiles + " && cp x .git/hooks/pre-commit"),
		cmd(dotfiles + "\n"),
		cmd(dotfiles + " "),
		cmd(dotfiles + "; rm -rf ~"),
		{"command": dotfiles, "env": map[string]any{"PATH": "/tmp/x"}},
		{"command": dotfiles, "cwd": "/srv/other"},
		cmd(migration + " -o .git/hooks/pre-commit"),
		cmd("psql -d app < migrations/0042_x.sql -o .git/hooks/pre-commit"),
		cmd("psql -d app < migrations/0042_../../.git/hooks/x.sql"),
		cmd(migration + "\n"),
		cmd(migration + " && psql -d app"),
		{"command": migration, "env": map[string]any{"LD_PRELOAD": "./x.so"}},
		cmd("rm -rf build"),
	}
	for _, v := range variants {
		if d := eval(t, e, call("desktop", v)); d.Effect != Deny || d.Rule != "no rm" {
			t.Errorf("%v: %s by %q, want deny by \"no rm\"", v, d.Effect, d.Rule)
		}
	}
	// Another caller: the allow rule is not theirs, and the exception
	// leaves the call to the default.
	if d := eval(t, e, call("ci", cmd(dotfiles))); d.Effect != Approve || d.Rule != DefaultRule {
		t.Errorf("ci: %q: %s by %q, want approve by the default", dotfiles, d.Effect, d.Rule)
	}

	// Without the deny rule the default holds every variant.
	held := *p
	held.Rules = slicesWithout(p.Rules, "no rm")
	he := mustCompile(t, &held)
	for _, v := range variants[:len(variants)-1] {
		if d := eval(t, he, call("desktop", v)); d.Effect != Approve {
			t.Errorf("without the deny rule: %v: %s by %q, want it held", v, d.Effect, d.Rule)
		}
	}
	if d := eval(t, he, call("desktop", cmd(dotfiles))); d.Effect != Allow {
		t.Errorf("without the deny rule: %q: %s, want allow", dotfiles, d.Effect)
	}

	// Without the deny rule's exception the exact calls are denied.
	strict := *p
	strict.Rules = append([]Rule(nil), p.Rules...)
	for i := range strict.Rules {
		if strict.Rules[i].Name == "no rm" {
			strict.Rules[i].When = ""
		}
	}
	se := mustCompile(t, &strict)
	for _, c := range []string{dotfiles, migration} {
		if d := eval(t, se, call("desktop", cmd(c))); d.Effect != Deny {
			t.Errorf("without the exception: %q: %s by %q, want deny", c, d.Effect, d.Rule)
		}
	}
}

func slicesWithout(rules []Rule, name string) []Rule {
	var out []Rule
	for _, r := range rules {
		if r.Name != name {
			out = append(out, r)
		}
	}
	return out
}
