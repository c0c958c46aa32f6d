package gate

import (
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// BenchmarkAdmitUnlessHeldAllowed is the lean front's admission of an
// allowed call (a compiled one-rule policy, no store): what evalPolicy's
// recovery costs on the allowed-call path (attack14).
func BenchmarkAdmitUnlessHeldAllowed(b *testing.B) {
	g := New(nil, policy.NewHolder(&policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "fs", Effect: policy.Allow}}}), nil)
	c := Call{Principal: approval.Principal{ID: "agent"}, Server: "fs", Tool: "read_file", Arguments: []byte(`{"path":"/r"}`)}
	var adm Admission
	b.ReportAllocs()
	for b.Loop() {
		cc := c
		if h := g.AdmitUnlessHeld(b.Context(), &cc, &adm); h != nil || !adm.Allowed {
			b.Fatalf("%+v %+v", h, adm)
		}
	}
}
