package web_test

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
	"toolgate/internal/web"
)

// Tokens of the test approvers.
const (
	bobTok    = "bob-token-1"
	aliceTok  = "alice-token-2"
	viewerTok = "viewer-token-3"
	hostTok   = "host-token-4"
	acmeTok   = "acme-token-5"
)

type identity struct {
	p     approval.Principal
	roles []string
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// env is the inbox over a real admin API, gate and SQLite store.
type env struct {
	t      testing.TB
	db     *sqlstore.DB
	g      *gate.Gate
	api    *api.Server
	inbox  *web.Server
	people map[string]identity // by token hash; tests may delete entries
	now    time.Time
}

func newEnv(tb testing.TB, opts *web.Options) *env {
	tb.Helper()
	e := &env{t: tb, db: sqlitetest.Open(tb), now: time.Now().UTC(), people: map[string]identity{
		hashHex(bobTok):    {approval.Principal{ID: "bob", Kind: "human"}, []string{api.RoleApprover}},
		hashHex(aliceTok):  {approval.Principal{ID: "alice", Kind: "human", Groups: []string{"ops"}}, []string{api.RoleApprover}},
		hashHex(viewerTok): {approval.Principal{ID: "vera", Kind: "human"}, []string{api.RoleViewer}},
		hashHex(hostTok):   {approval.Principal{ID: "ci", Kind: "human"}, []string{api.RoleHost}},
		hashHex(acmeTok):   {approval.Principal{ID: "erin", Kind: "human", Tenant: "acme"}, []string{api.RoleApprover}},
	}}
	pol := &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}}
	e.g = gate.New(e.db, pol, &gate.Options{GrantMaxTTL: 8 * time.Hour})
	auth := func(tok string) (approval.Principal, []string, bool) {
		id, ok := e.people[hashHex(tok)]
		return id.p, id.roles, ok
	}
	e.api = api.New(e.g, auth, &api.Options{Sessions: e.g, Events: e.db, Grants: e.g})
	e.inbox = e.newInbox(opts)
	return e
}

