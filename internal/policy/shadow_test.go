package policy

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestShadowed: each reported rule is matched by a call that another rule
// decides (the witness), and each unreported pair has a witness call the
// first rule decides itself, so a warning there would be false.
func TestShadowed(t *testing.T) {
	yes, no := true, false
	write := Call{Server: "fs", Tool: "write_file", Arguments: json.RawMessage(`{"path":"/tmp/work/a"}`), Principal: Principal{ID: "alice", Groups: []string{"ops"}}}
	with := func(c Call, f func(*Call)) Call { f(&c); return c }
	cases := []struct {
		name    string
		rules   []Rule // rules[0] is the rule looked at, rules[1] the other
		enforce *bool
		shadow  bool
		witness Call // a call rules[0] matches
	}{
		{"docs example: approve the tools, allow part of them", []Rule{
			{Server: "fs", Tools: []string{"write_file"}, When: `args.path.startsWith("/tmp/work/")`, Effect: Allow},
			{Server: "fs", Tools: []string{"write_file", "edit_file"}, Effect: Approve},
		}, nil, true, write},
		{"a deny glob on any server", []Rule{
			{Server: "fs", Tools: []string{"delete_file"}, Effect: Allow},
			{Tools: []string{"*delete*"}, Effect: Deny},
		}, nil, true, with(write, func(c *Call) { c.Tool = "delete_file" })},
		{"approve everything of every server", []Rule{
			{Server: "fs", Tools: []string{"write_*"}, Effect: Allow},
			{Effect: Approve},
		}, nil, true, write},
		{"server glob", []Rule{
			{Server: "fs", Tools: []string{"write_file"}, Effect: Allow},
			{Server: "f*", Tools: []string{"*"}, Effect: Approve},
		}, nil, true, write},
		{"the same condition", []Rule{
			{Server: "fs", When: `args.path != ""`, Effect: Allow},
			{Server: "fs", When: `args.path != ""`, Effect: Approve},
		}, nil, true, write},
		{"approve under deny", []Rule{
			{Server: "fs", Tools: []string{"write_file"}, Effect: Approve},
			{Server: "fs", Tools: []string{"write_file"}, Effect: Deny},
		}, nil, true, write},
		{"principals listed by both", []Rule{
			{Server: "fs", Principals: []string{"alice"}, Effect: Allow},
			{Server: "fs", Principals: []string{"bob", "alice"}, Effect: Approve},
		}, nil, true, write},
		{"annotations required by both", []Rule{
			{Server: "fs", Annotations: &AnnotationSelector{Destructive: &yes, ReadOnly: &no}, Effect: Allow},
			{Server: "fs", Annotations: &AnnotationSelector{Destructive: &yes}, Effect: Approve},
		}, nil, true, with(write, func(c *Call) { c.Annotations = &Annotations{Destructive: true} })},
		{"a rule naming no kind covers resources", []Rule{
			{Server: "fs", Resources: []string{"file:///tmp/x"}, Effect: Allow},
			{Server: "fs", Effect: Approve},
		}, nil, true, Call{Kind: KindResource, Server: "fs", Resource: "file:///tmp/x"}},
		{"monitor false under enforce false", []Rule{
			{Server: "fs", Effect: Allow},
			{Server: "fs", Effect: Deny, Monitor: &no},
		}, &no, true, write},

		{"a different condition", []Rule{
			{Server: "fs", Tools: []string{"write_file"}, Effect: Allow},
			{Server: "fs", Tools: []string{"write_file"}, When: `args.path.startsWith("/etc/")`, Effect: Approve},
		}, nil, false, write},
		{"a condition only the covering rule has", []Rule{
			{Server: "fs", Effect: Allow},
			{Server: "fs", When: `args.path != ""`, Effect: Approve},
		}, nil, false, with(write, func(c *Call) { c.Arguments = json.RawMessage(`{"path":""}`) })},
		{"monitored", []Rule{
			{Server: "fs", Effect: Allow},
			{Server: "fs", Effect: Approve, Monitor: &yes},
		}, nil, false, write},
		{"enforce false", []Rule{
			{Server: "fs", Effect: Allow},
			{Server: "fs", Effect: Deny},
		}, &no, false, write},
		{"a narrower glob", []Rule{
			{Server: "fs", Tools: []string{"w*"}, Effect: Allow},
			{Server: "fs", Tools: []string{"write_*"}, Effect: Approve},
		}, nil, false, with(write, func(c *Call) { c.Tool = "wipe" })},
		{"a literal under a glob", []Rule{
			{Server: "fs", Tools: []string{"write_*"}, Effect: Allow},
			{Server: "fs", Tools: []string{"write_file"}, Effect: Approve},
		}, nil, false, with(write, func(c *Call) { c.Tool = "write_dir" })},
		{"a group does not cover its members", []Rule{
			{Server: "fs", Principals: []string{"carol"}, Effect: Allow},
			{Server: "fs", Principals: []string{"group:ops"}, Effect: Approve},
		}, nil, false, with(write, func(c *Call) { c.Principal = Principal{ID: "carol"} })},
		{"principals only on the covering rule", []Rule{
			{Server: "fs", Effect: Allow},
			{Server: "fs", Principals: []string{"alice"}, Effect: Approve},
		}, nil, false, with(write, func(c *Call) { c.Principal = Principal{ID: "bob"} })},
		{"another kind", []Rule{
			{Server: "fs", Tools: []string{"write_file"}, Effect: Allow},
			{Server: "fs", Resources: []string{"*"}, Effect: Approve},
		}, nil, false, write},
		{"a command selector", []Rule{
			{Server: "fs", Effect: Allow},
			{Server: "fs", Command: &CommandMatch{Argument: "path", Match: []string{"/etc/*"}}, Effect: Approve},
		}, nil, false, write},
		{"annotations only on the covering rule", []Rule{
			{Server: "fs", Effect: Allow},
			{Server: "fs", Annotations: &AnnotationSelector{Destructive: &yes}, Effect: Approve},
		}, nil, false, with(write, func(c *Call) { c.Annotations = &Annotations{ReadOnly: true} })},
		{"a server only the allow names by glob", []Rule{
			{Server: "fs*", Effect: Allow},
			{Server: "fs", Effect: Approve},
		}, nil, false, with(write, func(c *Call) { c.Server = "fs2" })},
		{"any server under one server", []Rule{
			{Tools: []string{"write_file"}, Effect: Allow},
			{Server: "fs", Effect: Approve},
		}, nil, false, with(write, func(c *Call) { c.Server = "other" })},
		{"deny under approve", []Rule{
			{Server: "fs", Effect: Deny},
			{Effect: Approve},
		}, nil, false, write},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for looked, order := range [][]Rule{c.rules, {c.rules[1], c.rules[0]}} {
				p := newPolicy(Deny, order...)
				p.Enforce = c.enforce
				p.Normalize()
				name := p.RuleName(looked)
				mustCompile(t, p)
				got := slices.ContainsFunc(p.Shadowed(), func(s Shadow) bool { return s.Rule == looked && s.By == 1-looked })
				if got != c.shadow {
					t.Errorf("order %d,%d: Shadowed() = %v, want rules[%d] reported: %v", looked, 1-looked, p.Shadowed(), looked, c.shadow)
				}
				d := eval(t, mustCompile(t, p), c.witness)
				if !slices.Contains(d.Matched, name) {
					t.Fatalf("the witness call is not matched by %s: %+v", name, d)
				}
				if decides := d.Rule == name; decides == c.shadow {
					t.Errorf("the witness call is decided by %q (effect %s): the case is wrong", d.Rule, d.Effect)
				}
			}
		})
	}
}

