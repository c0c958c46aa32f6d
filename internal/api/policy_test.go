package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/policystore"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

const policyV1 = `
default: allow
approval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}
rules:
  - {name: no-delete, server: fs, tools: [delete_*], effect: deny}
`

// policyNarrow adds a deny rule to policyV1.
const policyNarrow = policyV1 + `  - {name: no-exec, server: sh, effect: deny}
`

// policyWide drops policyNarrow's deny rule on fs.
const policyWide = `
default: allow
approval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}
rules:
  - {name: no-exec, server: sh, effect: deny}
`

var policyAdmins = map[string]identity{
	"root-tok":  {approval.Principal{ID: "root", Kind: "human"}, []string{api.RoleAdmin}},
	"admin-tok": {approval.Principal{ID: "ada", Kind: "human"}, []string{api.RoleAdmin}},
	"view-tok":  {approval.Principal{ID: "vera", Kind: "human"}, []string{api.RoleViewer}},
	"appr-tok":  {approval.Principal{ID: "bob", Kind: "human"}, []string{api.RoleApprover}},
	// Admins of tenant acme: they may change nothing outside it.
	"acme-tok":  {approval.Principal{ID: "acme-admin", Kind: "human", Tenant: "acme"}, []string{api.RoleAdmin}},
	"acme2-tok": {approval.Principal{ID: "acme-admin2", Kind: "human", Tenant: "acme"}, []string{api.RoleAdmin}},
}

// policyServer serves the API over a real SQLite store, gate and policy
// service whose revision 1 is policyV1; holder is what the gate would use.
func policyServer(t *testing.T) (http.Handler, *policy.Holder) {
	t.Helper()
	h, holder, _ := policyServerDB(t)
	return h, holder
}

// policyServerDB is policyServer that also returns the store.
func policyServerDB(t *testing.T) (http.Handler, *policy.Holder, store.Store) {
	t.Helper()
	db := sqlitetest.Open(t)
	p1, err := policystore.Parse([]byte(policyV1))
	if err != nil {
		t.Fatal(err)
	}
	holder := policy.NewHolder(p1)
	svc := policystore.New(db, &policystore.Options{
		Approvers: []string{"root", "ada"},
		Install:   func(_ store.PolicyRevision, p *policy.Policy) { holder.Store(p) },
	})
	if _, err := svc.Bootstrap(t.Context(), p1, "config"); err != nil {
		t.Fatal(err)
	}
	g := gate.New(db, holder, nil)
	auth := func(tok string) (approval.Principal, []string, bool) {
		id, ok := policyAdmins[tok]
		return id.p, id.roles, ok
	}
	return api.New(g, auth, &api.Options{Policies: svc}), holder, db
}

