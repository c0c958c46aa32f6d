package policy

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// base is the policy every Narrows case starts from (default approve).
func base() *Policy {
	return &Policy{
		Default:  Approve,
		Approval: Approval{Timeout: 5 * time.Minute, Mode: ModeHold, Approvals: 1, ValidFor: 10 * time.Minute, Approvers: []string{"group:ops"}},
		Rules: []Rule{
			{Name: "read", Server: "fs", Tools: []string{"read_*", "list_*"}, Effect: Allow},
			{Name: "never delete", Tools: []string{"*delete*"}, Effect: Deny},
			{Name: "pay", Server: "pay", Tools: []string{"*"}, Effect: Approve, Approval: &Approval{Approvals: 2, Timeout: 10 * time.Minute}},
			{Name: "git", Server: "git", Effect: Allow},
		},
	}
}

func TestNarrows(t *testing.T) {
	cases := []struct {
		name   string
		old    func(p *Policy) // optional change to base() for the old policy
		change func(p *Policy) // turns a copy of old into new
		ok     bool
		reason string // a substring of one reason
	}{
		// Accepted.
		{name: "no change", change: func(p *Policy) {}, ok: true},
		{name: "source ignored", change: func(p *Policy) { p.Source = SourceStore }, ok: true},
		{name: "add deny rule", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "no shell", Server: "sh", Effect: Deny})
		}, ok: true, reason: `rule "no shell" added (deny server "sh")`},
		{name: "add deny rule first", change: func(p *Policy) {
			p.Rules = append([]Rule{{Name: "no shell", Effect: Deny}}, p.Rules...)
		}, ok: true},
		{name: "add approve rule, default allow", old: func(p *Policy) { p.Default = Allow }, change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "git push", Server: "git", Tools: []string{"push"}, Effect: Approve, Approval: &Approval{Approvers: []string{"alice"}, Mode: ModeHold}})
		}, ok: true, reason: `rule "git push" added (approve`},
		{name: "add approve rule, default approve, inheriting", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "git push", Server: "git", Tools: []string{"push"}, Effect: Approve, Approval: &Approval{Approvals: 3, Timeout: time.Minute}})
		}, ok: true},
		{name: "remove allow rule", change: func(p *Policy) { p.Rules = p.Rules[1:] }, ok: true, reason: `rule "read" removed (allow`},
		{name: "raise default approvals", change: func(p *Policy) { p.Approval.Approvals = 2 }, ok: true, reason: "approval.approvals raised from 1 to 2"},
		{name: "raise rule approvals", change: func(p *Policy) { p.Rules[2].Approval.Approvals = 3 }, ok: true, reason: `rule "pay": approval.approvals raised from 2 to 3`},
		{name: "shorten default timeout", change: func(p *Policy) { p.Approval.Timeout = time.Minute }, ok: true, reason: "approval.timeout shortened from 5m0s to 1m0s"},
		{name: "shorten rule timeout", change: func(p *Policy) { p.Rules[2].Approval.Timeout = time.Minute }, ok: true, reason: `rule "pay": approval.timeout shortened`},
		{name: "shorten default valid_for", change: func(p *Policy) { p.Approval.ValidFor = time.Minute }, ok: true, reason: "approval.valid_for shortened"},
		{name: "rule states its inherited value", change: func(p *Policy) { p.Rules[2].Approval.Mode = ModeHold }, ok: true},
		{name: "tools reordered", change: func(p *Policy) { p.Rules[0].Tools = []string{"list_*", "read_*"} }, ok: true},
		{name: "chat_approval turned off", old: func(p *Policy) { p.Rules[2].ChatApproval = true }, change: func(p *Policy) { p.Rules[2].ChatApproval = false },
			ok: true, reason: `rule "pay": chat_approval turned off`},
		{name: "append unnamed deny after unnamed rules", old: unnamed, change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Effect: Deny, Server: "sh"})
		}, ok: true, reason: `rule "rule[4]" added`},

		// Refused.
		{name: "default approve to deny", change: func(p *Policy) { p.Default = Deny }, reason: "default changed from approve to deny"},
		{name: "default approve to allow", change: func(p *Policy) { p.Default = Allow }, reason: "default changed"},
		{name: "add allow rule", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "sh", Server: "sh", Effect: Allow})
		}, reason: "adding an allow rule"},
		{name: "add approve rule, default deny", old: func(p *Policy) { p.Default = Deny }, change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "sh", Server: "sh", Effect: Approve})
		}, reason: "the default is deny"},
		{name: "add approve rule with own approvers, default approve", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "sh", Server: "sh", Effect: Approve, Approval: &Approval{Approvers: []string{"mallory"}}})
		}, reason: "must not name its own approvers"},
		{name: "add approve rule with fewer approvals, default approve", old: func(p *Policy) { p.Approval.Approvals = 2 }, change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "sh", Server: "sh", Effect: Approve, Approval: &Approval{Approvals: 1}})
		}, reason: "approvals 1 are fewer than the default's 2"},
		{name: "add approve rule with longer timeout, default approve", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "sh", Server: "sh", Effect: Approve, Approval: &Approval{Timeout: time.Hour}})
		}, reason: "timeout 1h0m0s is longer"},
		{name: "add approve rule with longer valid_for, default approve", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "sh", Server: "sh", Effect: Approve, Approval: &Approval{ValidFor: time.Hour}})
		}, reason: "valid_for 1h0m0s is longer"},
		{name: "add approve rule with other mode, default approve", change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "sh", Server: "sh", Effect: Approve, Approval: &Approval{Mode: ModeRetry}})
		}, reason: "mode retry differs"},
		{name: "add approve rule before one with another mode", old: func(p *Policy) { p.Default = Allow }, change: func(p *Policy) {
			p.Rules = append([]Rule{{Name: "first", Effect: Approve, Approval: &Approval{Mode: ModeRetry}}}, p.Rules...)
		}, reason: `comes before rule "pay"`},
		{name: "chat_approval turned on", change: func(p *Policy) { p.Rules[2].ChatApproval = true }, reason: `rule "pay": chat_approval turned on: deciding from chat`},
		{name: "add approve rule with chat_approval, default allow", old: func(p *Policy) { p.Default = Allow }, change: func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "git push", Server: "git", Tools: []string{"push"}, Effect: Approve, ChatApproval: true})
		}, reason: `rule "git push" added (approve server "git" tools [push], chat_approval): it can be decided from chat`},
		{name: "remove deny rule", change: func(p *Policy) { p.Rules = slicesDelete(p.Rules, 1) }, reason: "removing a deny rule"},
		{name: "remove approve rule", change: func(p *Policy) { p.Rules = slicesDelete(p.Rules, 2) }, reason: "removing an approve rule"},
		{name: "lower default approvals", old: func(p *Policy) { p.Approval.Approvals = 2 }, change: func(p *Policy) { p.Approval.Approvals = 1 }, reason: "approval.approvals lowered"},
		{name: "lower rule approvals", change: func(p *Policy) { p.Rules[2].Approval.Approvals = 1 }, reason: `rule "pay": approval.approvals lowered from 2 to 1`},
		{name: "lengthen default timeout", change: func(p *Policy) { p.Approval.Timeout = time.Hour }, reason: "approval.timeout lengthened"},
		{name: "lengthen rule timeout", change: func(p *Policy) { p.Rules[2].Approval.Timeout = time.Hour }, reason: `rule "pay": approval.timeout lengthened`},
		{name: "lengthen valid_for", change: func(p *Policy) { p.Approval.ValidFor = time.Hour }, reason: "approval.valid_for lengthened"},
		{name: "change default mode", change: func(p *Policy) { p.Approval.Mode = ModeRetry }, reason: "approval.mode changed"},
		{name: "change rule mode", change: func(p *Policy) { p.Rules[2].Approval.Mode = ModeRetry }, reason: `rule "pay": approval.mode changed`},
		{name: "default approvers changed (even narrower)", change: func(p *Policy) { p.Approval.Approvers = []string{"alice"} }, reason: "approval.approvers changed"},
		{name: "default approvers emptied", change: func(p *Policy) { p.Approval.Approvers = nil }, reason: "who may approve"},
		{name: "rule approvers changed", change: func(p *Policy) { p.Rules[2].Approval.Approvers = []string{"group:ops", "bob"} }, reason: `rule "pay": approval.approvers changed`},
		{name: "rule tools changed (even narrower)", change: func(p *Policy) { p.Rules[0].Tools = []string{"read_*"} }, reason: `rule "read": tools changed`},
		{name: "rule server changed", change: func(p *Policy) { p.Rules[1].Server = "fs" }, reason: `rule "never delete": server changed`},
		{name: "rule effect changed (even stricter)", change: func(p *Policy) { p.Rules[0].Effect = Deny }, reason: `rule "read": effect changed from allow to deny`},
		{name: "rules reordered", change: func(p *Policy) { p.Rules[0], p.Rules[3] = p.Rules[3], p.Rules[0] }, reason: "rules reordered"},
		{name: "rule renamed", change: func(p *Policy) { p.Rules[1].Name = "no deletes" }, reason: `rule "never delete" removed`},
		{name: "insert unnamed rule before unnamed rules", old: unnamed, change: func(p *Policy) {
			p.Rules = append([]Rule{{Effect: Deny, Server: "sh"}}, p.Rules...)
		}, reason: `rule "rule[0]": effect changed`},
		{name: "remove first unnamed allow rule", old: unnamed, change: func(p *Policy) { p.Rules = p.Rules[1:] }, reason: `rule "rule[0]"`},
		{name: "invalid new policy", change: func(p *Policy) { p.Rules = append(p.Rules, Rule{Name: "bad", Tools: []string{"[", ""}, Effect: Deny}) }, reason: "the new policy is invalid"},
		{name: "mixed narrow and widen", change: func(p *Policy) {
			p.Approval.Approvals = 2
			p.Rules = p.Rules[:3] // removes allow rule "git": narrows
			p.Rules = append(p.Rules, Rule{Name: "sh", Effect: Allow})
		}, reason: "adding an allow rule"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := base()
			if c.old != nil {
				c.old(old)
			}
			if errs := old.Validate(); errs != nil {
				t.Fatalf("old policy invalid: %v", errs)
			}
			n := clonePolicy(old)
			c.change(n)
			ok, reasons := Narrows(old, n)
			if ok != c.ok {
				t.Fatalf("Narrows = %v, %q; want %v", ok, reasons, c.ok)
			}
			if c.reason == "" {
				if c.name == "no change" && reasons != nil {
					t.Errorf("reasons = %q, want none", reasons)
				}
				return
			}
			if !containsSub(reasons, c.reason) {
				t.Errorf("reasons %q contain no %q", reasons, c.reason)
			}
			if c.ok {
				return
			}
			// The widening part is in the Diff too.
			if d := Diff(old, n); len(d) == 0 {
				t.Errorf("Diff is empty for a refused change")
			}
		})
	}
}

