package gate

import (
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// kindsPolicy denies a resource glob, holds a prompt and allows the rest.
func kindsPolicy() *policy.Policy {
	return &policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1, ValidFor: 10 * time.Minute},
		Rules: []policy.Rule{
			{Name: "no secrets", Server: "fs", Resources: []string{"file:///secret/*"}, Effect: policy.Deny},
			{Name: "review prompts", Prompts: []string{"review"}, Effect: policy.Approve},
		},
	}
}

func TestKindsPassTheGate(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	f.pol.p.Store(kindsPolicy())

	res := Call{Principal: agent, Kind: approval.KindResourceRead, Server: "fs", Tool: "file:///secret/key", Arguments: []byte(`{"uri":"file:///secret/key"}`)}
	if a := f.gate.Admit(t.Context(), res); a.Allowed || !strings.Contains(a.Message, `"no secrets"`) || !strings.Contains(a.Message, "resource file:///secret/key") {
		t.Fatalf("secret read: %+v, want a refusal naming the rule and the resource", a)
	}
	res.Tool = "file:///public/a"
	if a := f.gate.Admit(t.Context(), res); !a.Allowed {
		t.Fatalf("public read: %+v, want allowed", a)
	}
	// A tool of the same name as the held prompt is allowed.
	if a := f.gate.Admit(t.Context(), Call{Principal: agent, Server: "fs", Tool: "review", Arguments: []byte(`{"a":"1"}`)}); !a.Allowed {
		t.Fatalf("tool review: %+v, want allowed (the rule names prompts)", a)
	}

	prompt := Call{Principal: agent, Kind: approval.KindPromptGet, Server: "fs", Tool: "review", Arguments: []byte(`{"a":"1"}`), ToolDigest: "sha256:p1"}
	ch := admitAsync(t.Context(), f.gate, prompt)
	r := waitPending(t, f.db, 1)[0]
	if r.Kind != approval.KindPromptGet || r.Tool != "review" || r.Rule != "review prompts" {
		t.Fatalf("stored request kind %q tool %q rule %q", r.Kind, r.Tool, r.Rule)
	}
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if !a.Allowed || a.ApprovalID != r.ID {
		t.Fatalf("prompt after approval: %+v", a)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
}

func TestIdenticalCallsDoNotCrossKinds(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	p := kindsPolicy()
	p.Rules = append(p.Rules, policy.Rule{Name: "review tools", Tools: []string{"review"}, Effect: policy.Approve, Approval: &policy.Approval{Mode: "retry"}})
	f.pol.p.Store(p)
	args := []byte(`{"a":"1"}`)
	// A tool call in retry mode leaves a pending request behind.
	tool := f.gate.Admit(t.Context(), Call{Principal: agent, Server: "fs", Tool: "review", Arguments: args})
	if tool.Allowed || tool.ApprovalID == "" {
		t.Fatalf("tool review: %+v, want approval required", tool)
	}
	if _, err := f.gate.Review(t.Context(), tool.ApprovalID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	// The prompt with the same server, name and arguments must not use the
	// tool's approval: it gets a request of its own.
	ch := admitAsync(t.Context(), f.gate, Call{Principal: agent, Kind: approval.KindPromptGet, Server: "fs", Tool: "review", Arguments: args})
	r := waitPending(t, f.db, 1)[0]
	if r.ID == tool.ApprovalID || r.Kind != approval.KindPromptGet {
		t.Fatalf("the prompt attached to %s (kind %q), want a new prompt_get request", r.ID, r.Kind)
	}
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); a.Allowed {
		t.Fatalf("denied prompt admitted: %+v", a)
	}
	got, err := f.db.GetRequest(t.Context(), tool.ApprovalID)
	if err != nil || got.State != approval.StateApproved {
		t.Fatalf("the tool's approval is %s (%v), want still approved", got.State, err)
	}
}

func TestUsableHidesDenied(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	g := New(f.db, policy.NewHolder(kindsPolicy()), &f.gate.opts)
	use, err := g.Usable(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind, name string
		want       bool
	}{
		{approval.KindResourceRead, "file:///secret/a", false},
		{approval.KindResourceRead, "file:///public/a", true},
		{approval.KindPromptGet, "review", true}, // needs approval, usable
		{"", "write_file", true},
	} {
		if got := use(tc.kind, "fs", tc.name); got != tc.want {
			t.Errorf("Usable(%q, fs, %q) = %v, want %v", tc.kind, tc.name, got, tc.want)
		}
	}
}
