package gate

import (
	"testing"
	"time"

	"toolgate/internal/policy"
)

// TestDefaultDenialNamesTheDefault: a call no rule allows or holds is
// refused by policy.default, which the agent is told is the policy's
// default, not a rule named "default"; when a rule's condition could not
// be evaluated for the arguments (an amount sent as a string), the agent
// is told that too, since it is what it can change (newuser50). A named
// deny rule's refusal is unchanged.
func TestDefaultDenialNamesTheDefault(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	p := testPolicy(time.Minute)
	p.Default = policy.Deny
	p.Rules = []policy.Rule{
		{Name: "small EUR refunds", Server: "pay", Tools: []string{"refund"}, Effect: policy.Allow,
			When: `args.currency == "EUR" && args.amount_cents > 0 && args.amount_cents <= 10000`},
		{Name: "EUR refunds over 100", Server: "pay", Tools: []string{"refund"}, Effect: policy.Approve,
			When: `args.currency == "EUR" && args.amount_cents > 10000`},
		{Name: "unknown currency", Server: "pay", Tools: []string{"refund"}, Effect: policy.Deny,
			When: `args.currency != "EUR"`},
	}
	g := New(f.db, policy.NewHolder(p), &f.gate.opts)
	call := func(args string) Admission {
		return g.Admit(t.Context(), Call{Principal: agent, Server: "pay", Tool: "refund", Arguments: []byte(args)})
	}
	for _, tc := range []struct{ args, want string }{
		{`{"amount_cents":-5000,"currency":"EUR","customer":"c1"}`,
			`denied by the policy's default (no rule allows or holds this call): this call to pay__refund is not allowed`},
		{`{"amount_cents":"50000","currency":"EUR","customer":"c1"}`,
			`denied by the policy's default (no rule allows or holds this call; a rule's condition could not be evaluated for these arguments (such as a value of another type than it expects), which never allows): this call to pay__refund is not allowed`},
		{`{"amount_cents":5000,"currency":"USD","customer":"c1"}`,
			`denied by policy rule "unknown currency": this call to pay__refund is not allowed`},
	} {
		if a := call(tc.args); a.Allowed || a.Message != tc.want {
			t.Errorf("%s: allowed %v, %q; want refused with %q", tc.args, a.Allowed, a.Message, tc.want)
		}
	}
	if a := call(`{"amount_cents":5000,"currency":"EUR","customer":"c1"}`); !a.Allowed {
		t.Errorf("small refund: refused with %q, want allowed", a.Message)
	}
}
