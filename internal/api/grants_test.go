package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// grantEnv is an admin API with grants over a real gate and SQLite store,
// whose policy asks for approvals in retry mode (quorum approvals each).
type grantEnv struct {
	admin http.Handler
	g     *gate.Gate
	pol   *policy.Holder
}

func grantPolicy(quorum int) *policy.Policy {
	return &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Hour, Mode: policy.ModeRetry, Approvals: quorum, ValidFor: time.Hour}}
}

func newGrantEnv(t *testing.T) *grantEnv {
	t.Helper()
	db := sqlitetest.Open(t)
	h := policy.NewHolder(grantPolicy(1))
	g := gate.New(db, h, &gate.Options{RetryWait: time.Nanosecond, GrantMaxTTL: 8 * time.Hour})
	return &grantEnv{admin: api.New(g, authenticate, &api.Options{Grants: g}), g: g, pol: h}
}

var desktop = approval.Principal{ID: "desktop", Kind: "agent"}

func transferCall(args string) gate.Call {
	return gate.Call{Principal: desktop, Server: "pay", Tool: "transfer", Arguments: []byte(args)}
}

// pendingID makes a call that needs approval and returns its approval id.
func (e *grantEnv) pendingID(t *testing.T, args string) string {
	t.Helper()
	a := e.g.Admit(t.Context(), transferCall(args))
	if a.Allowed || a.ApprovalID == "" {
		t.Fatalf("Admit(%s) = %+v, want approval required", args, a)
	}
	return string(a.ApprovalID)
}

func TestGrantRoutes(t *testing.T) {
	e := newGrantEnv(t)
	id := e.pendingID(t, `{"amount":50}`)

	a := send(t, e.admin, "POST", "/v1/approvals/"+id+"/approve", "alice-tok",
		`{"reason":"small ones are fine today","grant":{"duration":"2h","max_uses":3,"when":"args.amount <= 100"}}`)
	if a.status != http.StatusOK {
		t.Fatalf("approve with a grant: %d %s", a.status, a.body)
	}
	ap := decodeAs[api.Approval](t, a)
	if ap.State != "approved" || ap.Grant == nil || len(ap.Reviews) != 1 || ap.Reviews[0].Grant == nil {
		t.Fatalf("approve answer = %s, want approved with the grant and the terms on the review", a.body)
	}
	gr := *ap.Grant
	if gr.State != "active" || gr.Principal != "desktop" || gr.Server != "pay" || gr.Tool != "transfer" || gr.When != "args.amount <= 100" ||
		gr.MaxUses != 3 || gr.CreatedBy != "alice" || gr.SourceApproval != id || gr.Reason != "small ones are fine today" ||
		!gr.ExpiresAt.Equal(gr.CreatedAt.Add(2*time.Hour)) || len(gr.ApprovedBy) != 1 || gr.ApprovedBy[0].ID != "alice" {
		t.Errorf("grant = %+v", gr)
	}
	if rv := ap.Reviews[0].Grant; rv.Duration != "2h0m0s" || rv.MaxUses != 3 || rv.When != "args.amount <= 100" {
		t.Errorf("review terms = %+v", rv)
	}

	// The grant stands in for the next approval.
	if adm := e.g.Admit(t.Context(), transferCall(`{"amount":70}`)); !adm.Allowed || adm.Grant != gr.ID {
		t.Fatalf("call under the grant: %+v", adm)
	}
	got := decodeAs[api.Grant](t, send(t, e.admin, "GET", "/v1/grants/"+gr.ID, "viewer-tok", ""))
	if got.Uses != 1 || len(got.RecentUses) != 1 || got.RecentUses[0].Principal != "desktop" || !strings.HasPrefix(got.RecentUses[0].ArgumentsHash, "sha256:") {
		t.Errorf("grant after a use = %+v", got)
	}
	// The path takes the whole id; a part of it is not found, and the
	// message says how to find the whole one.
	short := send(t, e.admin, "GET", "/v1/grants/"+gr.ID[len(gr.ID)-8:], "viewer-tok", "")
	if code, msg := errorCode(t, short.body); short.status != http.StatusNotFound || code != api.CodeNotFound ||
		!strings.Contains(msg, "the path takes the whole grant id (36 characters); find it from a part with GET /v1/grants?id_prefix= or ?id_suffix=") {
		t.Errorf("GET /v1/grants/<short id> = %d %s, want 404 naming id_prefix and id_suffix", short.status, short.body)
	}
	l := decodeAs[api.GrantList](t, send(t, e.admin, "GET", "/v1/grants", "viewer-tok", ""))
	if len(l.Grants) != 1 || l.Grants[0].ID != gr.ID {
		t.Errorf("active grants = %+v", l)
	}
	for _, q := range []string{"?principal=desktop&server=pay&tool=transfer", "?id_prefix=" + gr.ID[:8]} {
		if l := decodeAs[api.GrantList](t, send(t, e.admin, "GET", "/v1/grants"+q, "viewer-tok", "")); len(l.Grants) != 1 {
			t.Errorf("GET /v1/grants%s = %d grants, want 1", q, len(l.Grants))
		}
	}

	// Revocation: viewers may not; another tenant sees nothing; an approver may.
	if a := send(t, e.admin, "POST", "/v1/grants/"+gr.ID+"/revoke", "viewer-tok", `{}`); a.status != http.StatusForbidden {
		t.Errorf("revoke by a viewer: %d", a.status)
	}
	if a := send(t, e.admin, "POST", "/v1/grants/"+gr.ID+"/revoke", "acme-tok", `{}`); a.status != http.StatusNotFound {
		t.Errorf("revoke by another tenant: %d", a.status)
	}
	if a := send(t, e.admin, "GET", "/v1/grants/"+gr.ID, "acme-tok", ""); a.status != http.StatusNotFound {
		t.Errorf("read by another tenant: %d", a.status)
	}
	a = send(t, e.admin, "POST", "/v1/grants/"+gr.ID+"/revoke", "bob-tok", `{"reason":"enough"}`)
	if rv := decodeAs[api.Grant](t, a); a.status != http.StatusOK || rv.State != "revoked" || rv.RevokedBy != "bob" || rv.RevokeReason != "enough" {
		t.Fatalf("revoke: %d %s", a.status, a.body)
	}
	if adm := e.g.Admit(t.Context(), transferCall(`{"amount":80}`)); adm.Allowed {
		t.Fatalf("call after the revocation answered: %+v", adm)
	}
	if l := decodeAs[api.GrantList](t, send(t, e.admin, "GET", "/v1/grants", "viewer-tok", "")); len(l.Grants) != 0 {
		t.Errorf("active grants after the revocation = %+v", l.Grants)
	}
	if l := decodeAs[api.GrantList](t, send(t, e.admin, "GET", "/v1/grants?state=all", "viewer-tok", "")); len(l.Grants) != 1 || l.Grants[0].State != "revoked" {
		t.Errorf("all grants after the revocation = %+v", l.Grants)
	}
	if a := send(t, e.admin, "POST", "/v1/grants/"+gr.ID+"/revoke", "alice-tok", ``); a.status != http.StatusOK || decodeAs[api.Grant](t, a).RevokedBy != "bob" {
		t.Errorf("second revoke: %d %s, want 200 with the first revocation kept", a.status, a.body)
	}
}

