package policy

import (
	"slices"
	"strings"
)

// Shadow is a rule that never decides a call: every call it matches, an
// enforced rule of a stronger effect matches too, and precedence (deny >
// approve > allow, whatever the order) gives that rule the decision.
type Shadow struct {
	// Rule is the index of the rule that never decides (an allow rule, or
	// an approve rule under a deny).
	Rule int
	// By is the index of the first rule, in file order, that covers it.
	By int
}

// Shadowed reports each allow rule of p that an enforced approve or deny
// rule covers, and each approve rule that an enforced deny rule covers,
// where that can be decided from the rules alone (policy check warns about
// them). Rule B covers rule A when B selects everything A selects by name
// and B's other selectors hold whenever A's do:
//
//   - server: B's is empty, all stars, equal to A's, or a glob matching A's
//     literal name;
//   - names, for each kind A selects: B selects that kind with an empty
//     entry or an all-star glob, or each of A's patterns equals one of B's
//     or is a literal name one of B's globs matches;
//   - principals: B has none, or A lists some and B lists each of them
//     (literally: B's "group:ops" does not cover A's "alice");
//   - annotations: B has none, or A requires each value B requires;
//   - when: B has none, or the very same expression as A (an error makes
//     both take the strict reading, which never lets A win);
//   - command: B has none.
//
// Anything else, a different condition on B above all, may leave calls
// that only A matches, and is not reported. A's own when, command and
// annotations only narrow A, so they never prevent a report. p must be
// valid ([Policy.Validate]).
func (p *Policy) Shadowed() []Shadow {
	var out []Shadow
	for a := range p.Rules {
		ra := &p.Rules[a]
		for b := range p.Rules {
			rb := &p.Rules[b]
			if b == a || !stronger(rb.Effect, ra.Effect) || p.monitored(rb) || !covers(rb, ra) {
				continue
			}
			out = append(out, Shadow{Rule: a, By: b})
			break
		}
	}
	return out
}

// stronger reports whether a rule of effect b beats one of effect a.
func stronger(b, a Effect) bool {
	switch a {
	case Allow:
		return b == Approve || b == Deny
	case Approve:
		return b == Deny
	}
	return false
}

// covers reports whether every call rule a matches, rule b matches too.
func covers(b, a *Rule) bool {
	if !serverCovers(b.Server, a.Server) || b.Command != nil {
		return false
	}
	if b.When != "" && b.When != a.When {
		return false
	}
	if !annotationsCover(b.Annotations, a.Annotations) {
		return false
	}
	if len(b.Principals) > 0 && (len(a.Principals) == 0 || slices.ContainsFunc(a.Principals, func(s string) bool { return !slices.Contains(b.Principals, s) })) {
		return false
	}
	for _, k := range []Kind{KindTool, KindResource, KindPrompt} {
		as, aSel := kindPatterns(a, k)
		if !aSel {
			continue
		}
		bs, bSel := kindPatterns(b, k)
		if !bSel || !namesCover(bs, as) {
			return false
		}
	}
	return true
}

// kindPatterns returns r's name patterns for kind k (nil: any name) and
// whether r selects k at all.
func kindPatterns(r *Rule, k Kind) ([]string, bool) {
	if len(r.Tools) == 0 && len(r.Resources) == 0 && len(r.Prompts) == 0 {
		return nil, true
	}
	pats := r.Tools
	switch k {
	case KindResource:
		pats = r.Resources
	case KindPrompt:
		pats = r.Prompts
	}
	if len(pats) == 0 {
		return nil, false
	}
	if slices.ContainsFunc(pats, func(s string) bool { return s == "" || allStars(s) }) {
		return nil, true
	}
	return pats, true
}

// namesCover reports whether the patterns b (nil: any) cover a (nil: any).
func namesCover(b, a []string) bool {
	if b == nil {
		return true
	}
	if a == nil {
		return false
	}
	for _, pa := range a {
		if !slices.ContainsFunc(b, func(pb string) bool { return patternCovers(pb, pa) }) {
			return false
		}
	}
	return true
}

// serverCovers reports whether server selector b ("" : any) covers a.
func serverCovers(b, a string) bool {
	switch {
	case b == "" || allStars(b):
		return true
	case a == "":
		return false
	}
	return patternCovers(b, a)
}

// patternCovers reports whether every name glob a matches, glob b matches:
// decided only when they are equal or a is a literal name.
func patternCovers(b, a string) bool {
	if b == a || allStars(b) {
		return true
	}
	if IsGlob(a) {
		return false
	}
	ok, err := Match(b, a)
	return err == nil && ok
}

// allStars reports whether the glob s is one or more '*' (any name).
func allStars(s string) bool { return s != "" && strings.Trim(s, "*") == "" }

// annotationsCover reports whether selector b holds whenever a does.
func annotationsCover(b, a *AnnotationSelector) bool {
	if b == nil {
		return true
	}
	if a == nil {
		return false
	}
	same := func(bv, av *bool) bool { return bv == nil || av != nil && *av == *bv }
	return same(b.ReadOnly, a.ReadOnly) && same(b.Destructive, a.Destructive) &&
		same(b.Idempotent, a.Idempotent) && same(b.OpenWorld, a.OpenWorld)
}
