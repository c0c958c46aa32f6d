package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestKindsSelectors(t *testing.T) {
	p := newPolicy(Allow,
		Rule{Name: "no secrets", Server: "fs", Resources: []string{"file:///secret/*"}, Effect: Deny},
		Rule{Name: "review prompts", Prompts: []string{"review*"}, Effect: Approve},
		Rule{Name: "no delete", Tools: []string{"*delete*"}, Effect: Deny},
		Rule{Name: "pay all", Server: "pay", Effect: Approve},
	)
	cases := []struct {
		name string
		call Call
		want Effect
		rule string
	}{
		{"resource glob denies its URI", Call{Kind: KindResource, Server: "fs", Resource: "file:///secret/key.pem"}, Deny, "no secrets"},
		{"resource glob across slashes", Call{Kind: KindResource, Server: "fs", Resource: "file:///secret/a/b"}, Deny, "no secrets"},
		{"resource rule is server-bound", Call{Kind: KindResource, Server: "git", Resource: "file:///secret/key.pem"}, Allow, DefaultRule},
		{"other resource allowed", Call{Kind: KindResource, Server: "fs", Resource: "file:///public/a"}, Allow, DefaultRule},
		{"a tool named like the resource is not a resource", Call{Kind: KindTool, Server: "fs", Tool: "file:///secret/key.pem"}, Allow, DefaultRule},
		{"prompt glob approves", Call{Kind: KindPrompt, Server: "fs", Prompt: "review_code"}, Approve, "review prompts"},
		{"a tools rule does not match a prompt", Call{Kind: KindPrompt, Server: "fs", Prompt: "bulk_delete"}, Allow, DefaultRule},
		{"a tools rule still matches its tool (empty kind)", Call{Server: "fs", Tool: "bulk_delete"}, Deny, "no delete"},
		{"a prompts rule does not match a tool", Call{Kind: KindTool, Server: "fs", Tool: "review_code"}, Allow, DefaultRule},
		{"a rule without selectors matches a resource", Call{Kind: KindResource, Server: "pay", Resource: "pay://ledger"}, Approve, "pay all"},
		{"a rule without selectors matches a prompt", Call{Kind: KindPrompt, Server: "pay", Prompt: "refund"}, Approve, "pay all"},
		{"a rule without selectors matches a tool", Call{Kind: KindTool, Server: "pay", Tool: "transfer"}, Approve, "pay all"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := p.Evaluate(c.call)
			if err != nil {
				t.Fatal(err)
			}
			if d.Effect != c.want || d.Rule != c.rule {
				t.Errorf("Evaluate(%+v) = %s by %q, want %s by %q", c.call, d.Effect, d.Rule, c.want, c.rule)
			}
		})
	}
}

func TestKindsBadInput(t *testing.T) {
	p := newPolicy(Allow, Rule{Name: "r", Prompts: []string{"[bad"}, Effect: Deny})
	// A bad prompt glob is reported even for a tool call (fail closed).
	d, err := p.Evaluate(Call{Server: "fs", Tool: "x"})
	if !errors.Is(err, ErrBadPattern) || d.Effect != Deny {
		t.Errorf("Evaluate with a bad prompts glob = %s, %v; want deny and ErrBadPattern", d.Effect, err)
	}
	errs := p.Validate()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "prompts[0]") {
		t.Errorf("Validate = %v, want one error naming prompts[0]", errs)
	}
	p = newPolicy(Allow, Rule{Name: "r", Resources: []string{"a\\"}, Effect: Deny})
	if errs := p.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "resources[0]") {
		t.Errorf("Validate = %v, want one error naming resources[0]", errs)
	}
	if d, err := newPolicy(Allow).Evaluate(Call{Kind: "table", Server: "fs", Tool: "x"}); err == nil || d.Effect != Deny {
		t.Errorf("Evaluate with an unknown kind = %s, %v; want deny and an error", d.Effect, err)
	}
}

func TestKindsRevisionAndNarrowing(t *testing.T) {
	base := newPolicy(Approve, Rule{Name: "fs", Server: "fs", Tools: []string{"read_*"}, Effect: Allow})
	// Revisions of policies without resources or prompts do not change.
	const before = "sha256:" // the digest itself is checked by TestRevision*; here only stability matters
	r1 := Revision(base)
	if !strings.HasPrefix(r1, before) {
		t.Fatalf("Revision = %q", r1)
	}
	withRes := newPolicy(Approve, Rule{Name: "fs", Server: "fs", Tools: []string{"read_*"}, Resources: []string{"file:///*"}, Effect: Allow})
	if Revision(withRes) == r1 {
		t.Error("adding resources to a rule did not change the revision")
	}
	empty := newPolicy(Approve, Rule{Name: "fs", Server: "fs", Tools: []string{"read_*"}, Resources: []string{}, Effect: Allow})
	if Revision(empty) != r1 {
		t.Error("an empty resources list changed the revision")
	}
	ok, reasons := Narrows(base, withRes)
	if ok || !slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(s, "resources changed") }) {
		t.Errorf("Narrows(add resources to an allow rule) = %v %q, want widening naming resources", ok, reasons)
	}
	prompts := newPolicy(Approve, Rule{Name: "fs", Server: "fs", Tools: []string{"read_*"}, Prompts: []string{"p"}, Effect: Allow})
	if ok, _ := Narrows(base, prompts); ok {
		t.Error("changing a kept rule's prompts counts as narrowing")
	}
	added := newPolicy(Approve,
		Rule{Name: "fs", Server: "fs", Tools: []string{"read_*"}, Effect: Allow},
		Rule{Name: "deny secrets", Resources: []string{"file:///secret/*"}, Effect: Deny})
	ok, reasons = Narrows(base, added)
	if !ok {
		t.Errorf("adding a deny rule on resources counts as widening: %q", reasons)
	}
	if diff := Diff(base, added); len(diff) != 1 || !strings.Contains(diff[0], "resources [file:///secret/*]") {
		t.Errorf("Diff = %q, want the added rule with its resources", diff)
	}
}
