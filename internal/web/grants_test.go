package web_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/store"
)

// grantForm is the detail page's "Approve and remember" of r.
func grantForm(r approval.Request, duration, maxUses, when string) url.Values {
	return url.Values{"arguments_hash": {r.ArgumentsHash}, "reason": {"fine this week"}, "grant": {"1"},
		"grant_duration": {duration}, "grant_max_uses": {maxUses}, "grant_when": {when}}
}

// grants returns every grant in the store.
func (e *env) grants() []grant.Grant {
	e.t.Helper()
	gs, _, err := e.g.ListGrants(e.t.Context(), store.GrantFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	return gs
}

func TestApproveWithGrantAndRevoke(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"to":"acct-1","note":"hi","amount":5}`)
	b := e.browser()
	b.signIn(bobTok)
	detail := b.page("/ui/approvals/" + string(r.ID))
	for _, want := range []string{`data-action="approve-grant"`, `name="grant_duration"`, `name="grant_when"`} {
		if !strings.Contains(detail, want) {
			t.Fatalf("detail page lacks %s:\n%s", want, detail)
		}
	}
	const when = `args.note != "<script>alert(1)</script>"`
	a := b.post("/ui/approvals/"+string(r.ID)+"/approve", grantForm(r, "2h", "3", when))
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/approvals/"+string(r.ID)+"?done=grant" {
		t.Fatalf("approve with a grant: %d %q\n%s", a.status, a.header.Get("Location"), a.body)
	}
	if got := e.state(r.ID); got.State != approval.StateApproved || len(got.Reviews) != 1 || got.Reviews[0].Grant == nil {
		t.Fatalf("request after approve-with-grant: %s %+v", got.State, got.Reviews)
	}
	gs := e.grants()
	if len(gs) != 1 {
		t.Fatalf("%d grants, want 1", len(gs))
	}
	g := gs[0]
	if g.SourceApproval != r.ID || g.CreatedBy != "bob" || g.Principal != "agent-1" || g.Server != "pay" || g.Tool != "transfer" ||
		g.When != when || g.MaxUses != 3 || g.ExpiresAt.Sub(g.CreatedAt).Hours() != 2 || g.Reason != "fine this week" {
		t.Errorf("grant = %+v, want bound to %s with the typed terms", g, r.ID)
	}
	if page := b.page("/ui/approvals/" + string(r.ID) + "?done=grant"); !strings.Contains(page, "remembered as a grant") {
		t.Errorf("no flash after approve-with-grant:\n%s", page)
	}

	// The grants page lists it, the predicate as text.
	page := b.page("/ui/grants")
	row := regexp.MustCompile(`(?s)<tr data-grant-id="` + g.ID + `" data-state="active">.*?</tr>`).FindString(page)
	if row == "" {
		t.Fatalf("grants page lacks an active row of %s:\n%s", g.ID, page)
	}
	if strings.Contains(page, "<script>alert") || !strings.Contains(row, html.EscapeString(`"<script>alert(1)</script>"`)) {
		t.Errorf("the predicate is not shown as escaped text:\n%s", row)
	}
	for _, want := range []string{"agent-1", "pay · transfer", "0 / 3", `data-expires="`, `href="/ui/approvals/` + string(r.ID) + `"`, "<b>bob</b>", "fine this week", `data-action="revoke-grant"`} {
		if !strings.Contains(row, want) {
			t.Errorf("grant row lacks %q:\n%s", want, row)
		}
	}
	if !strings.Contains(page, `href="/ui/grants" aria-current="page"`) {
		t.Error("the header does not link the grants page")
	}

	// A revoke without the CSRF token, or from another origin, changes nothing.
	revoke := "/ui/grants/" + g.ID + "/revoke"
	if a := b.do("POST", revoke, url.Values{"reason": {"x"}}); a.status != http.StatusForbidden || !strings.Contains(a.body, "security token") {
		t.Errorf("revoke without CSRF: %d\n%s", a.status, a.body)
	}
	b.origin = "http://evil.test"
	if a := b.do("POST", revoke, url.Values{"csrf": {csrf(t, page)}}); a.status != http.StatusForbidden {
		t.Errorf("revoke from another origin: %d", a.status)
	}
	b.origin = "http://inbox.test"
	if got := e.grants()[0]; !got.RevokedAt.IsZero() {
		t.Fatalf("a refused revoke revoked the grant: %+v", got)
	}
	// A viewer sees the grants but cannot revoke.
	v := e.browser()
	v.signIn(viewerTok)
	vp := v.page("/ui/grants")
	if !strings.Contains(vp, `data-grant-id="`+g.ID+`"`) || strings.Contains(vp, `data-action="revoke-grant"`) {
		t.Errorf("viewer's grants page: want the grant without a revoke button:\n%s", vp)
	}
	if a := v.do("POST", revoke, url.Values{"csrf": {csrf(t, vp)}}); a.status != http.StatusForbidden {
		t.Errorf("viewer revoke: %d, want 403\n%s", a.status, a.body)
	}

	// Another tenant's approver neither sees nor revokes it.
	other := e.browser()
	other.signIn(acmeTok)
	op := other.page("/ui/grants")
	if strings.Contains(op, g.ID) {
		t.Errorf("another tenant's grants page shows %s", g.ID)
	}
	if a := other.do("POST", revoke, url.Values{"csrf": {csrf(t, op)}}); a.status != http.StatusNotFound {
		t.Errorf("another tenant's revoke: %d, want 404\n%s", a.status, a.body)
	}

	a = b.do("POST", revoke, url.Values{"csrf": {csrf(t, page)}, "reason": {"done with it"}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/grants?done=revoke" {
		t.Fatalf("revoke: %d %q\n%s", a.status, a.header.Get("Location"), a.body)
	}
	got := e.grants()[0]
	if got.RevokedAt.IsZero() || got.RevokedBy != "bob" || got.RevokeReason != "done with it" {
		t.Errorf("grant after revoke = %+v", got)
	}
	page = b.page("/ui/grants?done=revoke")
	if !strings.Contains(page, `data-grant-id="`+g.ID+`" data-state="revoked"`) || !strings.Contains(page, "was revoked") || strings.Contains(page, `data-action="revoke-grant"`) {
		t.Errorf("grants page after revoke:\n%s", page)
	}
}

