package policy

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestDeniedRegardless checks the tools/list test: hidden only when every
// call of the tool by this principal is denied, whatever its arguments.
func TestDeniedRegardless(t *testing.T) {
	ops := Principal{ID: "agent-1", Groups: []string{"ops"}}
	other := Principal{ID: "agent-2"}
	cases := []struct {
		name     string
		policy   *Policy
		call     Call
		want     bool
		wantRule string
	}{
		{"plain deny", newPolicy(Allow, Rule{Name: "d", Tools: []string{"delete"}, Effect: Deny}), Call{Server: "fs", Tool: "delete"}, true, "d"},
		{"other tool", newPolicy(Allow, Rule{Name: "d", Tools: []string{"delete"}, Effect: Deny}), Call{Server: "fs", Tool: "read"}, false, ""},
		{"deny with when keeps it listed", newPolicy(Allow, Rule{Name: "d", Effect: Deny, When: "args.x > 1"}), Call{Server: "fs", Tool: "t"}, false, ""},
		{"deny with command keeps it listed", newPolicy(Allow, Rule{Name: "d", Effect: Deny, Command: &CommandMatch{Argument: "c", Match: []string{"rm *"}}}), Call{Server: "fs", Tool: "t"}, false, ""},
		{"default deny, no rule", newPolicy(Deny), Call{Server: "fs", Tool: "t"}, true, DefaultRule},
		{"default deny, an allow rule", newPolicy(Deny, Rule{Name: "a", Tools: []string{"t"}, Effect: Allow}), Call{Server: "fs", Tool: "t"}, false, ""},
		{"default deny, a conditional allow may apply", newPolicy(Deny, Rule{Name: "a", Effect: Allow, When: "args.x == 1"}), Call{Server: "fs", Tool: "t"}, false, ""},
		{"default deny, a conditional deny", newPolicy(Deny, Rule{Name: "d", Effect: Deny, When: "args.x == 1"}), Call{Server: "fs", Tool: "t"}, true, DefaultRule},
		{"deny for a group", newPolicy(Allow, Rule{Name: "d", Effect: Deny, Principals: []string{"group:ops"}}), Call{Server: "fs", Tool: "t", Principal: ops}, true, "d"},
		{"deny for a group, not a member", newPolicy(Allow, Rule{Name: "d", Effect: Deny, Principals: []string{"group:ops"}}), Call{Server: "fs", Tool: "t", Principal: other}, false, ""},
		{"deny beats an allow", newPolicy(Allow, Rule{Name: "a", Effect: Allow}, Rule{Name: "d", Effect: Deny}), Call{Server: "fs", Tool: "t"}, true, "d"},
		{"monitored deny is not a deny", newPolicy(Allow, Rule{Name: "d", Effect: Deny, Monitor: ptr(true)}), Call{Server: "fs", Tool: "t"}, false, ""},
		{"deny of destructive tools, untrusted: the strict reading denies", newPolicy(Allow, Rule{Name: "d", Effect: Deny, Annotations: &AnnotationSelector{Destructive: ptr(true)}}), Call{Server: "fs", Tool: "t"}, true, "d"},
		{"deny of destructive tools, trusted read tool", newPolicy(Allow, Rule{Name: "d", Effect: Deny, Annotations: &AnnotationSelector{Destructive: ptr(true)}}), Call{Server: "fs", Tool: "t", Annotations: &Annotations{ReadOnly: true}}, false, ""},
		{"default deny in monitor mode", func() *Policy { p := newPolicy(Deny); p.Enforce = ptr(false); return p }(), Call{Server: "fs", Tool: "t"}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := mustCompile(t, c.policy)
			got, rule := e.DeniedRegardless(c.call)
			if got != c.want || rule != c.wantRule {
				t.Errorf("DeniedRegardless = %v by %q, want %v by %q", got, rule, c.want, c.wantRule)
			}
			if e.Listed(c.call) == got {
				t.Errorf("Listed = %v, want %v", !got, !got)
			}
			c.policy.ListDenied = true
			if !mustCompile(t, c.policy).Listed(c.call) {
				t.Error("list_denied: true hides it")
			}
		})
	}
}

// TestDeniedRegardlessAgreesWithEvaluate is a property test: whenever
// DeniedRegardless says a tool is denied, Evaluate denies it for every
// argument value tried, and when it says it is not, some call is not
// denied or a rule depends on arguments.
func TestDeniedRegardlessAgreesWithEvaluate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	effects := []Effect{Allow, Deny, Approve}
	whens := []string{"", "", "args.x > 5", "args.x == 1", "args.y"}
	argsList := []string{`{}`, `{"x":0}`, `{"x":1}`, `{"x":9}`, `{"x":"s"}`, `{"y":true}`, `{"y":false}`}
	for iter := range 400 {
		p := newPolicy(effects[rng.IntN(3)])
		for i := range 1 + rng.IntN(4) {
			r := Rule{Name: fmt.Sprint("r", i), Effect: effects[rng.IntN(3)], When: whens[rng.IntN(len(whens))]}
			if rng.IntN(3) == 0 {
				r.Tools = []string{"other"}
			}
			if rng.IntN(4) == 0 {
				r.Principals = []string{"group:ops"}
			}
			if r.Effect != Allow && rng.IntN(4) == 0 {
				r.Monitor = ptr(true)
			}
			p.Rules = append(p.Rules, r)
		}
		e := mustCompile(t, p)
		for _, who := range []Principal{{ID: "a", Groups: []string{"ops"}}, {ID: "b"}} {
			c := Call{Server: "s", Tool: "t", Principal: who}
			denied, _ := e.DeniedRegardless(c)
			allDenied := true
			for _, a := range argsList {
				c.Arguments = json.RawMessage(a)
				if eval(t, e, c).Effect != Deny {
					allDenied = false
				}
			}
			if denied && !allDenied {
				t.Fatalf("iteration %d: DeniedRegardless says denied, yet a call is not denied; rules %+v", iter, p.Rules)
			}
		}
	}
}