// TestNarrowsStricterPerCall checks the property behind Narrows on a grid of
// calls: when Narrows accepts a change, no call's decision gets weaker.
func TestNarrowsStricterPerCall(t *testing.T) {
	rank := map[Effect]int{Allow: 0, Approve: 1, Deny: 2}
	calls := []Call{}
	for _, s := range []string{"fs", "pay", "git", "sh"} {
		for _, tool := range []string{"read_file", "list_dir", "delete_file", "push", "write_file"} {
			calls = append(calls, Call{Server: s, Tool: tool})
		}
	}
	changes := []func(p *Policy){
		func(p *Policy) { p.Rules = append(p.Rules, Rule{Name: "d", Server: "git", Effect: Deny}) },
		func(p *Policy) {
			p.Rules = append(p.Rules, Rule{Name: "a", Server: "git", Tools: []string{"push"}, Effect: Approve, Approval: &Approval{Approvals: 4}})
		},
		func(p *Policy) { p.Rules = p.Rules[1:] },
		func(p *Policy) { p.Approval.Approvals, p.Approval.Timeout = 3, time.Minute },
	}
	for i, ch := range changes {
		old := base()
		n := clonePolicy(old)
		ch(n)
		if ok, reasons := Narrows(old, n); !ok {
			t.Fatalf("change %d: Narrows refused: %q", i, reasons)
		}
		for _, c := range calls {
			od, _ := old.Evaluate(c)
			nd, _ := n.Evaluate(c)
			if rank[nd.Effect] < rank[od.Effect] {
				t.Errorf("change %d, %v: %s became %s", i, c, od.Effect, nd.Effect)
			}
			if od.Effect == Approve && nd.Effect == Approve {
				if nd.Approval.Approvals < od.Approval.Approvals || nd.Approval.Timeout > od.Approval.Timeout || nd.Approval.Mode != od.Approval.Mode {
					t.Errorf("change %d, %v: approval weakened from %+v to %+v", i, c, od.Approval, nd.Approval)
				}
			}
		}
	}
}