func TestApproveWithGrantRefusals(t *testing.T) {
	tests := []struct {
		name   string
		form   func(r approval.Request) url.Values
		status int
		want   string
	}{
		{name: "longer than grants.max_ttl", form: func(r approval.Request) url.Values { return grantForm(r, "9h", "", "") },
			status: http.StatusUnprocessableEntity, want: "the duration 9h0m0s is above grants.max_ttl 8h0m0s; it is refused, not shortened"},
		{name: "no duration", form: func(r approval.Request) url.Values { return grantForm(r, "", "2", "") },
			status: http.StatusUnprocessableEntity, want: "grant.duration is required"},
		{name: "bad max uses", form: func(r approval.Request) url.Values { return grantForm(r, "1h", "lots", "") },
			status: http.StatusUnprocessableEntity, want: "Max uses &#34;lots&#34;: give a whole number"},
		{name: "predicate does not compile", form: func(r approval.Request) url.Values { return grantForm(r, "1h", "", "args.amount <") },
			status: http.StatusUnprocessableEntity, want: "when:"},
		{name: "terms typed but plain approve pressed", form: func(r approval.Request) url.Values {
			f := grantForm(r, "1h", "", "")
			f.Del("grant")
			return f
		}, status: http.StatusUnprocessableEntity, want: "You filled in grant terms but pressed Approve"},
		{name: "changed arguments", form: func(r approval.Request) url.Values {
			f := grantForm(r, "1h", "", "")
			f.Set("arguments_hash", "sha256:"+strings.Repeat("0", 64))
			return f
		}, status: http.StatusConflict, want: "The request changed since this page showed it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			r := e.request(1, `{"to":"acct-1","amount":5}`)
			b := e.browser()
			b.signIn(bobTok)
			form := tt.form(r)
			a := b.post("/ui/approvals/"+string(r.ID)+"/approve", form)
			if a.status != tt.status || !strings.Contains(a.body, tt.want) {
				t.Fatalf("status %d, want %d with %q:\n%s", a.status, tt.status, tt.want, a.body)
			}
			if got := e.state(r.ID); got.State != approval.StatePending || len(got.Reviews) != 0 {
				t.Errorf("a refused approve-with-grant changed the request: %s %+v", got.State, got.Reviews)
			}
			if n := len(e.grants()); n != 0 {
				t.Errorf("%d grants after a refusal", n)
			}
			// What the approver typed is shown again, in the open terms.
			if !strings.Contains(a.body, `<details class="grant-terms" data-grant open>`) ||
				!strings.Contains(a.body, `name="grant_duration" value="`+html.EscapeString(form.Get("grant_duration"))+`"`) {
				t.Errorf("the refused terms are not shown again:\n%s", a.body)
			}
		})
	}
}

