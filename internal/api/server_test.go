package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/api"
	"toolgate/internal/api/apitest"
	"toolgate/internal/approval"
	"toolgate/internal/store"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Fixture ids.
const (
	idPending  = "01900000-0000-7000-8000-000000000001" // any approver, 1 needed
	idOps      = "01900000-0000-7000-8000-000000000002" // group:ops, 2 needed
	idApproved = "01900000-0000-7000-8000-000000000003"
	idExpired  = "01900000-0000-7000-8000-000000000004" // pending, past its deadline
	idAcme     = "01900000-0000-7000-8000-000000000005" // tenant acme
	idMissing  = "01900000-0000-7000-8000-0000000000ff"
	hashA      = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB      = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

type identity struct {
	p     approval.Principal
	roles []string
}

var identities = map[string]identity{
	"viewer-tok": {approval.Principal{ID: "vera", Kind: "human"}, []string{api.RoleViewer}},
	"alice-tok":  {approval.Principal{ID: "alice", Kind: "human", Groups: []string{"ops"}}, []string{api.RoleApprover}},
	"bob-tok":    {approval.Principal{ID: "bob", Kind: "human"}, []string{api.RoleApprover}},
	"dave-tok":   {approval.Principal{ID: "dave", Kind: "human", Groups: []string{"ops"}}, []string{api.RoleViewer, api.RoleApprover}},
	"admin-tok":  {approval.Principal{ID: "root", Kind: "human"}, []string{api.RoleAdmin}},
	"host-tok":   {approval.Principal{ID: "ci", Kind: "agent"}, []string{api.RoleHost}},
	"agent-tok":  {approval.Principal{ID: "desktop", Kind: "human"}, []string{api.RoleApprover}},
	"carol-tok":  {approval.Principal{ID: "carol", Kind: "human"}, []string{api.RoleApprover}},
	"acme-tok":   {approval.Principal{ID: "erin", Kind: "human", Tenant: "acme"}, []string{api.RoleApprover}},
}

func authenticate(token string) (approval.Principal, []string, bool) {
	id, ok := identities[token]
	return id.p, id.roles, ok
}

func pending(id string) approval.Request {
	return approval.Request{
		ID:                approval.ID(id),
		State:             approval.StatePending,
		Server:            "pay",
		Tool:              "transfer",
		Arguments:         json.RawMessage(`{"to":"acct-1","amount":5}`),
		ArgumentsHash:     hashA,
		DisplayWarnings:   []string{},
		Rule:              "payments",
		Mode:              "hold",
		RequestedBy:       "desktop",
		OnBehalfOf:        "carol",
		CreatedAt:         t0.Add(-time.Minute),
		ExpiresAt:         t0.Add(5 * time.Minute),
		RequiredApprovals: 1,
	}
}

func fixtures() []approval.Request {
	ops := pending(idOps)
	ops.RequiredApprovals = 2
	ops.Approvers = []string{"group:ops"}
	approved := pending(idApproved)
	approved.State = approval.StateApproved
	approved.Reviews = []approval.Review{{By: "alice", Verdict: approval.VerdictApprove, Reason: "fine", At: t0.Add(-30 * time.Second)}}
	approved.DecidedBy, approved.DecidedAt, approved.Reason = "alice", t0.Add(-30*time.Second), "fine"
	expired := pending(idExpired)
	expired.ExpiresAt = t0.Add(-time.Second)
	acme := pending(idAcme)
	acme.Tenant = "acme"
	return []approval.Request{pending(idPending), ops, approved, expired, acme}
}

type env struct {
	fake  *apitest.Approvals
	srv   *httptest.Server
	ready error
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{fake: apitest.New(func() time.Time { return t0 })}
	for _, r := range fixtures() {
		e.fake.Add(r)
	}
	s := api.New(e.fake, authenticate, &api.Options{
		Ready:   func(context.Context) error { return e.ready },
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "toolgate_up 1\n") }),
		Now:     func() time.Time { return t0 },
	})
	e.srv = httptest.NewServer(s)
	t.Cleanup(e.srv.Close)
	return e
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (e *env) do(t *testing.T, method, path, token, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func errorCode(t *testing.T, b []byte) (code, msg string) {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil {
		t.Fatalf("error body %q: %v", b, err)
	}
	return eb.Error.Code, eb.Error.Message
}

func TestStatuses(t *testing.T) {
	// A decision whose COMMIT's answer was lost and whose outcome the
	// store could not learn (sqlstore: pgSettle, pgSettleWritten).
	inDoubt := fmt.Errorf("commit: %w: %w: unexpected EOF", store.ErrInDoubt, store.ErrUnavailable)
	tests := []struct {
		name         string
		method, path string
		token, body  string
		setup        func(e *env)
		wantStatus   int
		wantCode     string // "" for success
		wantMsg      string // substring of the error message
	}{
		{name: "no token", method: "GET", path: "/v1/approvals", wantStatus: 401, wantCode: api.CodeUnauthorized},
		{name: "unknown token", method: "GET", path: "/v1/approvals", token: "nope", wantStatus: 401, wantCode: api.CodeUnauthorized, wantMsg: "takes an approver's token (approvers[] in the config, or the approver token the running serve --dev printed: each start prints new ones)"},
		{name: "unknown token on review", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "nope", wantStatus: 401, wantCode: api.CodeUnauthorized},
		{name: "host role reads", method: "GET", path: "/v1/approvals", token: "host-tok", wantStatus: 403, wantCode: api.CodeForbidden,
			wantMsg: "this needs one of the roles viewer, approver, admin"},
		{name: "viewer reads list", method: "GET", path: "/v1/approvals", token: "viewer-tok", wantStatus: 200},
		{name: "viewer reads one", method: "GET", path: "/v1/approvals/" + idPending, token: "viewer-tok", wantStatus: 200},
		{name: "viewer approves", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "viewer-tok", wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "viewer denies", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "viewer-tok", wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "admin approves", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "admin-tok", wantStatus: 200},
		{name: "approver denies", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"no"}`, wantStatus: 200},
		{name: "requester reviews own call", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "agent-tok", wantStatus: 403, wantCode: api.CodeSelfReview},
		{name: "on_behalf_of reviews", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "carol-tok", body: `{"reason":"mine"}`, wantStatus: 403, wantCode: api.CodeSelfReview},
		{name: "duplicate key in a body", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"a","reason":"b"}`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "duplicate key after an unpaired surrogate", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"\ud800","reason":"b"}`, wantStatus: 422, wantCode: api.CodeInvalid, wantMsg: "unpaired surrogate"},
		{name: "unpaired surrogate in a reason", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"no \udc00"}`, wantStatus: 422, wantCode: api.CodeInvalid, wantMsg: "unpaired surrogate"},
		{name: "invalid UTF-8 in a reason", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: "{\"reason\":\"no \xff\"}", wantStatus: 422, wantCode: api.CodeInvalid, wantMsg: "invalid UTF-8"},
		{name: "keys differing only in case", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"a","REASON":"b"}`, wantStatus: 422, wantCode: api.CodeInvalid, wantMsg: "differ only in case"},
		{name: "a field in another case", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"Reason":"a"}`, wantStatus: 422, wantCode: api.CodeInvalid, wantMsg: `unknown key "Reason"`},
		{name: "a pinned hash in another case", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "bob-tok", body: `{"ARGUMENTS_HASH":"` + hashB + `"}`, wantStatus: 422, wantCode: api.CodeInvalid, wantMsg: "ARGUMENTS_HASH"},
		{name: "garbage cursor", method: "GET", path: "/v1/approvals?cursor=garbage", token: "viewer-tok", wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "deny without a reason", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{}`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "deny with a blank reason", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"  "}`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "not in the rule's approvers", method: "POST", path: "/v1/approvals/" + idOps + "/approve", token: "bob-tok", wantStatus: 403, wantCode: api.CodeNotEligible},
		{name: "unknown id", method: "GET", path: "/v1/approvals/" + idMissing, token: "viewer-tok", wantStatus: 404, wantCode: api.CodeNotFound},
		{name: "unknown id review", method: "POST", path: "/v1/approvals/" + idMissing + "/approve", token: "alice-tok", wantStatus: 404, wantCode: api.CodeNotFound},
		// A short id (the CLI and the inbox take one) is not found, and the
		// message says how to find the whole id.
		{name: "malformed id", method: "GET", path: "/v1/approvals/019000", token: "viewer-tok", wantStatus: 404, wantCode: api.CodeNotFound, wantMsg: `no approval "019000": the path takes the whole approval id (36 characters); find it from a part with GET /v1/approvals?id_prefix= or ?id_suffix=`},
		{name: "malformed id review", method: "POST", path: "/v1/approvals/not-a-uuid/approve", token: "alice-tok", wantStatus: 404, wantCode: api.CodeNotFound, wantMsg: "?id_prefix= or ?id_suffix="},
		{name: "upper-case id", method: "GET", path: "/v1/approvals/" + strings.ToUpper(idPending), token: "viewer-tok", wantStatus: 200},
		{name: "other tenant reads", method: "GET", path: "/v1/approvals/" + idPending, token: "acme-tok", wantStatus: 404, wantCode: api.CodeNotFound},
		{name: "other tenant reviews", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "acme-tok", wantStatus: 404, wantCode: api.CodeNotFound},
		{name: "own tenant reviews", method: "POST", path: "/v1/approvals/" + idAcme + "/approve", token: "acme-tok", wantStatus: 200},
		{name: "approve resolved", method: "POST", path: "/v1/approvals/" + idApproved + "/approve", token: "bob-tok", wantStatus: 409, wantCode: api.CodeResolved, wantMsg: "(state: approved, decided by "},
		{name: "deny resolved", method: "POST", path: "/v1/approvals/" + idApproved + "/deny", token: "bob-tok", body: `{"reason":"late"}`, wantStatus: 409, wantCode: api.CodeResolved},
		{name: "approve past deadline", method: "POST", path: "/v1/approvals/" + idExpired + "/approve", token: "bob-tok", wantStatus: 409, wantCode: api.CodeExpired},
		{name: "conflicting verdict", method: "POST", path: "/v1/approvals/" + idApproved + "/deny", token: "alice-tok", body: `{"reason":"changed my mind"}`, wantStatus: 409, wantCode: api.CodeConflict, wantMsg: "you already gave the other verdict on this request, and it stands (state: approved, decided by alice): nothing was recorded"},
		{name: "hash mismatch", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "bob-tok", body: `{"arguments_hash":"` + hashB + `"}`, wantStatus: 409, wantCode: api.CodeHashMismatch, wantMsg: hashA},
		{name: "hash pinned and matching", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "bob-tok", body: `{"arguments_hash":"` + hashA + `"}`, wantStatus: 200},
		{name: "same verdict again", method: "POST", path: "/v1/approvals/" + idApproved + "/approve", token: "alice-tok", wantStatus: 200},
		{name: "malformed hash", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "bob-tok", body: `{"arguments_hash":"sha256:xyz"}`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "upper-case hash", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "bob-tok", body: `{"arguments_hash":"` + strings.ToUpper(hashA) + `"}`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "unknown field", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "bob-tok", body: `{"reason":"x","force":true}`, wantStatus: 422, wantCode: api.CodeInvalid, wantMsg: "force"},
		{name: "hash on deny", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"arguments_hash":"` + hashA + `"}`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "wrong type", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":5}`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "not an object", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `["no"]`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "trailing data", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"a"}{}`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "broken json", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "reason too long", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"` + strings.Repeat("x", 2001) + `"}`, wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "body too large", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"` + strings.Repeat("x", 64<<10) + `"}`, wantStatus: 413, wantCode: api.CodeTooLarge},
		{name: "bad state", method: "GET", path: "/v1/approvals?state=waiting", token: "viewer-tok", wantStatus: 422, wantCode: api.CodeInvalid, wantMsg: "waiting"},
		{name: "state all", method: "GET", path: "/v1/approvals?state=all", token: "viewer-tok", wantStatus: 200},
		{name: "limit zero", method: "GET", path: "/v1/approvals?limit=0", token: "viewer-tok", wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "bad order", method: "GET", path: "/v1/approvals?order=latest", token: "viewer-tok", wantStatus: 422, wantCode: api.CodeInvalid, wantMsg: `order "latest": want oldest (the default) or newest`},
		{name: "limit not a number", method: "GET", path: "/v1/approvals?limit=ten", token: "viewer-tok", wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "limit too big", method: "GET", path: "/v1/approvals?limit=1001", token: "viewer-tok", wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "limit max", method: "GET", path: "/v1/approvals?limit=1000", token: "viewer-tok", wantStatus: 200},
		{name: "id_prefix not hex", method: "GET", path: "/v1/approvals?id_prefix=xyz", token: "viewer-tok", wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "id_prefix too long", method: "GET", path: "/v1/approvals?id_prefix=" + idPending + "0", token: "viewer-tok", wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "cursor too long", method: "GET", path: "/v1/approvals?cursor=" + strings.Repeat("c", 513), token: "viewer-tok", wantStatus: 422, wantCode: api.CodeInvalid},
		{name: "store unavailable", method: "GET", path: "/v1/approvals", token: "viewer-tok", setup: func(e *env) { e.fake.SetErr(fmt.Errorf("dial: %w", store.ErrUnavailable)) }, wantStatus: 503, wantCode: api.CodeUnavailable},
		{name: "store unavailable on review", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "bob-tok", setup: func(e *env) { e.fake.SetErr(store.ErrUnavailable) }, wantStatus: 503, wantCode: api.CodeUnavailable},
		{name: "store in doubt on approve", method: "POST", path: "/v1/approvals/" + idPending + "/approve", token: "bob-tok", setup: func(e *env) { e.fake.SetErr(inDoubt) }, wantStatus: 503, wantCode: api.CodeUnavailable, wantMsg: "the decision may have been recorded"},
		{name: "store in doubt on deny", method: "POST", path: "/v1/approvals/" + idPending + "/deny", token: "bob-tok", body: `{"reason":"no"}`, setup: func(e *env) { e.fake.SetErr(inDoubt) }, wantStatus: 503, wantCode: api.CodeUnavailable, wantMsg: "read the approval before retrying"},
		{name: "internal error hides its cause", method: "GET", path: "/v1/approvals/" + idPending, token: "viewer-tok", setup: func(e *env) { e.fake.SetErr(errors.New("secret dsn postgres://u:pw@h")) }, wantStatus: 500, wantCode: api.CodeInternal, wantMsg: "internal error"},
		{name: "healthz", method: "GET", path: "/healthz", wantStatus: 200},
		{name: "readyz", method: "GET", path: "/readyz", wantStatus: 200},
		{name: "readyz failing", method: "GET", path: "/readyz", setup: func(e *env) { e.ready = errors.New("store: ping: connection refused") }, wantStatus: 503, wantCode: api.CodeUnavailable, wantMsg: "connection refused"},
		{name: "metrics without auth", method: "GET", path: "/metrics", wantStatus: 200},
		{name: "unknown route", method: "GET", path: "/v1/nothing", token: "admin-tok", wantStatus: 404, wantCode: api.CodeNotFound},
		{name: "wrong method", method: "DELETE", path: "/v1/approvals/" + idPending, token: "admin-tok", wantStatus: 405, wantCode: api.CodeMethod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.setup != nil {
				tt.setup(e)
			}
			resp := e.do(t, tt.method, tt.path, tt.token, tt.body)
			if resp.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.status, tt.wantStatus, resp.body)
			}
			if ct := resp.header.Get("Content-Type"); tt.path != "/metrics" && ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if tt.wantCode == "" {
				if tt.path != "/metrics" && !json.Valid(resp.body) {
					t.Errorf("body is not JSON: %s", resp.body)
				}
				return
			}
			code, msg := errorCode(t, resp.body)
			if code != tt.wantCode {
				t.Errorf("code = %q, want %q (message %q)", code, tt.wantCode, msg)
			}
			if !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", msg, tt.wantMsg)
			}
			if strings.Contains(string(resp.body), "pw@") {
				t.Errorf("body leaks the cause: %s", resp.body)
			}
			if got := resp.header.Get("WWW-Authenticate"); (resp.status == 401) != strings.HasPrefix(got, "Bearer") {
				t.Errorf("WWW-Authenticate = %q with status %d", got, resp.status)
			}
			if resp.status == 405 && resp.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

func TestBearerSchemeCaseInsensitive(t *testing.T) {
	e := newEnv(t)
	for _, h := range []struct {
		value string
		want  int
	}{
		{"bearer viewer-tok", 200},
		{"BEARER viewer-tok", 200},
		{"Basic dmlld2VyLXRvazo=", 401},
		{"Bearer", 401},
		{"Bearer ", 401},
		{"viewer-tok", 401},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/v1/approvals", nil)
		req.Header.Set("Authorization", h.value)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != h.want {
			t.Errorf("Authorization %q: status %d, want %d", h.value, resp.StatusCode, h.want)
		}
	}
}

func TestApprovalJSONShape(t *testing.T) {
	e := newEnv(t)
	full := pending("01900000-0000-7000-8000-0000000000aa")
	full.State = approval.StateConsumed
	full.Tenant = "acme"
	full.DisplayWarnings = []string{"$.to: contains U+200B ZERO WIDTH SPACE"}
	full.Approvers = []string{"alice", "group:ops"}
	// A non-UTC zone must come out as UTC.
	ny := time.FixedZone("NY", -5*3600)
	full.Reviews = []approval.Review{{By: "alice", Verdict: approval.VerdictApprove, Reason: "ok", At: t0.In(ny)}}
	full.DecidedBy, full.DecidedAt, full.Reason = "alice", t0.In(ny), "ok"
	full.ConsumedAt = t0.Add(time.Second)
	full.DispatchOutcome = approval.OutcomeOK
	full.ToolDigest = "sha256:digest"
	full.HeldBy, full.LeaseUntil = "instance-1", t0
	e.fake.Add(full)

	tests := []struct {
		name, id, want string
	}{
		{name: "every field", id: string(full.ID), want: `{
			"id": "01900000-0000-7000-8000-0000000000aa", "state": "consumed", "server": "pay", "tool": "transfer",
			"arguments": {"to": "acct-1", "amount": 5}, "arguments_hash": "` + hashA + `",
			"display_warnings": ["$.to: contains U+200B ZERO WIDTH SPACE"], "rule": "payments", "mode": "hold",
			"requested_by": "desktop", "on_behalf_of": "carol", "tenant": "acme",
			"created_at": "2026-01-02T03:03:05Z", "expires_at": "2026-01-02T03:09:05Z", "required_approvals": 1,
			"approvers": ["alice", "group:ops"],
			"reviews": [{"by": "alice", "verdict": "approve", "reason": "ok", "at": "2026-01-02T03:04:05Z"}],
			"decided_by": "alice", "decided_at": "2026-01-02T03:04:05Z", "reason": "ok",
			"consumed_at": "2026-01-02T03:04:06Z", "dispatch_outcome": "ok",
			"held_by": "instance-1", "held_until": "2026-01-02T03:04:05Z"}`},
		{name: "pending omits what does not apply", id: idPending, want: `{
			"id": "` + idPending + `", "state": "pending", "server": "pay", "tool": "transfer",
			"arguments": {"to": "acct-1", "amount": 5}, "arguments_hash": "` + hashA + `",
			"display_warnings": [], "rule": "payments", "mode": "hold",
			"requested_by": "desktop", "on_behalf_of": "carol", "tenant": "",
			"created_at": "2026-01-02T03:03:05Z", "expires_at": "2026-01-02T03:09:05Z", "required_approvals": 1,
			"approvers": [], "reviews": []}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The admin token has no tenant, so it sees every tenant.
			resp := e.do(t, "GET", "/v1/approvals/"+tt.id, "admin-tok", "")
			if resp.status != 200 {
				t.Fatalf("status %d: %s", resp.status, resp.body)
			}
			if diff := cmp.Diff(decode(t, []byte(tt.want)), decode(t, resp.body)); diff != "" {
				t.Errorf("approval JSON mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestListPassesFilterThrough(t *testing.T) {
	tests := []struct {
		name, query, token string
		want               store.Filter
	}{
		{name: "no params", query: "", token: "viewer-tok", want: store.Filter{}},
		{name: "all params", query: "?state=pending&limit=2&cursor=" + idPending + "&id_prefix=01900000-0000-7", token: "viewer-tok",
			want: store.Filter{State: approval.StatePending, Limit: 2, Cursor: idPending, IDPrefix: "01900000-0000-7"}},
		{name: "prefix is lower-cased", query: "?id_prefix=ABCDEF", token: "viewer-tok", want: store.Filter{IDPrefix: "abcdef"}},
		{name: "tenant principal is scoped", query: "?state=denied", token: "acme-tok", want: store.Filter{State: approval.StateDenied, Tenant: "acme"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			resp := e.do(t, "GET", "/v1/approvals"+tt.query, tt.token, "")
			if resp.status != 200 {
				t.Fatalf("status %d: %s", resp.status, resp.body)
			}
			got := e.fake.Filters()
			if diff := cmp.Diff([]store.Filter{tt.want}, got); diff != "" {
				t.Errorf("filters (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListPages(t *testing.T) {
	e := newEnv(t)
	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatal("pagination does not end")
		}
		resp := e.do(t, "GET", "/v1/approvals?limit=2&cursor="+cursor, "admin-tok", "")
		var l api.List
		if err := json.Unmarshal(resp.body, &l); err != nil {
			t.Fatal(err)
		}
		for _, a := range l.Approvals {
			ids = append(ids, a.ID)
		}
		if l.NextCursor == "" {
			break
		}
		cursor = l.NextCursor
	}
	want := []string{idPending, idOps, idApproved, idExpired, idAcme}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("ids over all pages (-want +got):\n%s", diff)
	}
}

func TestListEmptyIsArray(t *testing.T) {
	e := newEnv(t)
	resp := e.do(t, "GET", "/v1/approvals?state=cancelled", "viewer-tok", "")
	want := `{"approvals":[],"next_cursor":""}`
	if got := string(bytes.TrimSpace(resp.body)); got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
}

func TestReview(t *testing.T) {
	tests := []struct {
		name      string
		calls     []string // "token verb body"
		id        string
		wantState approval.State
		wantBy    string
		wantRevs  int
		wantDup   bool // the last answer says nothing was recorded
	}{
		{name: "approve settles", id: idPending, calls: []string{`bob-tok approve {"reason":"looks right"}`}, wantState: approval.StateApproved, wantBy: "bob", wantRevs: 1},
		{name: "deny settles", id: idPending, calls: []string{`bob-tok deny {"reason":"too much"}`}, wantState: approval.StateDenied, wantBy: "bob", wantRevs: 1},
		{name: "empty body", id: idPending, calls: []string{`bob-tok approve `}, wantState: approval.StateApproved, wantBy: "bob", wantRevs: 1},
		{name: "quorum of two", id: idOps, calls: []string{`alice-tok approve {}`, `dave-tok approve {}`}, wantState: approval.StateApproved, wantBy: "dave", wantRevs: 2},
		{name: "one of two stays pending", id: idOps, calls: []string{`alice-tok approve {}`}, wantState: approval.StatePending, wantRevs: 1},
		{name: "repeat is 200 with current state", id: idOps, calls: []string{`alice-tok approve {}`, `alice-tok approve {}`}, wantState: approval.StatePending, wantRevs: 1, wantDup: true},
		{name: "repeat after settling", id: idPending, calls: []string{`bob-tok deny {"reason":"no"}`, `bob-tok deny {"reason":"again"}`}, wantState: approval.StateDenied, wantBy: "bob", wantRevs: 1, wantDup: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			var last api.Approval
			for _, c := range tt.calls {
				f := strings.SplitN(c, " ", 3)
				resp := e.do(t, "POST", "/v1/approvals/"+tt.id+"/"+f[1], f[0], f[2])
				if resp.status != 200 {
					t.Fatalf("%s: status %d: %s", c, resp.status, resp.body)
				}
				last = api.Approval{}
				if err := json.Unmarshal(resp.body, &last); err != nil {
					t.Fatal(err)
				}
			}
			if last.State != string(tt.wantState) || last.DecidedBy != tt.wantBy || len(last.Reviews) != tt.wantRevs {
				t.Errorf("got state %s, decided_by %q, %d reviews; want %s, %q, %d", last.State, last.DecidedBy, len(last.Reviews), tt.wantState, tt.wantBy, tt.wantRevs)
			}
			if last.Duplicate != tt.wantDup {
				t.Errorf("duplicate = %v, want %v", last.Duplicate, tt.wantDup)
			}
			if tt.wantDup && tt.wantState == approval.StateDenied && (last.Reason != "no" || last.Reviews[0].Reason != "no") {
				t.Errorf("repeated deny: reason %q, review reason %q; want the first one, %q", last.Reason, last.Reviews[0].Reason, "no")
			}
			// The response is what is stored.
			stored, err := e.fake.Get(t.Context(), approval.ID(tt.id))
			if err != nil {
				t.Fatal(err)
			}
			if string(stored.State) != last.State || len(stored.Reviews) != len(last.Reviews) {
				t.Errorf("stored state %s with %d reviews, response %s with %d", stored.State, len(stored.Reviews), last.State, len(last.Reviews))
			}
		})
	}
}

// Case C15: hidden characters never leave the API raw, wherever they sit.
func TestHiddenCharactersEscaped(t *testing.T) {
	e := newEnv(t)
	r := pending("01900000-0000-7000-8000-0000000000bb")
	// A display copy that (wrongly) kept raw characters, and a reason with some.
	r.Arguments = json.RawMessage("{\"path\":\"/srv/invoice\u202efdp.exe\",\"to\":\"acct\u200b-1\"}")
	r.State = approval.StateDenied
	r.Reason = "no\u2028State: approved"
	r.DecidedBy = "bob\u200b"
	e.fake.Add(r)
	resp := e.do(t, "GET", "/v1/approvals/"+string(r.ID), "viewer-tok", "")
	for _, raw := range []string{"\u202e", "\u200b", "\u2028"} {
		if bytes.Contains(resp.body, []byte(raw)) {
			t.Errorf("body contains raw %U: %s", []rune(raw)[0], resp.body)
		}
	}
	for _, esc := range []string{`\u202E`, `\u200B`, `\u2028`} {
		if !bytes.Contains(resp.body, []byte(esc)) {
			t.Errorf("body lacks escape %s: %s", esc, resp.body)
		}
	}
	var got api.Approval
	if err := json.Unmarshal(resp.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Reason != r.Reason || got.DecidedBy != r.DecidedBy {
		t.Errorf("escaping changed the values: reason %q, decided_by %q", got.Reason, got.DecidedBy)
	}
}

func TestDateHeaderFromClock(t *testing.T) {
	e := newEnv(t)
	resp := e.do(t, "GET", "/healthz", "", "")
	if got, want := resp.header.Get("Date"), "Fri, 02 Jan 2026 03:04:05 GMT"; got != want {
		t.Errorf("Date = %q, want %q", got, want)
	}
}

func TestShellOperatorsShownAsIs(t *testing.T) { // an approver must see && < > literally
	e := newEnv(t)
	r := pending("01900000-0000-7000-8000-0000000000cc")
	r.Arguments = json.RawMessage(`{"command":"git add a.txt && git push > /dev/null < x"}`)
	e.fake.Add(r)
	resp := e.do(t, "GET", "/v1/approvals/"+string(r.ID), "viewer-tok", "")
	if !bytes.Contains(resp.body, []byte(`git add a.txt && git push > /dev/null < x`)) {
		t.Errorf("body does not show the command as sent: %s", resp.body)
	}
	if bytes.Contains(resp.body, []byte(`\u0026`)) || bytes.Contains(resp.body, []byte(`\u003c`)) {
		t.Errorf("body HTML-escapes shell operators: %s", resp.body)
	}
}

// TestProfiling: the runtime profiles are served to admins only, and only
// when enabled.
func TestProfiling(t *testing.T) {
	s := api.New(apitest.New(func() time.Time { return t0 }), authenticate, &api.Options{Profiling: true})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	e := &env{srv: srv}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		for token, want := range map[string]int{"": 401, "nobody": 401, "viewer-tok": 403, "alice-tok": 403, "host-tok": 403} {
			if got := e.do(t, "GET", path, token, ""); got.status != want {
				t.Errorf("GET %s with %q: %d, want %d", path, token, got.status, want)
			}
		}
	}
	// A refusal names the one role that may (newuser5: "one of the roles admin").
	if got := e.do(t, "GET", "/debug/pprof/heap", "alice-tok", ""); !strings.Contains(string(got.body), `"this needs the role admin"`) {
		t.Errorf("approver refused with %s, want it to say the role admin is needed", got.body)
	}
	heap := e.do(t, "GET", "/debug/pprof/heap", "admin-tok", "")
	// A profile is gzipped protocol buffers.
	if heap.status != 200 || len(heap.body) < 2 || heap.body[0] != 0x1f || heap.body[1] != 0x8b {
		t.Errorf("admin heap profile: %d, %d bytes", heap.status, len(heap.body))
	}
	if got := e.do(t, "GET", "/debug/pprof/goroutine?debug=1", "admin-tok", ""); got.status != 200 || !strings.Contains(string(got.body), "goroutine profile:") {
		t.Errorf("admin goroutine dump: %d %.80q", got.status, got.body)
	}
	if got := e.do(t, "GET", "/debug/pprof/", "admin-tok", ""); got.status != 200 || !strings.Contains(string(got.body), "heap") {
		t.Errorf("admin index: %d", got.status)
	}

	off := newEnv(t) // Profiling not set
	if got := off.do(t, "GET", "/debug/pprof/heap", "admin-tok", ""); got.status != 404 {
		t.Errorf("profiling off: %d, want 404", got.status)
	}
}