// newInbox returns another inbox over the same API and store (another
// gateway instance, as far as sessions go).
func (e *env) newInbox(opts *web.Options) *web.Server {
	e.t.Helper()
	identify := func(h string) (approval.Principal, []string, bool) {
		id, ok := e.people[h]
		return id.p, id.roles, ok
	}
	s, err := web.New(e.api, e.db, identify, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// request stores a pending request with display arguments made from raw
// (as the gate makes them), and returns it.
func (e *env) request(n int, raw string, edit ...func(*approval.Request)) approval.Request {
	e.t.Helper()
	display, warnings, err := approval.Display([]byte(raw), approval.DefaultRedaction())
	if err != nil {
		e.t.Fatal(err)
	}
	hash, err := approval.Hash([]byte(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	r := approval.Request{
		ID: approval.ID(fmt.Sprintf("0190%04x-0000-7000-8000-%012x", n, 0xabc000+n)), State: approval.StatePending,
		Server: "pay", Tool: "transfer", Arguments: display, ArgumentsHash: hash, DisplayWarnings: warnings,
		Rule: "payments", Mode: "hold", RequestedBy: "agent-1", CreatedAt: e.now.Add(time.Duration(n) * time.Second),
		ExpiresAt: e.now.Add(10 * time.Minute), RequiredApprovals: 1,
	}
	for _, f := range edit {
		f(&r)
	}
	if err := e.db.CreateRequest(e.t.Context(), r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) state(id approval.ID) approval.Request {
	e.t.Helper()
	r, err := e.db.GetRequest(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// browser is a cookie jar and the origin its requests come from.
type browser struct {
	e       *env
	h       http.Handler
	cookies map[string]*http.Cookie
	origin  string // the Origin header of POSTs; "" sends none
	tls     bool
}

func (e *env) browser() *browser {
	return &browser{e: e, h: e.inbox, cookies: map[string]*http.Cookie{}, origin: "http://inbox.test"}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, header ...string) answer {
	b.e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequestWithContext(b.e.t.Context(), method, "http://inbox.test"+path, body)
	if b.tls {
		req.TLS = &tls.ConnectionState{}
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost && b.origin != "" {
		req.Header.Set("Origin", b.origin)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	res := rec.Result()
	for _, c := range res.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return answer{status: rec.Code, header: rec.Header(), body: rec.Body.String()}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the csrf field of a page.
func csrf(tb testing.TB, page string) string {
	tb.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		tb.Fatalf("no csrf field in the page:\n%s", page)
	}
	return m[1]
}

// signIn signs b in with token and fails unless it worked.
func (b *browser) signIn(token string) {
	b.e.t.Helper()
	form := b.do("GET", "/ui/signin", nil)
	a := b.do("POST", "/ui/signin", url.Values{"csrf": {csrf(b.e.t, form.body)}, "token": {token}, "next": {"/ui/"}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/" {
		b.e.t.Fatalf("sign in: %d %s\n%s", a.status, a.header.Get("Location"), a.body)
	}
}

// page GETs path and fails unless it answers 200.
func (b *browser) page(path string) string {
	b.e.t.Helper()
	a := b.do("GET", path, nil)
	if a.status != http.StatusOK {
		b.e.t.Fatalf("GET %s: %d\n%s", path, a.status, a.body)
	}
	return a.body
}

// post submits form to path with the csrf token of the inbox page.
func (b *browser) post(path string, form url.Values) answer {
	b.e.t.Helper()
	form.Set("csrf", csrf(b.e.t, b.page("/ui/")))
	return b.do("POST", path, form)
}

func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	paths := []string{"/ui/", "/ui/signin", "/ui/static/app.css", "/ui/static/app.js", "/ui/nope", "/ui/approvals/0190", "/ui/static/missing.js"}
	check := func(who string) {
		for _, p := range paths {
			a := b.do("GET", p, nil)
			h := a.header
			csp := h.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("%s GET %s: CSP %q", who, p, csp)
			}
			if h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s GET %s: headers %v", who, p, h)
			}
		}
	}
	check("signed out")
	b.signIn(bobTok)
	check("signed in")
	// A POST that is refused carries them too.
	a := b.do("POST", "/ui/approve", url.Values{})
	if a.header.Get("Content-Security-Policy") == "" || a.status != http.StatusForbidden {
		t.Errorf("refused POST: %d, CSP %q", a.status, a.header.Get("Content-Security-Policy"))
	}
}

func TestSignIn(t *testing.T) {
	tests := []struct {
		name   string
		token  string
		edit   func(form url.Values, b *browser)
		status int
		want   string
	}{
		{name: "unknown token", token: "nope", status: 401, want: "not an approver token of this gateway. Paste an approver&#39;s token (approvers in the config, or the approver token serve --dev printed: each start prints new ones), not an agent&#39;s."},
		{name: "empty token", token: " ", status: 401, want: "Paste your approver token"},
		{name: "host role cannot read approvals", token: hostTok, status: 403, want: "cannot read approvals"},
		{name: "no csrf field", token: bobTok, edit: func(f url.Values, _ *browser) { f.Del("csrf") }, status: 403, want: "expired or did not come from this page"},
		{name: "no csrf cookie", token: bobTok, edit: func(_ url.Values, b *browser) { delete(b.cookies, "toolgate_signin") }, status: 403},
		{name: "another origin", token: bobTok, edit: func(_ url.Values, b *browser) { b.origin = "http://evil.test" }, status: 403, want: "names another origin than this inbox&#39;s (http://inbox.test)"},
		{name: "no origin", token: bobTok, edit: func(_ url.Values, b *browser) { b.origin = "" }, status: 403, want: "uses the REST API on this listener with an approver token"},
		{name: "null origin", token: bobTok, edit: func(_ url.Values, b *browser) { b.origin = "null" }, status: 403},
		{name: "viewer", token: viewerTok, status: 303},
		{name: "approver", token: bobTok, status: 303},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			b := e.browser()
			page := b.do("GET", "/ui/signin?next=/ui/history", nil)
			if !strings.Contains(page.body, `name="token"`) {
				t.Fatalf("sign-in form has no token field:\n%s", page.body)
			}
			form := url.Values{"csrf": {csrf(t, page.body)}, "token": {tt.token}, "next": {"/ui/history"}}
			if tt.edit != nil {
				tt.edit(form, b)
			}
			a := b.do("POST", "/ui/signin", form)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d\n%s", a.status, tt.status, a.body)
			}
			if tt.want != "" && !strings.Contains(a.body, tt.want) {
				t.Errorf("page does not say %q:\n%s", tt.want, a.body)
			}
			ck := b.cookies["toolgate_session"]
			if tt.status != 303 {
				if ck != nil {
					t.Errorf("refused sign-in set a session cookie")
				}
				return
			}
			if a.header.Get("Location") != "/ui/history" {
				t.Errorf("redirect to %q, want /ui/history (next)", a.header.Get("Location"))
			}
			if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.Secure {
				t.Fatalf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/ui/, not Secure over plain HTTP", ck)
			}
			// The store keeps the cookie value's hash, never the value.
			ws, err := e.db.GetWebSession(t.Context(), hashHex(ck.Value), time.Now())
			if err != nil {
				t.Fatalf("no stored session under the cookie's hash: %v", err)
			}
			if _, err := e.db.GetWebSession(t.Context(), ck.Value, time.Now()); err == nil {
				t.Error("a session is stored under the cookie value itself")
			}
			if ws.TokenHash != hashHex(tt.token) {
				t.Errorf("stored token hash %q, want the token's", ws.TokenHash)
			}
			if ttl := ws.ExpiresAt.Sub(ws.CreatedAt); ttl != 12*time.Hour {
				t.Errorf("session lifetime %v, want the 12h default", ttl)
			}
		})
	}
}

func TestSafeNextAndSecureCookie(t *testing.T) {
	e := newEnv(t, &web.Options{PublicURL: "https://gate.example.com", SessionTTL: time.Hour})
	b := e.browser()
	b.origin = "https://gate.example.com" // the public URL's origin is accepted
	form := b.do("GET", "/ui/signin", nil)
	a := b.do("POST", "/ui/signin", url.Values{"csrf": {csrf(t, form.body)}, "token": {bobTok}, "next": {"//evil.test/x"}})
	if a.status != 303 || a.header.Get("Location") != "/ui/" {
		t.Fatalf("status %d, location %q: an off-site next must go to /ui/", a.status, a.header.Get("Location"))
	}
	if ck := b.cookies["toolgate_session"]; ck == nil || !ck.Secure || ck.MaxAge != 3600 {
		t.Errorf("cookie %+v, want Secure (https public URL) with the 1h lifetime", ck)
	}
	// Over TLS the cookie is Secure without a public URL too.
	e2 := newEnv(t, nil)
	b2 := e2.browser()
	b2.tls, b2.origin = true, "https://inbox.test"
	b2.signIn(bobTok)
	if ck := b2.cookies["toolgate_session"]; ck == nil || !ck.Secure {
		t.Errorf("cookie over TLS %+v, want Secure", ck)
	}
}

func TestSessionsLiveInTheStore(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	b.signIn(bobTok)
	// Another instance over the same store accepts the cookie.
	other := e.browser()
	other.h = e.newInbox(nil)
	other.cookies = b.cookies
	if page := other.page("/ui/"); !strings.Contains(page, "bob") {
		t.Errorf("the other instance does not show bob signed in:\n%s", page)
	}
	// Sign-out on one ends it everywhere.
	page := b.page("/ui/")
	cookie := *b.cookies["toolgate_session"]
	a := b.do("POST", "/ui/signout", url.Values{"csrf": {csrf(t, page)}})
	if a.status != 303 || a.header.Get("Location") != "/ui/signin" {
		t.Fatalf("sign out: %d %s", a.status, a.header.Get("Location"))
	}
	if _, ok := b.cookies["toolgate_session"]; ok {
		t.Error("sign-out did not clear the cookie")
	}
	other.cookies = map[string]*http.Cookie{"toolgate_session": &cookie}
	if a := other.do("GET", "/ui/", nil); a.status != 303 || !strings.HasPrefix(a.header.Get("Location"), "/ui/signin") {
		t.Errorf("after sign-out the old cookie still works: %d %s", a.status, a.header.Get("Location"))
	}
}

func TestRemovedTokenEndsItsSessions(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	b.signIn(bobTok)
	delete(e.people, hashHex(bobTok)) // the token left the configuration
	if a := b.do("GET", "/ui/", nil); a.status != 303 {
		t.Fatalf("status %d, want a redirect to sign in", a.status)
	}
	if a := b.do("GET", "/ui/fragment/inbox", nil); a.status != 401 {
		t.Errorf("fragment status %d, want 401", a.status)
	}
	// The page's script tells "signed out" (reload to sign in) from a
	// refused position (422: stop) by this status (polish16).
	if a := b.do("GET", "/ui/events", nil); a.status != 401 {
		t.Errorf("event stream status %d, want 401", a.status)
	}
}

func TestExpiredSession(t *testing.T) {
	clock := time.Now()
	e := newEnv(t, &web.Options{SessionTTL: time.Minute, Now: func() time.Time { return clock }})
	b := e.browser()
	b.signIn(bobTok)
	b.page("/ui/")
	clock = clock.Add(time.Minute)
	if a := b.do("GET", "/ui/", nil); a.status != 303 {
		t.Errorf("after its lifetime the session still works: %d", a.status)
	}
}

func TestGETNeverChangesState(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"to":"acct-1","amount":5}`)
	b := e.browser()
	b.signIn(bobTok)
	for _, p := range []string{"/ui/approvals/" + string(r.ID) + "/approve", "/ui/approvals/" + string(r.ID) + "/deny?reason=x",
		"/ui/approve?approve=" + url.QueryEscape(string(r.ID)+" "+r.ArgumentsHash), "/ui/signout"} {
		b.do("GET", p, nil)
	}
	if got := e.state(r.ID); got.State != approval.StatePending || len(got.Reviews) != 0 {
		t.Errorf("GETs changed the request: %s %+v", got.State, got.Reviews)
	}
	if _, ok := b.cookies["toolgate_session"]; !ok {
		t.Error("a GET signed out")
	}
	b.page("/ui/")
}

// TestPagesStartTheStreamAtTheFeedEnd: a page carries the change feed's
// end as read before its data (a cursor), so its EventSource resumes there;
// the page's stream refuses a plain sequence number as a position.
func TestPagesStartTheStreamAtTheFeedEnd(t *testing.T) {
	e := newEnv(t, nil)
	e.request(1, `{"to":"acct-1"}`)
	e.request(2, `{"to":"acct-2"}`)
	end, err := e.db.FeedEnd(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn(bobTok)
	page := b.page("/ui/")
	if want := `data-since="` + end.String() + `"`; !strings.Contains(page, want) || end.Seq != 2 {
		t.Errorf("inbox page lacks %s (feed end %v)", want, end)
	}
	a := b.do("GET", "/ui/events?since=2", nil)
	if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "plain sequence number") {
		t.Errorf("stream since a plain seq: %d %s; want 422 naming the problem", a.status, a.body)
	}
}