func TestPlainApproveUnchangedByGrantFields(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"to":"acct-1","amount":5}`)
	b := e.browser()
	b.signIn(bobTok)
	// The page posts the empty grant fields along with a plain approve.
	a := b.post("/ui/approvals/"+string(r.ID)+"/approve", url.Values{"arguments_hash": {r.ArgumentsHash},
		"grant_duration": {""}, "grant_max_uses": {""}, "grant_when": {""}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/approvals/"+string(r.ID)+"?done=approve" {
		t.Fatalf("plain approve: %d %q\n%s", a.status, a.header.Get("Location"), a.body)
	}
	if got := e.state(r.ID); got.State != approval.StateApproved || got.Reviews[0].Grant != nil {
		t.Errorf("plain approve: %s %+v", got.State, got.Reviews)
	}
	if n := len(e.grants()); n != 0 {
		t.Errorf("a plain approve made %d grants", n)
	}
}

func TestApproveWithGrantAwaitsTheQuorum(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"to":"acct-1","amount":5}`, func(r *approval.Request) { r.RequiredApprovals = 2 })
	b := e.browser()
	b.signIn(bobTok)
	a := b.post("/ui/approvals/"+string(r.ID)+"/approve", grantForm(r, "1h", "", ""))
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/approvals/"+string(r.ID)+"?done=grant-pending" {
		t.Fatalf("first approve with a grant of two: %d %q\n%s", a.status, a.header.Get("Location"), a.body)
	}
	if got := e.state(r.ID); got.State != approval.StatePending || len(got.Reviews) != 1 || got.Reviews[0].Grant == nil {
		t.Errorf("after one of two approvals: %s %+v", got.State, got.Reviews)
	}
	if n := len(e.grants()); n != 0 {
		t.Errorf("%d grants before the quorum attached the terms", n)
	}
	if page := b.page("/ui/approvals/" + string(r.ID) + "?done=grant-pending"); !strings.Contains(page, "when enough approvers attach the same terms") {
		t.Errorf("no flash saying the grant waits for the quorum:\n%s", page)
	}
	// The second approver attaches the same terms: the grant is made.
	c := e.browser()
	c.signIn(aliceTok)
	// No condition: the flash says that the grant admits any arguments.
	if a := c.post("/ui/approvals/"+string(r.ID)+"/approve", grantForm(r, "1h", "", "")); a.header.Get("Location") != "/ui/approvals/"+string(r.ID)+"?done=grant-any" {
		t.Fatalf("second approve with a grant: %d %q\n%s", a.status, a.header.Get("Location"), a.body)
	}
	if page := c.page("/ui/approvals/" + string(r.ID) + "?done=grant-any"); !strings.Contains(page, "it admits any arguments to this tool") {
		t.Errorf("no flash saying the grant admits any arguments:\n%s", page)
	}
	if gs := e.grants(); len(gs) != 1 || len(gs[0].ApprovedBy) != 2 || gs[0].SourceApproval != r.ID {
		t.Errorf("grants after the quorum: %+v", gs)
	}
}