func TestDiff(t *testing.T) {
	old := base()
	n := clonePolicy(old)
	n.Default = Deny
	n.Approval.Timeout = time.Minute
	n.Rules = append(n.Rules[1:], Rule{Name: "sh", Server: "sh", Effect: Deny})
	want := []string{
		"default changed from approve to deny",
		"approval.timeout shortened from 5m0s to 1m0s",
		`rule "sh" added (deny server "sh")`,
		`rule "read" removed (allow server "fs" tools [read_* list_*])`,
	}
	if diff := cmp.Diff(want, Diff(old, n)); diff != "" {
		t.Errorf("Diff mismatch (-want +got):\n%s", diff)
	}
	if d := Diff(old, clonePolicy(old)); d != nil {
		t.Errorf("Diff of equal policies = %q, want nil", d)
	}
}

func TestRevision(t *testing.T) {
	p := base()
	r := Revision(p)
	if !strings.HasPrefix(r, "sha256:") || len(r) != len("sha256:")+64 {
		t.Fatalf("Revision = %q, want sha256:<64 hex>", r)
	}
	same := []struct {
		name   string
		change func(p *Policy)
	}{
		{"source", func(p *Policy) { p.Source = SourceStore }},
		{"empty approval override", func(p *Policy) { p.Rules[0].Approval = &Approval{} }},
		{"empty tools list", func(p *Policy) { p.Rules[3].Tools = []string{} }},
		{"explicit default name", func(p *Policy) { p.Rules[3].Name = ""; p.Rules[3].Name = "git" }},
		{"chat_approval false (written before the key existed)", func(p *Policy) { p.Rules[2].ChatApproval = false }},
	}
	for _, c := range same {
		q := clonePolicy(p)
		c.change(q)
		if got := Revision(q); got != r {
			t.Errorf("%s: revision changed to %s", c.name, got)
		}
	}
	u := base()
	u.Rules[3].Name = ""
	n := clonePolicy(u)
	n.Normalize()
	if Revision(u) != Revision(n) {
		t.Errorf("a defaulted name and the same name written out give different revisions")
	}
	differ := []func(p *Policy){
		func(p *Policy) { p.Default = Deny },
		func(p *Policy) { p.Approval.Timeout++ },
		func(p *Policy) { p.Rules[0].Tools[0] = "read_file" },
		func(p *Policy) { p.Rules = p.Rules[1:] },
		func(p *Policy) { p.Rules[2].Approval.Approvers = []string{"x"} },
		func(p *Policy) { p.Rules[2].ChatApproval = true },
	}
	for i, ch := range differ {
		q := clonePolicy(p)
		ch(q)
		if Revision(q) == r {
			t.Errorf("change %d: revision unchanged", i)
		}
	}
}

