package gate

import (
	"context"
	"testing"
	"time"

	"toolgate/internal/policy"
	"toolgate/internal/session"
)

// TestPolicyHolderSwap: a gate over a policy.Holder decides with whatever
// policy is stored last, and calls a session holds use the approval
// parameters of that policy (Options.SessionApprovalFunc).
func TestPolicyHolderSwap(t *testing.T) {
	h := policy.NewHolder(allowAll())
	f := newFixture(t, time.Minute, &Options{ServerExists: knownServers, SessionApprovalFunc: func() policy.Approval { return h.Load().Approval }})
	g := New(f.db, h, &f.gate.opts)

	read := Call{Principal: agent, Server: "fs", Tool: "read_text_file", Arguments: []byte(`{}`), ToolDigest: "sha256:d1"}
	if a := g.Admit(t.Context(), read); !a.Allowed {
		t.Fatalf("before swap: %+v, want allowed", a)
	}
	stricter := allowAll()
	stricter.Rules = append(stricter.Rules, policy.Rule{Name: "no reads", Tools: []string{"read_*"}, Effect: policy.Deny})
	stricter.Approval.Approvals = 2
	stricter.Approval.Timeout = 30 * time.Second
	h.Store(stricter)
	if a := g.Admit(t.Context(), read); a.Allowed {
		t.Fatalf("after swap: %+v, want denied", a)
	}

	_, p := mustSession(t, g, host, session.NewSession{RequireApproval: map[string]session.Requirement{"pay": {All: true}}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := admitAsync(ctx, g, sessionCall(p, "pay", "refund"))
	r := waitPending(t, f.db, 1)[0]
	if r.RequiredApprovals != 2 || r.ExpiresAt.Sub(r.CreatedAt) != 30*time.Second {
		t.Errorf("session-held request needs %d approvals for %v, want 2 for 30s (the swapped-in policy's)", r.RequiredApprovals, r.ExpiresAt.Sub(r.CreatedAt))
	}
	cancel()
	if a := recv(t, ch); a.Allowed {
		t.Errorf("cancelled call admitted: %+v", a)
	}
}
