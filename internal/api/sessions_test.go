package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// sessionEnv is an admin API and an agent-side session API over a real
// gate and SQLite store, with servers fs and pay.
type sessionEnv struct {
	admin   http.Handler
	agent   http.Handler
	g       *gate.Gate
	changed atomic.Int32
}

func newSessionEnv(t *testing.T) *sessionEnv {
	t.Helper()
	db := sqlitetest.Open(t)
	pol := &policy.Policy{Default: policy.Allow, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}}
	g := gate.New(db, pol, &gate.Options{ServerExists: func(s string) bool { return s == "fs" || s == "pay" }})
	e := &sessionEnv{g: g}
	e.admin = api.New(g, authenticate, &api.Options{Sessions: g, SessionsChanged: func() { e.changed.Add(1) }})
	e.agent = api.NewAgentSessions(g, func(tok string) (approval.Principal, bool) {
		if tok == "plain-agent" {
			return approval.Principal{ID: "desktop", Kind: "agent"}, true
		}
		s, err := db.SessionByToken(t.Context(), gate.HashToken(tok))
		if err != nil {
			return approval.Principal{}, false
		}
		return approval.Principal{ID: s.Principal, Kind: "agent", Tenant: s.Tenant, OnBehalfOf: s.OnBehalfOf, SessionID: string(s.ID)}, true
	}, nil)
	return e
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) code(t *testing.T) string {
	t.Helper()
	var e api.ErrorBody
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

func (a answer) message(t *testing.T) string {
	t.Helper()
	var e api.ErrorBody
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Message
}

func send(t *testing.T, h http.Handler, method, path, token, body string, header ...string) answer {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func decodeAs[T any](t *testing.T, a answer) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
	return v
}

// mustCreate creates a session through h and returns it.
func (e *sessionEnv) mustCreate(t *testing.T, h http.Handler, token, body string) api.CreatedSession {
	t.Helper()
	a := send(t, h, "POST", "/v1/sessions", token, body)
	if a.status != http.StatusCreated {
		t.Fatalf("POST /v1/sessions %s = %d %s", body, a.status, a.body)
	}
	return decodeAs[api.CreatedSession](t, a)
}

func TestSessionRoutesNarrowing(t *testing.T) {
	e := newSessionEnv(t)
	parent := e.mustCreate(t, e.admin, "host-tok", `{"tools":["pay__refund","fs"]}`)
	if parent.Session.Mode != session.ModeExplicit || parent.Token == "" {
		t.Fatalf("parent = %+v, want explicit with a token", parent)
	}
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantMode   session.Mode
		wantTools  []string // effective
		wantMsg    string
	}{
		{name: "narrower", body: `{"tools":["fs__read_text_file"]}`, wantStatus: 201, wantMode: session.ModeExplicit, wantTools: []string{"fs__read_text_file"}},
		{name: "widen names the ref", body: `{"tools":["pay"]}`, wantStatus: 403,
			wantMsg: "child tools may only narrow the parent session tool policy: pay"},
		{name: "inherited", body: `{}`, wantStatus: 201, wantMode: session.ModeInherited, wantTools: []string{"fs", "pay__refund"}},
		{name: "null tools is not given", body: `{"tools":null}`, wantStatus: 201, wantMode: session.ModeInherited, wantTools: []string{"fs", "pay__refund"}},
		{name: "empty", body: `{"tools":[]}`, wantStatus: 201, wantMode: session.ModeExplicit, wantTools: []string{}},
		{name: "unknown server", body: `{"tools":["db"]}`, wantStatus: 422},
		{name: "bad ref", body: `{"tools":["FS"]}`, wantStatus: 422},
		{name: "unknown field", body: `{"toolz":[]}`, wantStatus: 422},
		{name: "on_behalf_of is the parent's", body: `{"on_behalf_of":"mallory"}`, wantStatus: 422},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, e.agent, "POST", "/v1/sessions", parent.Token, tc.body)
			if a.status != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", a.status, a.body, tc.wantStatus)
			}
			if tc.wantMsg != "" && a.message(t) != tc.wantMsg {
				t.Errorf("message %q, want %q", a.message(t), tc.wantMsg)
			}
			if a.status != 201 {
				return
			}
			c := decodeAs[api.CreatedSession](t, a)
			if c.Session.Mode != tc.wantMode || c.Session.ParentID != parent.ID {
				t.Errorf("child mode %s parent %s, want %s under %s", c.Session.Mode, c.Session.ParentID, tc.wantMode, parent.ID)
			}
			if diff := cmp.Diff(tc.wantTools, c.Session.Effective.Tools); diff != "" {
				t.Errorf("effective tools mismatch (-want +got):\n%s", diff)
			}
		})
	}
	// Nothing was created by the refused requests: the parent has exactly
	// the children created above.
	if got := send(t, e.agent, "POST", "/v1/sessions", "plain-agent", `{}`); got.status != 403 {
		t.Errorf("agent token creating a session on the agent side: %d, want 403", got.status)
	}
	if got := send(t, e.agent, "POST", "/v1/sessions", "", `{}`); got.status != 401 {
		t.Errorf("no token: %d, want 401", got.status)
	}
	// Session tokens never reach the admin listener; agent roles cannot create roots.
	if got := send(t, e.admin, "POST", "/v1/sessions", parent.Token, `{}`); got.status != 401 {
		t.Errorf("session token on the admin API: %d, want 401", got.status)
	}
	if got := send(t, e.admin, "POST", "/v1/sessions", "alice-tok", `{}`); got.status != 403 {
		t.Errorf("approver creating a session: %d, want 403", got.status)
	}
}