// TestGrantsPageMoreShowsALaggingGrant (grants42): an admin opens
// /ui/grants (a page of grantsLimit, 200), and before they follow "More"
// an instance whose clock lags makes a grant, whose UUIDv7 id sorts
// before every id on the first page. Paged by id, the next page started
// after the first page's last id and never showed it: a grant the admin
// never saw to revoke. Paged by list order it is on the next page.
func TestGrantsPageMoreShowsALaggingGrant(t *testing.T) {
	e := newEnv(t, nil)
	mk := func(n int, id string) {
		t.Helper()
		r := e.request(n, fmt.Sprintf(`{"amount":%d}`, n))
		g := grant.Grant{ID: id, Principal: "agent-1", Server: "pay", Tool: "transfer", CreatedAt: e.now, ExpiresAt: e.now.Add(time.Hour),
			CreatedBy: "bob", Approvals: 1, SourceApproval: r.ID}
		if _, _, err := e.db.UpdateRequestGranting(t.Context(), r.ID, "bob", func(*approval.Request) (*grant.Grant, error) { return &g, nil }); err != nil {
			t.Fatal(err)
		}
	}
	for n := 1; n <= 201; n++ {
		mk(n, fmt.Sprintf("0191%04x-0000-7000-8000-%012x", n, n))
	}
	b := e.browser()
	b.signIn(bobTok)
	first := b.page("/ui/grants")
	more := regexp.MustCompile(`href="/ui/grants\?cursor=([^"]+)"`).FindStringSubmatch(first)
	if more == nil {
		t.Fatalf("the first page of 201 grants has no More link:\n%s", first)
	}
	const lagging = "01900001-0000-7000-8000-0000000000ff" // a clock behind every id above
	mk(202, lagging)
	next := b.page("/ui/grants?cursor=" + html.UnescapeString(more[1]))
	for _, id := range []string{fmt.Sprintf("0191%04x-0000-7000-8000-%012x", 201, 201), lagging} {
		if !strings.Contains(next, `data-grant-id="`+id+`"`) {
			t.Errorf("the page after More lacks grant %s", id)
		}
	}
	if strings.Contains(next, `href="/ui/grants?cursor=`) {
		t.Errorf("the second page has a More link, want the last page")
	}
}

// TestApproveAndRememberForbidden (grants50): the detail page of a call
// whose decision said grants: false offers no "Approve and remember" (a
// plain Approve stays), and a forged approve with grant terms is refused
// (409) with nothing recorded. Elsewhere the grant terms warn that an
// empty condition admits any arguments.
func TestApproveAndRememberForbidden(t *testing.T) {
	e := newEnv(t, nil)
	plain := e.request(1, `{"to":"acct-1","amount":5}`)
	r := e.request(2, `{"to":"acct-2","amount":50000}`, func(r *approval.Request) { r.NoGrants = true })
	b := e.browser()
	b.signIn(bobTok)
	if page := b.page("/ui/approvals/" + string(plain.ID)); !strings.Contains(page, "An empty condition (or one always true, such as <code>true</code>) admits any arguments") {
		t.Errorf("the grant terms do not warn that an empty condition admits any arguments:\n%s", page)
	}
	page := b.page("/ui/approvals/" + string(r.ID))
	if strings.Contains(page, `data-action="approve-grant"`) || strings.Contains(page, `name="grant_when"`) || !strings.Contains(page, `data-action="approve"`) {
		t.Errorf("detail of a call that forbids grants offers to remember it, or no approve:\n%s", page)
	}
	a := b.post("/ui/approvals/"+string(r.ID)+"/approve", grantForm(r, "1h", "", ""))
	if a.status != http.StatusConflict || !strings.Contains(a.body, "grants: false") {
		t.Fatalf("forged approve with a grant: status %d, want 409 naming grants: false:\n%s", a.status, a.body)
	}
	if got := e.state(r.ID); got.State != approval.StatePending || len(got.Reviews) != 0 {
		t.Errorf("a refused approve-with-grant changed the request: %s %+v", got.State, got.Reviews)
	}
	if n := len(e.grants()); n != 0 {
		t.Errorf("%d grants after a refusal", n)
	}
}