func TestHolder(t *testing.T) {
	h := NewHolder(nil)
	if d, err := h.Evaluate(Call{Server: "fs", Tool: "read_file"}); err == nil || d.Effect != Deny {
		t.Errorf("empty holder: Evaluate = %v, %v; want deny and an error", d.Effect, err)
	}
	h.Store(base())
	if d, err := h.Evaluate(Call{Server: "fs", Tool: "read_file"}); err != nil || d.Effect != Allow {
		t.Errorf("Evaluate = %v, %v; want allow", d.Effect, err)
	}
	deny := base()
	deny.Rules = append(deny.Rules, Rule{Name: "all", Effect: Deny})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				if _, err := h.Evaluate(Call{Server: "fs", Tool: "read_file"}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	h.Store(deny)
	wg.Wait()
	if d, _ := h.Evaluate(Call{Server: "fs", Tool: "read_file"}); d.Effect != Deny {
		t.Errorf("after Store: Evaluate = %v, want deny", d.Effect)
	}
	if h.Load() != deny {
		t.Errorf("Load did not return the stored policy")
	}
}

// unnamed strips the names of base's rules.
func unnamed(p *Policy) {
	for i := range p.Rules {
		p.Rules[i].Name = ""
	}
}

func clonePolicy(p *Policy) *Policy {
	q := *p
	q.Approval.Approvers = append([]string(nil), p.Approval.Approvers...)
	if p.Enforce != nil {
		e := *p.Enforce
		q.Enforce = &e
	}
	q.Rules = nil
	for _, r := range p.Rules {
		r.Tools = append([]string(nil), r.Tools...)
		if r.Approval != nil {
			a := *r.Approval
			a.Approvers = append([]string(nil), a.Approvers...)
			r.Approval = &a
		}
		if r.Command != nil {
			c := *r.Command
			c.Match = append([]string(nil), c.Match...)
			r.Command = &c
		}
		if r.Annotations != nil {
			a := *r.Annotations
			r.Annotations = &a
		}
		if r.Monitor != nil {
			m := *r.Monitor
			r.Monitor = &m
		}
		r.Principals = append([]string(nil), r.Principals...)
		q.Rules = append(q.Rules, r)
	}
	return &q
}

func slicesDelete(r []Rule, i int) []Rule {
	return append(append([]Rule(nil), r[:i]...), r[i+1:]...)
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