func TestGrantApproveRefusals(t *testing.T) {
	e := newGrantEnv(t)
	id := e.pendingID(t, `{"amount":1}`)
	cases := []struct {
		name, body string
		status     int
		code, msg  string
	}{
		{"above max_ttl", `{"grant":{"duration":"9h"}}`, 422, api.CodeInvalid, "the duration 9h0m0s is above grants.max_ttl 8h0m0s; it is refused, not shortened"},
		{"no duration", `{"grant":{"max_uses":2}}`, 422, api.CodeInvalid, "grant.duration is required"},
		{"bad duration", `{"grant":{"duration":"a while"}}`, 422, api.CodeInvalid, "Go duration"},
		{"negative uses", `{"grant":{"duration":"1h","max_uses":-1}}`, 422, api.CodeInvalid, "must not be negative"},
		{"bad predicate", `{"grant":{"duration":"1h","when":"args.amount <"}}`, 422, api.CodeInvalid, "when:"},
		{"predicate not a bool", `{"grant":{"duration":"1h","when":"principal.id"}}`, 422, api.CodeInvalid, "must evaluate to a bool"},
		{"unknown grant field", `{"grant":{"duration":"1h","for":"1h"}}`, 422, api.CodeInvalid, `unknown key "for" in grant`},
	}
	for _, tc := range cases {
		a := send(t, e.admin, "POST", "/v1/approvals/"+id+"/approve", "alice-tok", tc.body)
		if a.status != tc.status || a.code(t) != tc.code || !strings.Contains(a.message(t), tc.msg) {
			t.Errorf("%s: %d %s, want %d %s with %q", tc.name, a.status, a.body, tc.status, tc.code, tc.msg)
		}
	}
	if a := send(t, e.admin, "POST", "/v1/approvals/"+id+"/deny", "alice-tok", `{"reason":"no","grant":{"duration":"1h"}}`); a.status != 422 {
		t.Errorf("deny with a grant: %d, want 422", a.status)
	}
	if ap := decodeAs[api.Approval](t, send(t, e.admin, "GET", "/v1/approvals/"+id, "viewer-tok", "")); ap.State != "pending" || len(ap.Reviews) != 0 {
		t.Errorf("refused approves recorded something: %+v", ap)
	}

	// Quorum of two: the second approver attaching other terms is 409 and
	// records nothing; attaching the same terms makes the grant.
	e.pol.Store(grantPolicy(2))
	id2 := e.pendingID(t, `{"amount":2}`)
	first := send(t, e.admin, "POST", "/v1/approvals/"+id2+"/approve", "alice-tok", `{"grant":{"duration":"1h","max_uses":5}}`)
	if ap := decodeAs[api.Approval](t, first); first.status != 200 || ap.State != "pending" || ap.Grant != nil {
		t.Fatalf("first of two: %d %s", first.status, first.body)
	}
	other := send(t, e.admin, "POST", "/v1/approvals/"+id2+"/approve", "dave-tok", `{"grant":{"duration":"1h"}}`)
	if other.status != http.StatusConflict || other.code(t) != api.CodeGrantNotEndorsed || !strings.Contains(other.message(t), "alice") {
		t.Errorf("second with other terms: %d %s", other.status, other.body)
	}
	same := send(t, e.admin, "POST", "/v1/approvals/"+id2+"/approve", "dave-tok", `{"grant":{"duration":"1h","max_uses":5}}`)
	if ap := decodeAs[api.Approval](t, same); same.status != 200 || ap.State != "approved" || ap.Grant == nil || ap.Grant.Approvals != 2 || len(ap.Grant.ApprovedBy) != 2 {
		t.Errorf("second with the same terms: %d %s", same.status, same.body)
	}
}

