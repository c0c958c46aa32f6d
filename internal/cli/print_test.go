package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
)

func TestShowPolicyApproval(t *testing.T) {
	var out bytes.Buffer
	a := api.Approval{ID: "01a22c51-0000-7000-8000-000000000001", State: "pending", Kind: "session_policy",
		Target: "sess-1", BaseRevision: 3, Arguments: json.RawMessage(`{"tools":["fs"]}`)}
	if err := printApproval(&out, a, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"session policy change", "sess-1", "Base revision:      3", "Proposed change:", `"fs"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("show output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "Server:") {
		t.Errorf("a policy approval shows a Server line:\n%s", out.String())
	}
}

// TestShowRuleSaysTheTimeoutMayComeFromAnother (fixes20): show named the
// first matching approve rule alone, while the hold timeout (and the
// approvals and valid_for) combine every matching approve rule, as policy
// explain shows them; show now says so.
func TestShowRuleSaysTheTimeoutMayComeFromAnother(t *testing.T) {
	for _, tc := range []struct {
		rule, want string
	}{
		{"finance only", "Rule:               finance only (the first matching approve rule; the timeout, approvals and valid_for are the strictest of all the matching approve rules: policy explain names them)\n"},
		{"default", "Rule:               default\n"},
		{"session require_approval", "Rule:               session require_approval\n"},
		// fixes22: the request records the rule its timeout came from.
		{"finance only+wire cap", "Rule:               finance only (the first matching approve rule; the timeout came from rule \"wire cap\"; the approvals and valid_for are the strictest of all the matching approve rules: policy explain names them)\n"},
	} {
		var out bytes.Buffer
		rule, timeoutRule, _ := strings.Cut(tc.rule, "+")
		a := api.Approval{ID: "01a22c51-0000-7000-8000-000000000003", State: "pending", Server: "pay", Tool: "refund", Rule: rule, TimeoutRule: timeoutRule, Arguments: json.RawMessage(`{}`)}
		if err := printApproval(&out, a, time.Now()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("rule %q: show output lacks %q:\n%s", tc.rule, tc.want, out.String())
		}
	}
}

// TestShowPolicyApprovalWidens: what a session policy change widens is
// said as such, not under the warning that the arguments hold hidden
// characters or redactions (they hold neither).
func TestShowPolicyApprovalWidens(t *testing.T) {
	var out bytes.Buffer
	a := api.Approval{ID: "01a22c51-0000-7000-8000-000000000002", State: "pending", Kind: "session_policy",
		Target: "sess-1", BaseRevision: 2, Arguments: json.RawMessage(`{"require_approval":{"shell":["run"]}}`),
		DisplayWarnings: []string{"widens: require_approval of shell"}}
	if err := printApproval(&out, a, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "NOTE: approving widens the session's policy: require_approval of shell\n") {
		t.Errorf("show output does not start by saying what the change widens:\n%s", out.String())
	}
	if strings.Contains(out.String(), "WARNING") || strings.Contains(out.String(), "Hidden characters") {
		t.Errorf("show output warns of hidden characters the change does not hold:\n%s", out.String())
	}
}

// TestShowMarksTheRequesterAmongApprovers (ops20): the approvers of a
// deployment policy change are the deployment admins, the proposer among
// them; show listed the proposer as an approver although the proposer can
// never review the change (approval.ErrSelfReview). The requester is
// marked, and a list with nobody else says so.
func TestShowMarksTheRequesterAmongApprovers(t *testing.T) {
	for _, tc := range []struct {
		approvers []string
		want      string
	}{
		{[]string{"Alice", "bob"}, "Approvers:          Alice (requested it: may not review), bob\n"},
		{[]string{"alice"}, "Approvers:          alice (requested it: may not review); nobody else may review it\n"},
		{[]string{"bob", "carol"}, "Approvers:          bob, carol\n"},
	} {
		var out bytes.Buffer
		a := api.Approval{ID: "01a22c51-0000-7000-8000-000000000004", State: "pending", Kind: "policy_change", Target: "deployment",
			BaseRevision: 4, RequestedBy: "alice", Approvers: tc.approvers, Arguments: json.RawMessage(`{}`)}
		if err := printApproval(&out, a, time.Now()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("approvers %v: show output lacks %q:\n%s", tc.approvers, tc.want, out.String())
		}
	}
}

// TestShowDeploymentPolicyChange (newuser48): show printed a deployment
// policy change as JSON, the proposed policy one string of "\n"s whose
// conditions read "args.amount \u003c= 1000000". It now prints what it
// widens, the changes and the policy as YAML lines.
func TestShowDeploymentPolicyChange(t *testing.T) {
	args, err := json.Marshal(map[string]any{
		"base_revision": 1,
		"policy":        "default: approve\nrules:\n    - name: transfers run\n      when: args.amount <= 1000000\n      effect: allow\n",
		"digest":        "sha256:e39d",
		"diff":          []string{`rule "transfers run" added (allow when "args.amount <= 1000000")`},
		"widens":        []string{`rule "transfers run" added (allow when "args.amount <= 1000000"): adding an allow rule counts as widening`},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	a := api.Approval{ID: "01a22c51-0000-7000-8000-000000000009", State: "pending", Kind: "policy_change",
		Target: "deployment", BaseRevision: 1, Arguments: args}
	if err := printApproval(&out, a, time.Now()); err != nil {
		t.Fatal(err)
	}
	want := `Proposed change:
  Widens (approving allows this):
    - rule "transfers run" added (allow when "args.amount <= 1000000"): adding an allow rule counts as widening
  Changes from revision 1:
    - rule "transfers run" added (allow when "args.amount <= 1000000")
  Policy (revision 2 once applied):
    default: approve
    rules:
        - name: transfers run
          when: args.amount <= 1000000
          effect: allow
`
	if !strings.Contains(out.String(), want) {
		t.Errorf("show output lacks\n%s\nin\n%s", want, out.String())
	}
	if strings.Contains(out.String(), `\u003c`) || strings.Contains(out.String(), "WARNING") {
		t.Errorf("show output escapes or warns:\n%s", out.String())
	}
	// A hidden character in the proposed policy is still shown escaped.
	a.Arguments = json.RawMessage(`{"base_revision":1,"policy":"default: allow # \u202e\n","diff":[],"widens":[]}`)
	out.Reset()
	if err := printApproval(&out, a, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `default: allow # \u202E`) || !strings.Contains(out.String(), "hidden or control characters") {
		t.Errorf("a hidden character is not escaped and warned about:\n%s", out.String())
	}
}