// TestShadowedSound: over random pairs of rules drawn from a small
// vocabulary of selectors, every rule Shadowed reports is decided by
// another rule on every call of a grid that it matches (no false
// warning), and the check finds some (the vocabulary reaches the cases).
func TestShadowedSound(t *testing.T) {
	yes := true
	servers := []string{"", "fs", "f*", "*", "fx"}
	names := [][]string{nil, {"write_file"}, {"write_*"}, {"write_?"}, {"*"}, {"read_file"}, {""}, {"write_file", "read_file"}}
	resources := [][]string{nil, {"file:///x"}, {"*"}}
	principals := [][]string{nil, {"alice"}, {"group:ops"}, {"alice", "bob"}}
	whens := []string{"", `args.path != ""`, `args.path == "a"`}
	effects := []Effect{Allow, Approve, Deny}
	anns := []*AnnotationSelector{nil, {Destructive: &yes}, {ReadOnly: &yes}}
	rng := rand.New(rand.NewPCG(18, 3))
	pick := func() Rule {
		r := Rule{Server: servers[rng.IntN(len(servers))], Tools: names[rng.IntN(len(names))],
			Principals: principals[rng.IntN(len(principals))], When: whens[rng.IntN(len(whens))],
			Effect: effects[rng.IntN(len(effects))], Annotations: anns[rng.IntN(len(anns))]}
		if rng.IntN(4) == 0 {
			r.Resources = resources[rng.IntN(len(resources))]
		}
		if r.Effect != Allow && rng.IntN(6) == 0 {
			r.Monitor = &yes
		}
		return r
	}
	var calls []Call
	for _, server := range []string{"fs", "fx", "ab"} {
		for _, who := range []Principal{{ID: "alice", Groups: []string{"ops"}}, {ID: "bob"}, {ID: "carol", Groups: []string{"ops"}}} {
			for _, args := range []string{`{"path":"a"}`, `{"path":""}`, `{}`} {
				for _, a := range []*Annotations{nil, {Destructive: true}, {ReadOnly: true}} {
					for _, tool := range []string{"write_file", "write_x", "write_xy", "read_file"} {
						calls = append(calls, Call{Server: server, Tool: tool, Principal: who, Arguments: json.RawMessage(args), Annotations: a})
					}
					calls = append(calls, Call{Kind: KindResource, Server: server, Resource: "file:///x", Principal: who, Arguments: json.RawMessage(args), Annotations: a})
				}
			}
		}
	}
	found := 0
	for range 3000 {
		p := newPolicy([]Effect{Allow, Approve, Deny}[rng.IntN(3)], pick(), pick())
		p.Normalize()
		shadows := p.Shadowed()
		if len(shadows) == 0 {
			continue
		}
		found += len(shadows)
		e := mustCompile(t, p)
		for _, s := range shadows {
			name := p.RuleName(s.Rule)
			for _, c := range calls {
				if d := eval(t, e, c); d.Rule == name {
					t.Fatalf("%s reported as never deciding, but decides %+v\npolicy: %+v", name, c, p.Rules)
				}
			}
		}
	}
	if found < 30 {
		t.Errorf("only %d shadowed rules in 3000 random policies: the vocabulary misses the cases", found)
	}
	t.Logf("%d shadowed rules checked", found)
}