func TestGrantRoutesNeedGrants(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, grantPolicy(1), &gate.Options{RetryWait: time.Nanosecond})
	h := api.New(g, authenticate, nil)
	if a := send(t, h, "GET", "/v1/grants", "viewer-tok", ""); a.status != http.StatusNotFound {
		t.Errorf("GET /v1/grants without grants: %d", a.status)
	}
	adm := g.Admit(t.Context(), transferCall(`{}`))
	a := send(t, h, "POST", "/v1/approvals/"+string(adm.ApprovalID)+"/approve", "alice-tok", `{"grant":{"duration":"1h"}}`)
	if a.status != 422 || !strings.Contains(a.message(t), "grants are not available") {
		t.Errorf("approve with a grant without grants: %d %s", a.status, a.body)
	}
}

// TestGrantListPagesByCursor (grants42): GET /v1/grants pages by the
// store's opaque list cursors (as GET /v1/approvals does), takes a grant
// id (the cursor before them) still, and refuses a malformed or overlong
// cursor with 422.
func TestGrantListPagesByCursor(t *testing.T) {
	e := newGrantEnv(t)
	var want []string
	for n := range 3 {
		id := e.pendingID(t, fmt.Sprintf(`{"amount":%d}`, n))
		a := send(t, e.admin, "POST", "/v1/approvals/"+id+"/approve", "alice-tok", fmt.Sprintf(`{"grant":{"duration":"1h","when":"args.amount == %d"}}`, n))
		if ap := decodeAs[api.Approval](t, a); a.status != http.StatusOK || ap.Grant == nil {
			t.Fatalf("approve %d with a grant: %d %s", n, a.status, a.body)
		}
		want = append(want, decodeAs[api.Approval](t, a).Grant.ID)
	}
	var got []string
	for cursor, page := "", 0; ; page++ {
		a := send(t, e.admin, "GET", "/v1/grants?limit=1&cursor="+url.QueryEscape(cursor), "viewer-tok", "")
		if a.status != http.StatusOK {
			t.Fatalf("page %d (cursor %q): %d %s", page, cursor, a.status, a.body)
		}
		l := decodeAs[api.GrantList](t, a)
		for _, g := range l.Grants {
			got = append(got, g.ID)
		}
		if cursor = l.NextCursor; cursor == "" || page > 5 {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages of one = %v, want %v", got, want)
	}
	// A grant id is the position of that id among the grants stored
	// before list orders (order 0); every grant made since comes after
	// them, so after an upgrade an old cursor may repeat grants, never
	// skip one.
	if l := decodeAs[api.GrantList](t, send(t, e.admin, "GET", "/v1/grants?cursor="+want[2], "viewer-tok", "")); len(l.Grants) != 3 {
		t.Errorf("GET /v1/grants?cursor=<grant id> = %d grants, want the 3 made since list orders", len(l.Grants))
	}
	for _, c := range []string{"p.!", "p.AQ", "p." + strings.Repeat("A", 2100)} {
		if a := send(t, e.admin, "GET", "/v1/grants?cursor="+c, "viewer-tok", ""); a.status != 422 {
			t.Errorf("GET /v1/grants?cursor=%.20s: %d %s, want 422", c, a.status, a.body)
		}
	}
}

func TestGrantListRefusesBadQueries(t *testing.T) {
	e := newGrantEnv(t)
	for _, q := range []string{"?state=expired", "?limit=0", "?limit=x", "?cursor=nope", "?id_prefix=zz"} {
		if a := send(t, e.admin, "GET", "/v1/grants"+q, "viewer-tok", ""); a.status != 422 {
			t.Errorf("GET /v1/grants%s: %d, want 422", q, a.status)
		}
	}
	if a := send(t, e.admin, "GET", "/v1/grants/not-an-id", "viewer-tok", ""); a.status != 404 {
		t.Errorf("GET a malformed id: %d, want 404", a.status)
	}
}
