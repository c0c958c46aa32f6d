package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/gate"
)

// TestReviewersRoster (quorum49): the gate's roster is the people among
// the credentials with role approver or admin (groups and tenant kept),
// plus --dev's approver; viewers, hosts and agents are not in it; with
// approvals.allow_no_approvers it is nil (not known here).
func TestReviewersRoster(t *testing.T) {
	creds := map[string]config.Credential{
		"a": {Principal: approval.Principal{ID: "alice", Kind: config.KindHuman, Groups: []string{"finance"}, Tenant: "acme"}, Roles: []string{config.RoleApprover}},
		"b": {Principal: approval.Principal{ID: "root", Kind: config.KindHuman}, Roles: []string{config.RoleViewer, config.RoleAdmin}},
		"c": {Principal: approval.Principal{ID: "vera", Kind: config.KindHuman}, Roles: []string{config.RoleViewer}},
		"d": {Principal: approval.Principal{ID: "ci", Kind: config.KindHuman}, Roles: []string{config.RoleHost}},
		"e": {Principal: approval.Principal{ID: "desktop", Kind: config.KindAgent}},
	}
	byID := func(rs []gate.Reviewer) map[string]gate.Reviewer {
		m := map[string]gate.Reviewer{}
		for _, r := range rs {
			m[r.ID] = r
		}
		return m
	}
	want := map[string]gate.Reviewer{
		"alice": {ID: "alice", Groups: []string{"finance"}, Tenant: "acme"},
		"root":  {ID: "root"},
	}
	if diff := cmp.Diff(want, byID(reviewers(config.Config{}, creds, false))); diff != "" {
		t.Errorf("roster (-want +got):\n%s", diff)
	}
	want[devApproverID] = gate.Reviewer{ID: devApproverID}
	if diff := cmp.Diff(want, byID(reviewers(config.Config{}, creds, true))); diff != "" {
		t.Errorf("roster with --dev (-want +got):\n%s", diff)
	}
	var open config.Config
	open.Approvals.AllowNoApprovers = true
	if got := reviewers(open, creds, true); got != nil {
		t.Errorf("roster with allow_no_approvers = %+v, want nil (not known)", got)
	}
	if got := reviewers(config.Config{}, nil, false); got == nil || len(got) != 0 {
		t.Errorf("roster of no credentials = %#v, want empty and not nil (known: nobody)", got)
	}
}
