package api_test

import (
	"net/http"
	"testing"

	"toolgate/internal/api"
	"toolgate/internal/gate"
)

func TestPolicyRequestRoute(t *testing.T) {
	e := newSessionEnv(t)
	s := e.mustCreate(t, e.admin, "host-tok", `{"tools":["fs__read","fs__write"],"on_behalf_of":"carol"}`)
	other := e.mustCreate(t, e.admin, "host-tok", `{}`)
	path := "/v1/sessions/" + s.ID + "/policy-requests"

	a := send(t, e.agent, "POST", path, s.Token, `{"tools":["fs__read"]}`)
	if got := decodeAs[gate.PolicyAnswer](t, a); a.status != http.StatusOK || got.Status != gate.PolicyApplied || got.Revision != 2 {
		t.Fatalf("narrowing = %d %s", a.status, a.body)
	}

	a = send(t, e.agent, "POST", path, s.Token, `{"tools":["fs"]}`)
	wide := decodeAs[gate.PolicyAnswer](t, a)
	if a.status != http.StatusAccepted || wide.Status != gate.PolicyApprovalRequired || wide.ApprovalID == "" || wide.ExpiresAt.IsZero() {
		t.Fatalf("widening = %d %s", a.status, a.body)
	}
	a = send(t, e.admin, "GET", "/v1/approvals/"+wide.ApprovalID, "alice-tok", "")
	if got := decodeAs[api.Approval](t, a); got.Kind != "session_policy" || got.Target != s.ID || got.BaseRevision != 2 || got.RequestedBy != "session:"+s.ID {
		t.Errorf("approval = %s", a.body)
	}
	if a := send(t, e.admin, "POST", "/v1/approvals/"+wide.ApprovalID+"/approve", "carol-tok", `{}`); a.status != http.StatusForbidden || a.code(t) != api.CodeSelfReview {
		t.Errorf("approve by the session's principal = %d %s, want 403 self_review", a.status, a.body)
	}
	if a := send(t, e.admin, "POST", "/v1/approvals/"+wide.ApprovalID+"/approve", "alice-tok", `{}`); a.status != http.StatusOK {
		t.Fatalf("approve = %d %s", a.status, a.body)
	}
	a = send(t, e.agent, "POST", path, s.Token, `{"tools":["fs"]}`)
	if got := decodeAs[gate.PolicyAnswer](t, a); a.status != http.StatusOK || got.Status != gate.PolicyApplied || got.Revision != 3 {
		t.Fatalf("retry after approval = %d %s", a.status, a.body)
	}

	a = send(t, e.agent, "POST", path, s.Token, `{"tools":["fs","pay"]}`)
	wide = decodeAs[gate.PolicyAnswer](t, a)
	if a := send(t, e.admin, "POST", "/v1/approvals/"+wide.ApprovalID+"/deny", "alice-tok", `{"reason":"no payments"}`); a.status != http.StatusOK {
		t.Fatalf("deny = %d %s", a.status, a.body)
	}
	a = send(t, e.agent, "POST", path, s.Token, `{"tools":["fs","pay"]}`)
	if got := decodeAs[api.PolicyRequestDenied](t, a); a.status != http.StatusForbidden || got.Status != gate.PolicyDenied ||
		got.Reason != "no payments" || got.Error.Code != api.CodePolicyDenied {
		t.Errorf("after denial = %d %s", a.status, a.body)
	}

	tests := []struct {
		name, path, token, body string
		status                  int
		code                    string
	}{
		{name: "past the ceiling", path: path, token: s.Token, body: `{"tools":["db"]}`, status: 403, code: api.CodeCeiling},
		{name: "another session", path: "/v1/sessions/" + other.ID + "/policy-requests", token: s.Token, body: `{"tools":[]}`, status: 403, code: api.CodeForbidden},
		{name: "not a session token", path: path, token: "plain-agent", body: `{"tools":[]}`, status: 403, code: api.CodeForbidden},
		{name: "no token", path: path, body: `{"tools":[]}`, status: 401, code: api.CodeUnauthorized},
		{name: "nothing to change", path: path, token: s.Token, body: `{}`, status: 422, code: api.CodeInvalid},
		{name: "unknown field", path: path, token: s.Token, body: `{"toolz":[]}`, status: 422, code: api.CodeInvalid},
		{name: "bad requirement", path: path, token: s.Token, body: `{"require_approval":{"fs":null}}`, status: 422, code: api.CodeInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, e.agent, "POST", tc.path, tc.token, tc.body)
			if a.status != tc.status || a.code(t) != tc.code {
				t.Errorf("= %d %s, want %d %s", a.status, a.body, tc.status, tc.code)
			}
		})
	}
}