func TestSessionRoutesGetPutDelete(t *testing.T) {
	e := newSessionEnv(t)
	root := e.mustCreate(t, e.admin, "host-tok", `{"require_approval":{"fs":["write_file"]}}`)
	child := e.mustCreate(t, e.agent, root.Token, `{"tools":["fs"],"require_approval":{"pay":["b","a","a"]}}`)
	if root.Session.Mode != session.ModeDefault || root.Session.Effective.ToolsFrom != "deployment" {
		t.Errorf("root = %+v, want default mode tracking the deployment", root.Session)
	}

	get := send(t, e.admin, "GET", "/v1/sessions/"+child.ID, "host-tok", "")
	if get.status != 200 || get.header.Get("ETag") != `"1"` {
		t.Fatalf("GET = %d %s ETag %q", get.status, get.body, get.header.Get("ETag"))
	}
	s := decodeAs[api.Session](t, get)
	wantOwn := map[string]session.Requirement{"pay": {Tools: []string{"a", "b"}}}
	wantEff := map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}, "pay": {Tools: []string{"a", "b"}}}
	if diff := cmp.Diff(wantOwn, s.RequireApproval); diff != "" {
		t.Errorf("own require_approval mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantEff, s.Effective.RequireApproval); diff != "" {
		t.Errorf("effective require_approval mismatch (-want +got):\n%s", diff)
	}
	if len(s.Ancestors) != 1 || s.Ancestors[0].ID != root.ID || s.Effective.ToolsFrom != child.ID {
		t.Errorf("provenance: ancestors %+v tools_from %q", s.Ancestors, s.Effective.ToolsFrom)
	}
	if !strings.Contains(string(get.body), `"pay":["a","b"]`) {
		t.Errorf("body %s does not show the sorted list", get.body)
	}

	put := func(body, ifMatch string) answer {
		h := []string{}
		if ifMatch != "" {
			h = []string{"If-Match", ifMatch}
		}
		return send(t, e.admin, "PUT", "/v1/sessions/"+child.ID+"/servers/pay/require-approval", "host-tok", body, h...)
	}
	tests := []struct {
		name, body, ifMatch string
		wantStatus          int
		wantChanged         bool
		wantRevision        int64
	}{
		{name: "change", body: `true`, ifMatch: `"1"`, wantStatus: 200, wantChanged: true, wantRevision: 2},
		{name: "unchanged", body: `true`, ifMatch: `2`, wantStatus: 200, wantChanged: false, wantRevision: 2},
		{name: "stale", body: `false`, ifMatch: `1`, wantStatus: 409},
		{name: "missing If-Match", body: `false`, wantStatus: 428},
		{name: "bad body", body: `"yes"`, ifMatch: `2`, wantStatus: 422},
		{name: "empty list is false", body: `[]`, ifMatch: `2`, wantStatus: 200, wantChanged: true, wantRevision: 3},
		{name: "false again is unchanged", body: `false`, ifMatch: `3`, wantStatus: 200, wantChanged: false, wantRevision: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := put(tc.body, tc.ifMatch)
			if a.status != tc.wantStatus {
				t.Fatalf("PUT = %d %s, want %d", a.status, a.body, tc.wantStatus)
			}
			if a.status != 200 {
				return
			}
			got := decodeAs[api.RequirementChange](t, a)
			want := api.RequirementChange{Changed: tc.wantChanged, EffectiveFrom: "next_call", Revision: tc.wantRevision}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("PUT answer mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if a := send(t, e.admin, "PUT", "/v1/sessions/"+child.ID+"/servers/db/require-approval", "host-tok", `true`, "If-Match", "3"); a.status != 422 {
		t.Errorf("PUT unknown server = %d, want 422", a.status)
	}
	if a := send(t, e.admin, "GET", "/v1/sessions/01900000-0000-7000-8000-0000000000ff", "host-tok", ""); a.status != 404 {
		t.Errorf("GET unknown = %d, want 404", a.status)
	}
	if a := send(t, e.admin, "GET", "/v1/sessions/"+child.ID, "acme-tok", ""); a.status != 404 {
		t.Errorf("GET from another tenant = %d, want 404", a.status)
	}

	del := send(t, e.admin, "DELETE", "/v1/sessions/"+root.ID, "host-tok", "")
	if del.status != 200 {
		t.Fatalf("DELETE = %d %s", del.status, del.body)
	}
	rv := decodeAs[api.Revoked](t, del)
	if diff := cmp.Diff([]string{root.ID, child.ID}, rv.Revoked); diff != "" {
		t.Errorf("revoked mismatch (-want +got):\n%s", diff)
	}
	if e.changed.Load() != 1 {
		t.Errorf("SessionsChanged called %d times, want 1", e.changed.Load())
	}
	if a := send(t, e.agent, "POST", "/v1/sessions", child.Token, `{}`); a.status != 404 {
		t.Errorf("child of a revoked session = %d %s, want 404", a.status, a.body)
	}
	if a := put(`true`, "3"); a.status != 404 {
		t.Errorf("PUT on a revoked session = %d, want 404", a.status)
	}
	if s := decodeAs[api.Session](t, send(t, e.admin, "GET", "/v1/sessions/"+child.ID, "viewer-tok", "")); !s.Effective.Revoked {
		t.Errorf("GET after revocation: effective.revoked false")
	}
}
