package policy

import (
	"slices"
	"testing"
	"time"
)

// TestHolds (review49): Holds is what a call matching only rule i gets
// from Evaluate (its approval, zero fields inherited), and false for
// allow and deny rules and approve rules in monitor mode.
func TestHolds(t *testing.T) {
	yes, no := true, false
	p := &Policy{
		Default: Deny,
		Rules: []Rule{
			{Name: "own", Tools: []string{"a"}, Effect: Approve, Approval: &Approval{Approvals: 2, Approvers: []string{"group:ops"}}},
			{Name: "inherits", Tools: []string{"b"}, Effect: Approve},
			{Name: "watched", Tools: []string{"c"}, Effect: Approve, Monitor: &yes},
			{Name: "runs", Tools: []string{"d"}, Effect: Allow},
			{Name: "enforced", Tools: []string{"e"}, Effect: Approve, Monitor: &no},
		},
	}
	p.Approval = Approval{Timeout: time.Minute, Mode: ModeHold, Approvals: 1, ValidFor: time.Minute, Approvers: []string{"alice"}}
	for i, want := range []bool{true, true, false, false, true} {
		ap, holds := p.Holds(i)
		if holds != want {
			t.Errorf("rule %s: holds %v, want %v", p.Rules[i].Name, holds, want)
			continue
		}
		if !holds {
			continue
		}
		d, err := p.Evaluate(Call{Tool: p.Rules[i].Tools[0], Arguments: []byte(`{}`)})
		if err != nil || d.Effect != Approve || d.Approval.Approvals != ap.Approvals || !slices.Equal(d.Approval.Approvers, ap.Approvers) {
			t.Errorf("rule %s: Holds %+v, Evaluate %+v (%v)", p.Rules[i].Name, ap, d.Approval, err)
		}
	}
	off := false
	p.Enforce = &off
	if _, holds := p.Holds(1); holds {
		t.Errorf("an approve rule of a policy in monitor mode holds")
	}
}