// TestShowSaysWhomTheCallActsFor (newuser48): a call by an agent acting
// for alice, under a rule whose approvers are a group alice is in, showed
// "Approvers: group:finance", though alice may never review it (which can
// leave the quorum short).
func TestShowSaysWhomTheCallActsFor(t *testing.T) {
	for _, tc := range []struct {
		approvers []string
		want      string
	}{
		{[]string{"group:finance"}, "Approvers:          group:finance; never alice, whom it acts for\n"},
		{nil, "Approvers:          anyone with the approver role; never alice, whom it acts for\n"},
		{[]string{"alice", "bob"}, "Approvers:          alice (requested it: may not review), bob\n"},
	} {
		var out bytes.Buffer
		a := api.Approval{ID: "01a22c51-0000-7000-8000-000000000005", State: "pending", Server: "pay", Tool: "transfer",
			RequestedBy: "desktop", OnBehalfOf: "alice", Approvers: tc.approvers, Arguments: json.RawMessage(`{}`)}
		if err := printApproval(&out, a, time.Now()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("approvers %v: show output lacks %q:\n%s", tc.approvers, tc.want, out.String())
		}
	}
}

// TestShowSaysGrantsForbidden (grants50): show of a call whose rule says
// grants: false says so, so the approver knows --grant will be refused;
// other calls show no Grants line.
func TestShowSaysGrantsForbidden(t *testing.T) {
	for _, forbidden := range []bool{true, false} {
		var out bytes.Buffer
		a := api.Approval{ID: "01a22c51-0000-7000-8000-000000000009", State: "pending", Server: "pay", Tool: "refund",
			RequestedBy: "support-a", Arguments: json.RawMessage(`{"amount":50000}`), GrantsForbidden: forbidden}
		if err := printApproval(&out, a, time.Now()); err != nil {
			t.Fatal(err)
		}
		const want = "Grants:             forbidden (its rule says grants: false, or the config grants.enabled: false): approve it without --grant"
		if got := strings.Contains(out.String(), want); got != forbidden {
			t.Errorf("grants forbidden %v: show output has %q: %v\n%s", forbidden, want, got, out.String())
		}
	}
}