func policyDo(t *testing.T, h http.Handler, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func effect(t *testing.T, h *policy.Holder, server, tool string) policy.Effect {
	t.Helper()
	d, err := h.Evaluate(policy.Call{Server: server, Tool: tool})
	if err != nil {
		t.Fatal(err)
	}
	return d.Effect
}

func TestPolicyProposals(t *testing.T) {
	h, holder := policyServer(t)

	// Reads.
	code, body := policyDo(t, h, "GET", "/v1/policy", "view-tok", nil)
	var rev store.PolicyRevision
	if code != 200 || json.Unmarshal(body, &rev) != nil || rev.Revision != 1 {
		t.Fatalf("GET /v1/policy = %d %s, want revision 1", code, body)
	}

	// Only admins propose.
	if code, body := policyDo(t, h, "POST", "/v1/policy/proposals", "appr-tok", api.ProposeBody{BaseRevision: 1, Policy: json.RawMessage(`"default: deny"`)}); code != 403 {
		t.Errorf("approver proposes: %d %s, want 403", code, body)
	}
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

	// Narrowing applies at once.
	code, body = policyDo(t, h, "POST", "/v1/policy/proposals", "root-tok", api.ProposeBody{BaseRevision: 1, Policy: str(policyNarrow)})
	var res api.ProposeResult
	if code != 201 || json.Unmarshal(body, &res) != nil || !res.Applied || res.Revision.Revision != 2 {
		t.Fatalf("narrowing proposal = %d %s, want 201 revision 2", code, body)
	}
	if got := effect(t, holder, "sh", "run"); got != policy.Deny {
		t.Errorf("after narrowing sh/run is %s, want deny", got)
	}
	// A stale base is 409.
	if code, body := policyDo(t, h, "POST", "/v1/policy/proposals", "root-tok", api.ProposeBody{BaseRevision: 1, Policy: str(policyWide)}); code != 409 {
		t.Errorf("stale base: %d %s, want 409", code, body)
	}
	// An invalid policy is 422.
	if code, body := policyDo(t, h, "POST", "/v1/policy/proposals", "root-tok", api.ProposeBody{BaseRevision: 2, Policy: str("default: maybe")}); code != 422 {
		t.Errorf("invalid policy: %d %s, want 422", code, body)
	}

	// Widening needs another admin.
	code, body = policyDo(t, h, "POST", "/v1/policy/proposals", "root-tok", api.ProposeBody{BaseRevision: 2, Policy: str(policyWide)})
	res = api.ProposeResult{}
	if code != 202 || json.Unmarshal(body, &res) != nil || res.Applied || res.Approval == nil || len(res.Widens) == 0 {
		t.Fatalf("widening proposal = %d %s, want 202 with an approval", code, body)
	}
	id := res.Approval.ID
	if got := effect(t, holder, "fs", "delete_file"); got != policy.Deny {
		t.Errorf("while pending fs/delete_file is %s, want deny", got)
	}
	if code, body := policyDo(t, h, "POST", "/v1/approvals/"+string(id)+"/approve", "root-tok", api.ApproveBody{}); code != 403 {
		t.Errorf("proposer approves: %d %s, want 403", code, body)
	}
	if code, body := policyDo(t, h, "POST", "/v1/approvals/"+string(id)+"/approve", "appr-tok", api.ApproveBody{}); code != 403 {
		t.Errorf("a non-admin approver approves: %d %s, want 403 (not eligible)", code, body)
	}
	if code, body := policyDo(t, h, "POST", "/v1/policy/proposals/"+string(id)+"/apply", "admin-tok", nil); code != 409 {
		t.Errorf("apply before approval: %d %s, want 409", code, body)
	}
	code, body = policyDo(t, h, "POST", "/v1/approvals/"+string(id)+"/approve", "admin-tok", api.ApproveBody{})
	var a api.Approval
	if code != 200 || json.Unmarshal(body, &a) != nil || a.State != string(approval.StateConsumed) {
		t.Fatalf("second admin approves: %d %s, want 200 consumed (applied on approval)", code, body)
	}
	if got := effect(t, holder, "fs", "delete_file"); got != policy.Allow {
		t.Errorf("after approval fs/delete_file is %s, want allow", got)
	}
	if code, body := policyDo(t, h, "POST", "/v1/policy/proposals/"+string(id)+"/apply", "admin-tok", nil); code != 409 {
		t.Errorf("second apply: %d %s, want 409", code, body)
	}
	code, body = policyDo(t, h, "GET", "/v1/policy?revision=3", "view-tok", nil)
	rev = store.PolicyRevision{}
	if code != 200 || json.Unmarshal(body, &rev) != nil || string(rev.ApprovalID) != id || rev.CreatedBy != "root" {
		t.Errorf("GET revision 3 = %d %s, want it through %s by root", code, body, id)
	}
	code, body = policyDo(t, h, "GET", "/v1/policy/diff?from=2&to=3", "view-tok", nil)
	var d api.PolicyDiff
	if code != 200 || json.Unmarshal(body, &d) != nil || len(d.Diff) == 0 {
		t.Errorf("diff = %d %s, want lines", code, body)
	}
	for _, tc := range []struct{ path string }{{"/v1/policy?revision=9"}, {"/v1/policy/diff?from=1&to=9"}} {
		if code, body := policyDo(t, h, "GET", tc.path, "view-tok", nil); code != 404 {
			t.Errorf("GET %s = %d %s, want 404", tc.path, code, body)
		}
	}
	if code, body := policyDo(t, h, "GET", "/v1/policy/diff?from=x&to=1", "view-tok", nil); code != 422 {
		t.Errorf("bad from: %d %s, want 422", code, body)
	}
}

func TestPolicyProposalInvalidatedWhenMoved(t *testing.T) {
	h, holder := policyServer(t)
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	code, body := policyDo(t, h, "POST", "/v1/policy/proposals", "root-tok", api.ProposeBody{BaseRevision: 1, Policy: str(`
default: allow
approval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}
`)})
	var res api.ProposeResult
	if code != 202 || json.Unmarshal(body, &res) != nil {
		t.Fatalf("widening proposal = %d %s", code, body)
	}
	// Another change lands first.
	if code, body := policyDo(t, h, "POST", "/v1/policy/proposals", "admin-tok", api.ProposeBody{BaseRevision: 1, Policy: str(policyNarrow)}); code != 201 {
		t.Fatalf("narrowing = %d %s", code, body)
	}
	code, body = policyDo(t, h, "POST", "/v1/approvals/"+string(res.Approval.ID)+"/approve", "admin-tok", api.ApproveBody{})
	var a api.Approval
	if code != 200 || json.Unmarshal(body, &a) != nil || a.State != string(approval.StateInvalidated) {
		t.Fatalf("approve after the policy moved: %d %s, want 200 invalidated", code, body)
	}
	if got := effect(t, holder, "fs", "delete_file"); got != policy.Deny {
		t.Errorf("fs/delete_file is %s, want deny (nothing applied)", got)
	}
	code, body = policyDo(t, h, "GET", "/v1/policy", "view-tok", nil)
	var rev store.PolicyRevision
	if code != 200 || json.Unmarshal(body, &rev) != nil || rev.Revision != 2 || rev.CreatedBy != "ada" {
		t.Errorf("current = %d %s, want revision 2 by ada", code, body)
	}
}

// TestTenantAdminCannotChangeDeploymentPolicy: with a store-backed policy,
// an admin of a tenant may neither propose, nor decide, nor apply a change
// of the deployment policy, which governs every tenant; deployment admins
// still need a second one for a widening (issue 9 item 12).
func TestTenantAdminCannotChangeDeploymentPolicy(t *testing.T) {
	h, holder, db := policyServerDB(t)
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

	for _, p := range []string{policyNarrow, policyWide} {
		code, body := policyDo(t, h, "POST", "/v1/policy/proposals", "acme-tok", api.ProposeBody{BaseRevision: 1, Policy: str(p)})
		if code != 403 || !bytes.Contains(body, []byte("deployment admin")) {
			t.Errorf("tenant admin proposes: %d %s, want 403 naming deployment admins", code, body)
		}
	}
	code, body := policyDo(t, h, "GET", "/v1/policy", "acme-tok", nil)
	var rev store.PolicyRevision
	if code != 200 || json.Unmarshal(body, &rev) != nil || rev.Revision != 1 {
		t.Fatalf("GET /v1/policy by a tenant admin = %d %s, want revision 1 (reads are open, nothing changed)", code, body)
	}

	// A deployment admin's widening: invisible to the tenant's admins, and
	// still needs a second deployment admin.
	code, body = policyDo(t, h, "POST", "/v1/policy/proposals", "root-tok", api.ProposeBody{BaseRevision: 1, Policy: str(policyWide)})
	var res api.ProposeResult
	if code != 202 || json.Unmarshal(body, &res) != nil || res.Approval == nil {
		t.Fatalf("widening proposal = %d %s", code, body)
	}
	id := res.Approval.ID
	if res.Approval.Tenant != "" {
		t.Errorf("the proposal has tenant %q, want none", res.Approval.Tenant)
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/approvals/" + string(id)},
		{"POST", "/v1/approvals/" + string(id) + "/approve"},
	} {
		if code, body := policyDo(t, h, tc.method, tc.path, "acme-tok", api.ApproveBody{}); code != 404 {
			t.Errorf("tenant admin %s %s = %d %s, want 404", tc.method, tc.path, code, body)
		}
	}
	if code, body := policyDo(t, h, "POST", "/v1/policy/proposals/"+string(id)+"/apply", "acme-tok", nil); code != 403 {
		t.Errorf("tenant admin applies: %d %s, want 403", code, body)
	}
	if got := effect(t, holder, "fs", "delete_file"); got != policy.Deny {
		t.Errorf("fs/delete_file is %s, want deny (nothing applied)", got)
	}
	code, body = policyDo(t, h, "POST", "/v1/approvals/"+string(id)+"/approve", "admin-tok", api.ApproveBody{})
	var a api.Approval
	if code != 200 || json.Unmarshal(body, &a) != nil || a.State != string(approval.StateConsumed) {
		t.Fatalf("second deployment admin approves: %d %s, want consumed", code, body)
	}

	// A proposal recorded in a tenant (as before this rule) is never
	// decided by the tenant's admins nor applied by anyone.
	now := time.Now()
	legacy := approval.Request{
		ID: approval.ID("0190f0c0-0000-7000-8000-000000000001"), State: approval.StatePending,
		Arguments: json.RawMessage(`{"base_revision":2,"policy":"default: allow\n"}`), ArgumentsHash: "sha256:" + strings.Repeat("0", 64),
		Rule: policystore.RuleName, Mode: policy.ModeRetry, RequestedBy: "acme-admin", Tenant: "acme",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), RequiredApprovals: 1, ValidFor: time.Hour,
		Kind: approval.KindPolicyChange, Target: policystore.Target, BaseRevision: 2,
	}
	if err := db.CreateRequest(t.Context(), legacy); err != nil {
		t.Fatal(err)
	}
	if code, body := policyDo(t, h, "POST", "/v1/approvals/"+string(legacy.ID)+"/approve", "acme2-tok", api.ApproveBody{}); code != 403 {
		t.Errorf("tenant admin approves a tenant's policy proposal: %d %s, want 403", code, body)
	}
	if _, err := db.UpdateRequest(t.Context(), legacy.ID, "ada", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "ada"}, approval.VerdictApprove, "", "", now)
	}); err != nil {
		t.Fatal(err)
	}
	if code, body := policyDo(t, h, "POST", "/v1/policy/proposals/"+string(legacy.ID)+"/apply", "root-tok", nil); code != 403 {
		t.Errorf("applying a tenant's policy proposal: %d %s, want 403", code, body)
	}
	code, body = policyDo(t, h, "GET", "/v1/policy", "view-tok", nil)
	rev = store.PolicyRevision{}
	if code != 200 || json.Unmarshal(body, &rev) != nil || rev.Revision != 2 {
		t.Errorf("current revision = %d %s, want 2 (the tenant's proposal never applied)", code, body)
	}
}
