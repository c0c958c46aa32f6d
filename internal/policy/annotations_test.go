package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// TestTrustedReadOnlySelectsReadTools is issue 12's acceptance test: a
// trusted server's readOnlyHint selects its read tools.
func TestTrustedReadOnlySelectsReadTools(t *testing.T) {
	e := mustCompile(t, newPolicy(Approve,
		Rule{Name: "reads", Server: "fs", Effect: Allow, Annotations: &AnnotationSelector{ReadOnly: ptr(true)}},
		Rule{Name: "destructive", Server: "fs", Effect: Deny, Annotations: &AnnotationSelector{Destructive: ptr(true), OpenWorld: ptr(true)}},
	))
	read := AnnotationsFromHints(ptr(true), nil, nil, nil)
	write := AnnotationsFromHints(nil, ptr(false), nil, nil)
	wipe := AnnotationsFromHints(nil, nil, nil, nil) // the defaults: destructive, open world
	cases := []struct {
		name string
		ann  *Annotations
		want Effect
	}{
		{"read tool", &read, Allow},
		{"additive write tool", &write, Approve},
		{"tool without hints", &wipe, Deny},
	}
	for _, c := range cases {
		if d := eval(t, e, Call{Server: "fs", Tool: c.name, Annotations: c.ann}); d.Effect != c.want {
			t.Errorf("%s: effect %s by %q, want %s", c.name, d.Effect, d.Rule, c.want)
		}
	}
}

// TestAnnotationDefaults checks the MCP defaults and the read-only rule.
func TestAnnotationDefaults(t *testing.T) {
	cases := []struct {
		ro, de, id, ow *bool
		want           Annotations
	}{
		{nil, nil, nil, nil, Annotations{Destructive: true, OpenWorld: true}},
		{ptr(true), nil, nil, nil, Annotations{ReadOnly: true, Idempotent: true, OpenWorld: true}},
		{ptr(true), ptr(true), ptr(false), ptr(false), Annotations{ReadOnly: true, Idempotent: true}},
		{ptr(false), ptr(false), ptr(true), ptr(false), Annotations{Idempotent: true}},
	}
	for i, c := range cases {
		if got := AnnotationsFromHints(c.ro, c.de, c.id, c.ow); got != c.want {
			t.Errorf("case %d: %+v, want %+v", i, got, c.want)
		}
	}
}

// TestUntrustedAnnotationsNeverRelax is issue 12's acceptance test as a
// property: for random policies with annotation selectors and random
// calls, a call whose annotations are unknown (an untrusted server) is
// decided at least as strictly as the same call with any known
// annotations, and never allowed by an annotation-selecting allow rule.
func TestUntrustedAnnotationsNeverRelax(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	effects := []Effect{Allow, Deny, Approve}
	randSel := func() *AnnotationSelector {
		s := &AnnotationSelector{}
		for s.empty() {
			if rng.IntN(2) == 0 {
				s.ReadOnly = ptr(rng.IntN(2) == 0)
			}
			if rng.IntN(3) == 0 {
				s.Destructive = ptr(rng.IntN(2) == 0)
			}
			if rng.IntN(3) == 0 {
				s.Idempotent = ptr(rng.IntN(2) == 0)
			}
			if rng.IntN(3) == 0 {
				s.OpenWorld = ptr(rng.IntN(2) == 0)
			}
		}
		return s
	}
	for iter := range 500 {
		p := newPolicy(effects[rng.IntN(3)])
		for i := range 1 + rng.IntN(5) {
			r := Rule{Name: fmt.Sprint("r", i), Effect: effects[rng.IntN(3)]}
			if rng.IntN(3) > 0 {
				r.Annotations = randSel()
			}
			if rng.IntN(4) == 0 {
				r.Tools = []string{"t"}
			}
			p.Rules = append(p.Rules, r)
		}
		e := mustCompile(t, p)
		unknown := eval(t, e, Call{Server: "s", Tool: "t"})
		for mask := range 16 {
			a := Annotations{ReadOnly: mask&1 != 0, Destructive: mask&2 != 0, Idempotent: mask&4 != 0, OpenWorld: mask&8 != 0}
			known := eval(t, e, Call{Server: "s", Tool: "t", Annotations: &a})
			if strictness(unknown.Effect) < strictness(known.Effect) {
				t.Fatalf("iteration %d: unknown annotations give %s (rule %q), known %+v give the stricter %s; policy %+v",
					iter, unknown.Effect, unknown.Rule, a, known.Effect, p.Rules)
			}
		}
		if unknown.Effect == Allow && unknown.Rule != DefaultRule {
			for i := range p.Rules {
				if p.Rules[i].Name == unknown.Rule && p.Rules[i].Annotations != nil {
					t.Fatalf("iteration %d: an allow rule selecting annotations allowed a call with unknown annotations", iter)
				}
			}
		}
	}
}

func strictness(e Effect) int {
	switch e {
	case Deny:
		return 2
	case Approve:
		return 1
	}
	return 0
}

// TestAnnotationSelectorValidation checks that an empty selector is an
// error naming the rule.
func TestAnnotationSelectorValidation(t *testing.T) {
	errs := newPolicy(Approve, Rule{Name: "x", Effect: Allow, Annotations: &AnnotationSelector{}}).Validate()
	if len(errs) != 1 || errs[0].Error() != `rules[0] "x": annotations: select at least one of read_only, destructive, idempotent, open_world` {
		t.Errorf("Validate = %v", errs)
	}
}
