package policy

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestExplainNearMiss is the get_* versus get-env story: the glob misses,
// the default decides, and the explanation says why and names the near
// miss.
func TestExplainNearMiss(t *testing.T) {
	e := mustCompile(t, newPolicy(Approve,
		Rule{Name: "getters", Server: "cfg", Tools: []string{"get_*"}, Effect: Allow},
		Rule{Name: "no secrets", Server: "cfg", Tools: []string{"get_secret"}, Effect: Deny},
		Rule{Name: "Other server", Server: "CFG", Effect: Deny},
	))
	x := e.Explain(Call{Server: "cfg", Tool: "get-env"})
	if x.Effect != Approve || x.Rule != DefaultRule || len(x.Matched) != 0 {
		t.Fatalf("effect %s by %q matched %v, want approve by the default", x.Effect, x.Rule, x.Matched)
	}
	r := x.Rules[0]
	if r.Matched || !strings.Contains(strings.Join(r.Why, "\n"), `tools: get-env matches none of [get_*]`) {
		t.Errorf("rule 0 trace: %+v", r)
	}
	if !strings.Contains(r.NearMiss, `"get_*" would match "get-env"`) {
		t.Errorf("near miss %q", r.NearMiss)
	}
	if x.Rules[1].NearMiss != "" {
		t.Errorf("rule 1 is not a near miss: %q", x.Rules[1].NearMiss)
	}
	if !strings.Contains(x.Rules[2].NearMiss, `server "CFG" differs from "cfg" only in case`) {
		t.Errorf("rule 2 near miss %q", x.Rules[2].NearMiss)
	}
}

// TestExplainSelectors checks the trace of each selector, with the
// approval parameters of the winner.
func TestExplainSelectors(t *testing.T) {
	e := mustCompile(t, newPolicy(Allow,
		Rule{Name: "big", Server: "pay", Effect: Approve, When: "args.amount > 100", Approval: &Approval{Approvals: 2}},
		Rule{Name: "ops only", Server: "pay", Effect: Deny, Principals: []string{"group:ops"}},
		Rule{Name: "shell", Server: "pay", Effect: Deny, Command: &CommandMatch{Argument: "memo", Match: []string{"rm *"}}},
		Rule{Name: "ro", Server: "pay", Effect: Approve, Annotations: &AnnotationSelector{ReadOnly: ptr(false)}, Monitor: ptr(true)},
	))
	x := e.Explain(Call{Server: "pay", Tool: "transfer", Principal: Principal{ID: "agent-1"}, Arguments: json.RawMessage(`{"amount":500,"memo":"ls"}`)})
	if x.Effect != Approve || x.Rule != "big" || x.Approval == nil || x.Approval.Approvals != 2 || x.Approval.Timeout != "5m0s" {
		t.Fatalf("explanation %+v", x)
	}
	want := [][]string{
		{"when args.amount > 100: true"},
		{"principals: agent-1 (groups []) is not among the rule's principals"},
		{"command: no simple command matches a pattern"},
		{"annotations {read_only: false}: unknown", "monitor mode: recorded as would_hold"},
	}
	for i, w := range want {
		all := strings.Join(x.Rules[i].Why, "\n")
		for _, s := range w {
			if !strings.Contains(all, s) {
				t.Errorf("rule %d trace %q lacks %q", i, all, s)
			}
		}
	}
	if x.Monitor != (Monitor{}) {
		t.Errorf("monitor %+v: the monitored approve is not stricter than the enforced approve", x.Monitor)
	}
	// An erroring condition is reported in the trace.
	x = e.Explain(Call{Server: "pay", Tool: "transfer", Arguments: json.RawMessage(`{"amount":"x","memo":5}`)})
	if len(x.Rules[0].Errors) != 1 || len(x.Rules[2].Errors) != 1 || x.Effect != Deny {
		t.Errorf("errors not traced: effect %s, %+v / %+v", x.Effect, x.Rules[0], x.Rules[2])
	}
}

// TestExplainAgreesWithEvaluate is a property test: for random policies
// and calls, the rules Explain marks matched are exactly Evaluate's, and
// the effect and winner are the same.
func TestExplainAgreesWithEvaluate(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	effects := []Effect{Allow, Deny, Approve}
	tools := []string{"", "read_*", "get_env", "write"}
	whens := []string{"", "args.n > 2", "args.s == 'x'"}
	for iter := range 300 {
		p := newPolicy(effects[rng.IntN(3)])
		for i := range 1 + rng.IntN(6) {
			r := Rule{Name: fmt.Sprint("r", i), Effect: effects[rng.IntN(3)], When: whens[rng.IntN(3)]}
			if t := tools[rng.IntN(len(tools))]; t != "" {
				r.Tools = []string{t}
			}
			if rng.IntN(5) == 0 {
				r.Command = &CommandMatch{Argument: "cmd", Match: []string{"ls *"}}
			}
			p.Rules = append(p.Rules, r)
		}
		e := mustCompile(t, p)
		for _, tool := range []string{"read_file", "get-env", "write"} {
			for _, args := range []string{`{"n":3,"cmd":"ls -l"}`, `{"n":1,"s":"x","cmd":"rm x"}`, `{"n":"bad"}`} {
				c := Call{Server: "s", Tool: tool, Arguments: json.RawMessage(args)}
				d := eval(t, e, c)
				x := e.Explain(c)
				var marked []string
				for _, r := range x.Rules {
					if r.Matched {
						marked = append(marked, r.Name)
					}
				}
				if x.Effect != d.Effect || x.Rule != d.Rule || !slices.Equal(marked, d.Matched) {
					t.Fatalf("iteration %d %s %s: explain %s/%q/%v, evaluate %s/%q/%v", iter, tool, args, x.Effect, x.Rule, marked, d.Effect, d.Rule, d.Matched)
				}
			}
		}
	}
}
