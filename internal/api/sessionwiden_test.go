package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/api"
	"toolgate/internal/session"
)

// TestChildRequireApprovalMayOnlyNarrow is polish18's item 1: a child
// session that states a require_approval weaker than what its parent
// chain requires of that server (false under true, a list missing a tool)
// used to get 201 and be overridden silently by the union with the
// parent's; it is refused as every other widening attempt of a child is
// (403 widen), with a message naming the field and the parent's effective
// value. Restating or adding to the parent's
// requirement is accepted, and a grandchild is checked against the whole
// chain (the root's requirement, inherited by a child that stated none).
func TestChildRequireApprovalMayOnlyNarrow(t *testing.T) {
	e := newSessionEnv(t)
	root := e.mustCreate(t, e.admin, "host-tok", `{"require_approval":{"fs":true,"pay":["refund"]}}`)
	mid := e.mustCreate(t, e.agent, root.Token, `{}`) // inherits fs: true, pay: ["refund"]
	fsOnly := e.mustCreate(t, e.admin, "host-tok", `{"require_approval":{"fs":true}}`)
	tests := []struct {
		name    string
		parent  string // token
		body    string
		status  int
		wantMsg []string
		wantEff map[string]session.Requirement
	}{
		{name: "false under true", parent: root.Token, body: `{"require_approval":{"fs":false}}`, status: 403,
			wantMsg: []string{"require_approval.fs = false", "its effective require_approval.fs is true"}},
		{name: "a list under true", parent: root.Token, body: `{"require_approval":{"fs":["write_file"]}}`, status: 403,
			wantMsg: []string{`require_approval.fs = ["write_file"]`, "its effective require_approval.fs is true"}},
		{name: "a list missing the parent's tool", parent: root.Token, body: `{"require_approval":{"pay":["transfer"]}}`, status: 403,
			wantMsg: []string{`require_approval.pay = ["transfer"]`, `its effective require_approval.pay is ["refund"]`}},
		{name: "grandchild against the root's", parent: mid.Token, body: `{"require_approval":{"pay":false}}`, status: 403,
			wantMsg: []string{"require_approval.pay = false", `its effective require_approval.pay is ["refund"]`}},
		{name: "restating the parent's", parent: root.Token, body: `{"require_approval":{"fs":true,"pay":["refund"]}}`, status: 201,
			wantEff: map[string]session.Requirement{"fs": {All: true}, "pay": {Tools: []string{"refund"}}}},
		{name: "adding to the parent's", parent: mid.Token, body: `{"require_approval":{"pay":["refund","transfer"]}}`, status: 201,
			wantEff: map[string]session.Requirement{"fs": {All: true}, "pay": {Tools: []string{"refund", "transfer"}}}},
		{name: "false where the parent requires nothing", parent: fsOnly.Token, body: `{"require_approval":{"pay":false}}`, status: 201,
			wantEff: map[string]session.Requirement{"fs": {All: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, e.agent, "POST", "/v1/sessions", tc.parent, tc.body)
			if a.status != tc.status {
				t.Fatalf("POST %s = %d %s, want %d", tc.body, a.status, a.body, tc.status)
			}
			if tc.status != http.StatusCreated {
				if a.code(t) != api.CodeWiden {
					t.Errorf("code %q, want %q", a.code(t), api.CodeWiden)
				}
				for _, w := range tc.wantMsg {
					if !strings.Contains(a.message(t), w) {
						t.Errorf("message %q lacks %q", a.message(t), w)
					}
				}
				return
			}
			c := decodeAs[api.CreatedSession](t, a)
			if diff := cmp.Diff(tc.wantEff, c.Session.Effective.RequireApproval); diff != "" {
				t.Errorf("effective require_approval mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPolicyRequestCannotDropParentRequirement: a child session asking to
// lift a requirement its parent holds used to be applied (or sent to
// approvers) although the union with the parent's kept it in force; it is
// past the session's ceiling (403 ceiling, naming the field and the
// parent's value), and the session's revision does not move.
func TestPolicyRequestCannotDropParentRequirement(t *testing.T) {
	e := newSessionEnv(t)
	root := e.mustCreate(t, e.admin, "host-tok", `{"require_approval":{"fs":["write_file"]}}`)
	child := e.mustCreate(t, e.agent, root.Token, `{"require_approval":{"fs":true}}`)
	path := "/v1/sessions/" + child.ID + "/policy-requests"
	for _, body := range []string{`{"require_approval":{"fs":false}}`, `{"require_approval":{"fs":["read_text_file"]}}`} {
		a := send(t, e.agent, "POST", path, child.Token, body)
		if a.status != http.StatusForbidden || a.code(t) != api.CodeCeiling {
			t.Fatalf("policy request %s = %d %s, want 403 %s", body, a.status, a.body, api.CodeCeiling)
		}
		if m := a.message(t); !strings.Contains(m, `effective require_approval.fs is ["write_file"]`) {
			t.Errorf("message %q does not name the parent's value", m)
		}
	}
	// Narrowing to exactly the parent's requirement is a change the
	// session may make (it needs approval: it drops its own true).
	if a := send(t, e.agent, "POST", path, child.Token, `{"require_approval":{"fs":["write_file"]}}`); a.status != http.StatusAccepted {
		t.Errorf("policy request down to the parent's requirement = %d %s, want 202", a.status, a.body)
	}
	got := send(t, e.admin, "GET", "/v1/sessions/"+child.ID, "host-tok", "")
	if s := decodeAs[api.Session](t, got); s.Revision != 1 {
		t.Errorf("revision %d after refused requests, want 1", s.Revision)
	}
}

// TestPutChildRequirementMayOnlyNarrow is polish19's item 1: the admin
// PUT …/require-approval on a child session accepted and stored a value
// weaker than its parent chain's (false under true, a list missing the
// parent's tool), which the union then overrode: GET showed an own
// setting that lied about what happens. It is refused as creating such a
// child is (403 widen, naming the field and the parent's effective
// value), nothing is written, and restating or adding is accepted.
func TestPutChildRequirementMayOnlyNarrow(t *testing.T) {
	e := newSessionEnv(t)
	root := e.mustCreate(t, e.admin, "host-tok", `{"require_approval":{"fs":true,"pay":["refund"]}}`)
	mid := e.mustCreate(t, e.agent, root.Token, `{}`)
	child := e.mustCreate(t, e.agent, mid.Token, `{}`) // inherits the root's through mid
	put := func(server, body string, rev int64) answer {
		return send(t, e.admin, "PUT", "/v1/sessions/"+child.ID+"/servers/"+server+"/require-approval", "host-tok", body,
			"If-Match", strconv.FormatInt(rev, 10))
	}
	for _, tc := range []struct{ server, body, asked, parent string }{
		{"fs", `false`, "require_approval.fs = false", "its effective require_approval.fs is true"},
		{"fs", `["write_file"]`, `require_approval.fs = ["write_file"]`, "its effective require_approval.fs is true"},
		{"pay", `["transfer"]`, `require_approval.pay = ["transfer"]`, `its effective require_approval.pay is ["refund"]`},
		{"pay", `false`, "require_approval.pay = false", `its effective require_approval.pay is ["refund"]`},
	} {
		a := put(tc.server, tc.body, 1)
		if a.status != http.StatusForbidden || a.code(t) != api.CodeWiden {
			t.Fatalf("PUT %s %s = %d %s, want 403 %s", tc.server, tc.body, a.status, a.body, api.CodeWiden)
		}
		for _, w := range []string{tc.asked, tc.parent, "a child session may only narrow its parent's policy"} {
			if !strings.Contains(a.message(t), w) {
				t.Errorf("PUT %s %s: message %q lacks %q", tc.server, tc.body, a.message(t), w)
			}
		}
	}
	if s := decodeAs[api.Session](t, send(t, e.admin, "GET", "/v1/sessions/"+child.ID, "host-tok", "")); s.Revision != 1 || len(s.RequireApproval) != 0 {
		t.Fatalf("after refused PUTs: revision %d, own require_approval %v; want 1 and none", s.Revision, s.RequireApproval)
	}
	if a := put("pay", `["refund","transfer"]`, 1); a.status != http.StatusOK {
		t.Fatalf("PUT adding to the parent's = %d %s, want 200", a.status, a.body)
	}
	if a := put("fs", `true`, 2); a.status != http.StatusOK {
		t.Fatalf("PUT restating the parent's = %d %s, want 200", a.status, a.body)
	}
	// A root session has no parent: any value is its own to set.
	if a := send(t, e.admin, "PUT", "/v1/sessions/"+root.ID+"/servers/fs/require-approval", "host-tok", `false`, "If-Match", "1"); a.status != http.StatusOK {
		t.Fatalf("PUT false on the root = %d %s, want 200", a.status, a.body)
	}
}
