package main

import (
	"slices"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/config"
	"toolgate/internal/policy"
)

// TestLiveExplainerHidesOtherTenantsAgents: a caller with a tenant who
// explains a call of another tenant's agent gets the explanation of an
// unknown id (none of that agent's groups), while its own tenant's agents
// and every agent for a deployment caller are explained with their groups
// (issue 9 item 12: no cross-tenant reach through policy reads).
func TestLiveExplainerHidesOtherTenantsAgents(t *testing.T) {
	p := &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1, ValidFor: time.Minute}}
	cfg := config.Config{Agents: []config.Agent{
		{ID: "acme-bot", Tenant: "acme", Groups: []string{"acme-ops"}},
		{ID: "beta-bot", Tenant: "beta", Groups: []string{"beta-finance"}},
	}}
	x := &liveExplainer{holder: policy.NewHolder(p), cfg: cfg, ann: func(string, string) *policy.Annotations { return nil }}
	for _, tc := range []struct {
		caller, agent string
		groups        []string
	}{
		{"", "beta-bot", []string{"beta-finance"}},
		{"", "acme-bot", []string{"acme-ops"}},
		{"acme", "acme-bot", []string{"acme-ops"}},
		{"acme", "beta-bot", nil},
		{"beta", "acme-bot", nil},
	} {
		got, err := x.Explain(t.Context(), api.ExplainBody{Server: "s", Tool: "t", Principal: tc.agent, Tenant: tc.caller})
		if err != nil {
			t.Fatalf("caller tenant %q, agent %s: %v", tc.caller, tc.agent, err)
		}
		if got.Principal != tc.agent || !slices.Equal(got.Groups, tc.groups) {
			t.Errorf("caller tenant %q, agent %s: principal %q groups %v, want %q %v", tc.caller, tc.agent, got.Principal, got.Groups, tc.agent, tc.groups)
		}
	}
}
