package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// fakeExplainer explains with a holder, as cmd's live explainer does, and
// refuses the principal "nobody" as bad input.
// It puts the caller's tenant (ExplainBody.Tenant) in the explanation's
// revision field, for the test to see what the API passed.
type fakeExplainer struct{ h *policy.Holder }

func (f fakeExplainer) Explain(_ context.Context, b api.ExplainBody) (policy.Explanation, error) {
	if b.Principal == "tenant?" {
		return policy.Explanation{Revision: "tenant=" + b.Tenant}, nil
	}
	if b.Principal == "nobody" {
		return policy.Explanation{}, fmt.Errorf("%w: principal %q", api.ErrExplainInput, b.Principal)
	}
	return f.h.Explain(policy.Call{Server: b.Server, Tool: b.Tool, Arguments: b.Arguments, Principal: policy.Principal{ID: b.Principal}})
}

// TestExplainRoute checks POST /v1/policy/explain: any reading role, the
// explanation of the policy in force, 422 for bad bodies, 404 without an
// Explainer.
func TestExplainRoute(t *testing.T) {
	p := &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: 60e9, Mode: "hold", Approvals: 1, ValidFor: 60e9},
		Rules: []policy.Rule{{Name: "small", Server: "pay", Tools: []string{"transfer"}, Effect: policy.Allow, When: "args.amount <= 100"}}}
	holder := policy.NewHolder(p)
	db := sqlitetest.Open(t)
	auth := func(tok string) (approval.Principal, []string, bool) {
		id, ok := policyAdmins[tok]
		return id.p, id.roles, ok
	}
	h := api.New(gate.New(db, holder, nil), auth, &api.Options{Explain: fakeExplainer{holder}})

	for _, tok := range []string{"view-tok", "appr-tok", "root-tok"} {
		code, body := policyDo(t, h, "POST", "/v1/policy/explain", tok, api.ExplainBody{Server: "pay", Tool: "transfer", Arguments: json.RawMessage(`{"amount":101}`)})
		var x policy.Explanation
		if code != 200 || json.Unmarshal(body, &x) != nil {
			t.Fatalf("%s: %d %s", tok, code, body)
		}
		if x.Effect != policy.Approve || x.Rule != policy.DefaultRule || len(x.Rules) != 1 || x.Rules[0].Matched ||
			!strings.Contains(strings.Join(x.Rules[0].Why, "\n"), "when args.amount <= 100: false") || x.Approval == nil {
			t.Errorf("%s: explanation %s", tok, body)
		}
	}
	for _, c := range []struct {
		body any
		code int
	}{
		{map[string]any{"server": "pay"}, 422},
		{map[string]any{"server": "pay", "tool": "t", "extra": 1}, 422},
		{map[string]any{"server": "pay", "tool": "t", "principal": "nobody"}, 422},
		{json.RawMessage(`{"server":"pay","tool":"t","tool":"u"}`), 422},
		// A real tools/call with arguments that are not an object is
		// refused (-32602); explain does not explain it as if it ran.
		{json.RawMessage(`{"server":"pay","tool":"transfer","arguments":[{"amount":1}]}`), 422},
		{json.RawMessage(`{"server":"pay","tool":"transfer","arguments":"x"}`), 422},
		{json.RawMessage(`{"server":"pay","tool":"transfer","arguments":null}`), 422},
		{json.RawMessage(`{"server":"pay","tool":"transfer","arguments": {"amount":1}}`), 200},
	} {
		if code, body := policyDo(t, h, "POST", "/v1/policy/explain", "view-tok", c.body); code != c.code {
			t.Errorf("body %v: %d %s, want %d", c.body, code, body, c.code)
		}
	}
	// The explainer learns the caller's tenant from the API, never from the
	// body (which may not name one).
	for tok, want := range map[string]string{"acme-tok": "tenant=acme", "root-tok": "tenant="} {
		code, body := policyDo(t, h, "POST", "/v1/policy/explain", tok, api.ExplainBody{Server: "a", Tool: "b", Principal: "tenant?"})
		var x policy.Explanation
		if code != 200 || json.Unmarshal(body, &x) != nil || x.Revision != want {
			t.Errorf("%s: %d %s, want revision %q", tok, code, body, want)
		}
	}
	if code, body := policyDo(t, h, "POST", "/v1/policy/explain", "acme-tok", map[string]any{"server": "a", "tool": "b", "tenant": "beta"}); code != 422 {
		t.Errorf("a body naming a tenant: %d %s, want 422", code, body)
	}
	if code, _ := policyDo(t, h, "POST", "/v1/policy/explain", "bad-tok", api.ExplainBody{Server: "a", Tool: "b"}); code != 401 {
		t.Errorf("bad token: %d, want 401", code)
	}
	plain := api.New(gate.New(db, holder, nil), auth, nil)
	if code, _ := policyDo(t, plain, "POST", "/v1/policy/explain", "view-tok", api.ExplainBody{Server: "a", Tool: "b"}); code != 404 {
		t.Errorf("without an Explainer: %d, want 404", code)
	}
}
