package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestCreatedSessionWarnsOfUnreachableQuorum (quorum49): POST
// /v1/sessions with an on_behalf_of who is one of the two approvers a
// rule needs both of creates the session (201) and names that rule in
// warnings; one acting for someone else gets none.
func TestCreatedSessionWarnsOfUnreachableQuorum(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1},
		Rules: []policy.Rule{{Name: "refunds", Server: "pay", Tools: []string{"refund"}, Effect: policy.Approve,
			Approval: &policy.Approval{Approvals: 2, Approvers: []string{"alice", "bob"}}}},
	})
	g := gate.New(db, pol, &gate.Options{Reviewers: []gate.Reviewer{{ID: "alice"}, {ID: "bob"}, {ID: "carol"}}})
	h := api.New(g, authenticate, &api.Options{Sessions: g})
	for _, tt := range []struct {
		behalfOf string
		want     string
	}{
		{"alice", `rule "refunds" needs 2 approvals from alice, bob; only 1 of its 2 configured approver(s) may review a request by session:`},
		{"carol", ""},
	} {
		a := send(t, h, http.MethodPost, "/v1/sessions", "host-tok", `{"on_behalf_of":"`+tt.behalfOf+`"}`)
		if a.status != http.StatusCreated {
			t.Fatalf("on_behalf_of %s: %d %s, want 201 (warned, not refused)", tt.behalfOf, a.status, a.body)
		}
		var c api.CreatedSession
		if err := json.Unmarshal(a.body, &c); err != nil {
			t.Fatal(err)
		}
		switch {
		case tt.want == "" && len(c.Warnings) != 0:
			t.Errorf("on_behalf_of %s: warnings %q, want none", tt.behalfOf, c.Warnings)
		case tt.want != "" && (len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], tt.want)):
			t.Errorf("on_behalf_of %s: warnings %q, want one starting %q", tt.behalfOf, c.Warnings, tt.want)
		}
	}
}
