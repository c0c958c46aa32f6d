package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// xssArgs are arguments an agent controls that look like markup and
// script: they must show as text and run nothing.
const xssArgs = `{"note":"<img src=x onerror=alert(1)>","link":"javascript:alert(document.cookie)","script":"</script><script>alert(2)</script>",` +
	`"file":"/srv/invoice\u202Efdp.exe","body":"line one\nline two\twith a tab","password":"hunter2","nested":{"a":[1,2e400,"x"]}}`

func TestEscaping(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, xssArgs)
	b := e.browser()
	b.signIn(bobTok)
	for _, path := range []string{"/ui/", "/ui/approvals/" + string(r.ID), "/ui/fragment/inbox", "/ui/fragment/approvals/" + string(r.ID)} {
		page := b.page(path)
		for _, bad := range []string{"<img src=x", "<script>alert", "href=\"javascript:", "\u202E", "hunter2"} {
			if strings.Contains(page, bad) {
				t.Errorf("%s contains %q raw", path, bad)
			}
		}
		if !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("%s does not show the markup-like argument as text", path)
		}
	}
	detail := b.page("/ui/approvals/" + string(r.ID))
	for _, want := range []string{
		`javascript:alert(document.cookie)`,                       // shown as text
		`<span class="hidden" title="hidden character U&#43;202E`, // the bidi override made visible
		`\u202E`, // as an escape
		`<span class="redacted">[redacted: key &#34;password&#34;]</span>`, // redaction marker prominent
		`<pre>line one` + "\n" + `line two` + "\t" + `with a tab</pre>`,    // a multi-line string as a text block
		`class="warnings"`, `$.file: contains U&#43;202E RIGHT-TO-LEFT OVERRIDE`, // display warnings first
		`<span class="lit">2e400</span>`,                               // number literal as sent
		`name="arguments_hash" value="` + r.ArgumentsHash + `"`,        // the hash the page posts
		`data-approval-id="` + string(r.ID) + `" data-state="pending"`, // test hooks
		`data-action="approve"`, `data-action="deny"`, `name="reason"`,
	} {
		if !strings.Contains(detail, want) {
			t.Errorf("detail page does not contain %q", want)
		}
	}
	inbox := b.page("/ui/")
	if !strings.Contains(inbox, `⚠ 2 warnings`) {
		t.Errorf("inbox row does not flag the display warnings")
	}
}

// review posts a verdict on r from the detail page's form.
func (b *browser) review(r approval.Request, verb string, form url.Values) answer {
	b.e.t.Helper()
	page := b.page("/ui/approvals/" + string(r.ID))
	form.Set("csrf", csrf(b.e.t, page))
	return b.do("POST", "/ui/approvals/"+string(r.ID)+"/"+verb, form)
}

func TestReviewFromThePage(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	b.signIn(bobTok)

	t.Run("approve", func(t *testing.T) {
		r := e.request(1, `{"to":"acct-1","amount":5}`)
		a := b.review(r, "approve", url.Values{"arguments_hash": {r.ArgumentsHash}, "reason": {"fine"}})
		if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/approvals/"+string(r.ID)+"?done=approve" {
			t.Fatalf("approve: %d %s\n%s", a.status, a.header.Get("Location"), a.body)
		}
		got := e.state(r.ID)
		if got.State != approval.StateApproved || got.DecidedBy != "bob" || got.Reason != "fine" {
			t.Errorf("after approve: %s by %s (%q)", got.State, got.DecidedBy, got.Reason)
		}
		page := b.page(a.header.Get("Location"))
		if !strings.Contains(page, "Your approval was recorded") || !strings.Contains(page, `data-state="approved"`) {
			t.Errorf("the page after approving does not say so:\n%s", page)
		}
	})
	t.Run("changed hash answers 409 and records nothing", func(t *testing.T) {
		r := e.request(2, `{"to":"acct-2","amount":5}`)
		other, _ := approval.Hash([]byte(`{"to":"acct-2","amount":500}`))
		a := b.review(r, "approve", url.Values{"arguments_hash": {other}})
		if a.status != http.StatusConflict || !strings.Contains(a.body, "The request changed since this page showed it") {
			t.Fatalf("approve with another hash: %d\n%s", a.status, a.body)
		}
		if got := e.state(r.ID); got.State != approval.StatePending || len(got.Reviews) != 0 {
			t.Errorf("a mismatched approve was recorded: %s %+v", got.State, got.Reviews)
		}
	})
	t.Run("no hash records nothing", func(t *testing.T) {
		r := e.request(3, `{"to":"acct-3"}`)
		if a := b.review(r, "approve", url.Values{}); a.status != http.StatusUnprocessableEntity {
			t.Fatalf("approve without a hash: %d", a.status)
		}
		if got := e.state(r.ID); got.State != approval.StatePending {
			t.Errorf("state %s", got.State)
		}
	})
	t.Run("deny needs a reason", func(t *testing.T) {
		r := e.request(4, `{"to":"acct-4"}`)
		a := b.review(r, "deny", url.Values{"arguments_hash": {r.ArgumentsHash}, "reason": {"  "}})
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "a deny needs a") {
			t.Fatalf("deny without a reason: %d\n%s", a.status, a.body)
		}
		if got := e.state(r.ID); got.State != approval.StatePending {
			t.Fatalf("state %s after a deny without reason", got.State)
		}
		a = b.review(r, "deny", url.Values{"arguments_hash": {r.ArgumentsHash}, "reason": {"not this account"}})
		if a.status != http.StatusSeeOther {
			t.Fatalf("deny: %d\n%s", a.status, a.body)
		}
		if got := e.state(r.ID); got.State != approval.StateDenied || got.Reason != "not this account" {
			t.Errorf("after deny: %s %q", got.State, got.Reason)
		}
	})
	t.Run("self review refused", func(t *testing.T) {
		r := e.request(5, `{}`, func(r *approval.Request) { r.OnBehalfOf = "bob" })
		page := b.page("/ui/approvals/" + string(r.ID))
		if !strings.Contains(page, `data-action="approve" disabled`) || !strings.Contains(page, "you requested it") {
			t.Errorf("the page offers bob a review of his own request")
		}
		if a := b.review(r, "approve", url.Values{"arguments_hash": {r.ArgumentsHash}}); a.status != http.StatusForbidden {
			t.Errorf("self review: %d", a.status)
		}
	})
}

func TestCSRFAndOrigin(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"to":"acct-1"}`)
	b := e.browser()
	b.signIn(bobTok)
	good := func() url.Values {
		return url.Values{"csrf": {csrf(t, b.page("/ui/"))}, "arguments_hash": {r.ArgumentsHash}}
	}
	path := "/ui/approvals/" + string(r.ID) + "/approve"
	tests := []struct {
		name   string
		form   func() url.Values
		origin string
		header []string
	}{
		{"no csrf", func() url.Values { f := good(); f.Del("csrf"); return f }, "http://inbox.test", nil},
		{"wrong csrf", func() url.Values { f := good(); f.Set("csrf", strings.Repeat("0", 64)); return f }, "http://inbox.test", nil},
		{"no origin", good, "", nil},
		{"other origin", good, "http://evil.test", nil},
		{"other port", good, "http://inbox.test:8080", nil},
		{"cross-site fetch", good, "http://inbox.test", []string{"Sec-Fetch-Site", "cross-site"}},
		{"same-site, other origin", good, "http://inbox.test", []string{"Sec-Fetch-Site", "same-site"}},
		{"null origin without the browser's word", good, "null", nil},
		{"null origin from another site", good, "null", []string{"Sec-Fetch-Site", "cross-site"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form := tt.form()
			b.origin = tt.origin
			a := b.do("POST", path, form, tt.header...)
			b.origin = "http://inbox.test"
			if a.status != http.StatusForbidden {
				t.Errorf("status %d, want 403", a.status)
			}
			if got := e.state(r.ID); got.State != approval.StatePending || len(got.Reviews) != 0 {
				t.Fatalf("a refused POST changed the request: %s", got.State)
			}
		})
	}
	// A form submission as browsers send it under Referrer-Policy:
	// no-referrer (Origin: null, Sec-Fetch-Site: same-origin) goes through.
	b.origin = "null"
	a := b.do("POST", path, good(), "Sec-Fetch-Site", "same-origin")
	b.origin = "http://inbox.test"
	if a.status != http.StatusSeeOther {
		t.Fatalf("a proper POST: %d\n%s", a.status, a.body)
	}
	// Another session's token does not work for this one.
	other := e.browser()
	other.signIn(aliceTok)
	r2 := e.request(2, `{"to":"acct-2"}`)
	a = other.do("POST", "/ui/approvals/"+string(r2.ID)+"/approve", url.Values{"csrf": {csrf(t, b.page("/ui/"))}, "arguments_hash": {r2.ArgumentsHash}})
	if a.status != http.StatusForbidden || e.state(r2.ID).State != approval.StatePending {
		t.Errorf("bob's CSRF token worked in alice's session: %d", a.status)
	}
}

func TestBulkApprove(t *testing.T) {
	e := newEnv(t, nil)
	var rs []approval.Request
	for i := range 5 {
		rs = append(rs, e.request(i+1, `{"n":`+string(rune('1'+i))+`}`))
	}
	opsOnly := e.request(6, `{"n":6}`, func(r *approval.Request) { r.Approvers = []string{"group:ops"} })
	b := e.browser()
	b.signIn(bobTok)
	inbox := b.page("/ui/")
	for _, r := range rs {
		if !strings.Contains(inbox, `value="`+string(r.ID)+` `+r.ArgumentsHash+`"`) {
			t.Fatalf("inbox has no checkbox for %s", r.ID)
		}
	}
	if strings.Contains(inbox, `value="`+string(opsOnly.ID)) {
		t.Error("inbox offers bob a checkbox for a request he may not review")
	}
	stale, _ := approval.Hash([]byte(`{"n":"changed"}`))
	form := url.Values{"approve": {
		string(rs[0].ID) + " " + rs[0].ArgumentsHash,
		string(rs[2].ID) + " " + rs[2].ArgumentsHash,
		string(rs[4].ID) + " " + rs[4].ArgumentsHash,
		string(rs[1].ID) + " " + stale,                   // changed since shown: skipped
		string(opsOnly.ID) + " " + opsOnly.ArgumentsHash, // not eligible: skipped
	}, "reason": {"batch"}}
	a := b.post("/ui/approve", form)
	if a.status != http.StatusOK {
		t.Fatalf("bulk: %d\n%s", a.status, a.body)
	}
	if !strings.Contains(a.body, "Approved: 3") || !strings.Contains(a.body, "Skipped: 2") {
		t.Errorf("bulk answer does not count 3 approved and 2 skipped:\n%s", a.body)
	}
	for _, w := range []string{"arguments_hash does not match", "not among the approvers"} {
		if !strings.Contains(a.body, w) {
			t.Errorf("bulk answer does not say %q", w)
		}
	}
	want := map[approval.ID]approval.State{rs[0].ID: approval.StateApproved, rs[2].ID: approval.StateApproved, rs[4].ID: approval.StateApproved,
		rs[1].ID: approval.StatePending, rs[3].ID: approval.StatePending, opsOnly.ID: approval.StatePending}
	for id, st := range want {
		if got := e.state(id); got.State != st {
			t.Errorf("%s: %s, want %s", id, got.State, st)
		}
	}
	if a := b.post("/ui/approve", url.Values{}); a.status != http.StatusUnprocessableEntity {
		t.Errorf("empty bulk: %d", a.status)
	}
}

// TestBulkApproveOnlyWhatTheListShowsWhole: the inbox's one-line summary
// cuts long values, abbreviates nested ones ("{1 key}") and cuts the
// line, so an agent can pad its arguments until the part that matters is
// not in the list. Such a request gets no bulk checkbox (the list says
// why), and a bulk approval naming it (an older page, a crafted form)
// skips it with nothing recorded: it is approved on its own page, where
// the arguments are shown whole. Requests the list shows whole keep
// their checkbox and are approved.
func TestBulkApproveOnlyWhatTheListShowsWhole(t *testing.T) {
	e := newEnv(t, nil)
	whole := e.request(1, `{"to":"acct-1","amount":5}`)
	padded := e.request(2, `{"memo":"`+strings.Repeat("monthly rent ", 8)+`","to":"acct-evil","amount":9999}`)
	nested := e.request(3, `{"transfer":{"to":"acct-evil","amount":9999}}`)
	long := e.request(4, `{"a":"`+strings.Repeat("x", 50)+`","b":"`+strings.Repeat("y", 50)+`","c":"`+strings.Repeat("z", 50)+`","to":"acct-evil"}`)
	b := e.browser()
	b.signIn(bobTok)
	inbox := b.page("/ui/")
	if !strings.Contains(inbox, `value="`+string(whole.ID)+` `+whole.ArgumentsHash+`"`) {
		t.Errorf("inbox has no checkbox for %s, whose arguments it shows whole", whole.ID)
	}
	for _, r := range []approval.Request{padded, nested, long} {
		if strings.Contains(inbox, `value="`+string(r.ID)+` `) {
			t.Errorf("inbox offers a bulk checkbox for %s, whose arguments it shows only in part", r.ID)
		}
	}
	if !strings.Contains(inbox, "shown in part") {
		t.Error("the inbox does not say why some requests cannot be selected")
	}
	form := url.Values{"approve": {
		string(whole.ID) + " " + whole.ArgumentsHash,
		string(padded.ID) + " " + padded.ArgumentsHash,
		string(nested.ID) + " " + nested.ArgumentsHash,
		string(long.ID) + " " + long.ArgumentsHash,
	}}
	a := b.post("/ui/approve", form)
	if a.status != http.StatusOK || !strings.Contains(a.body, "Approved: 1") || !strings.Contains(a.body, "Skipped: 3") {
		t.Errorf("bulk: %d, want 1 approved and 3 skipped:\n%s", a.status, a.body)
	}
	if !strings.Contains(a.body, "approve it on its own page") {
		t.Errorf("bulk answer does not say why the others were skipped:\n%s", a.body)
	}
	want := map[approval.ID]approval.State{whole.ID: approval.StateApproved, padded.ID: approval.StatePending, nested.ID: approval.StatePending, long.ID: approval.StatePending}
	for id, st := range want {
		if got := e.state(id); got.State != st || (st == approval.StatePending && len(got.Reviews) != 0) {
			t.Errorf("%s: %s with %d reviews, want %s", id, got.State, len(got.Reviews), st)
		}
	}
}

func TestShortIDsAndTenants(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{}`)
	acme := e.request(2, `{}`, func(r *approval.Request) { r.Tenant = "acme" })
	b := e.browser()
	b.signIn(bobTok)
	suffix := string(r.ID)[len(r.ID)-6:]
	if a := b.do("GET", "/ui/approvals/"+suffix, nil); a.status != 303 || a.header.Get("Location") != "/ui/approvals/"+string(r.ID) {
		t.Errorf("suffix %s: %d %s", suffix, a.status, a.header.Get("Location"))
	}
	prefix := string(r.ID)[:8]
	if a := b.do("GET", "/ui/approvals/"+prefix, nil); a.status != 303 {
		t.Errorf("prefix %s: %d", prefix, a.status)
	}
	if a := b.do("GET", "/ui/approvals/0190", nil); a.status != 404 {
		t.Errorf("a 4-character id: %d, want 404", a.status)
	}
	// Both ids start with 0190: ambiguous.
	if a := b.do("GET", "/ui/approvals/0190000", nil); a.status != http.StatusMultipleChoices || !strings.Contains(a.body, string(acme.ID)) {
		t.Errorf("ambiguous prefix: %d", a.status)
	}
	// A tenant's approver sees only its tenant's requests.
	erin := e.browser()
	erin.signIn(acmeTok)
	if a := erin.do("GET", "/ui/approvals/"+string(r.ID), nil); a.status != 404 {
		t.Errorf("another tenant's request: %d, want 404", a.status)
	}
	inbox := erin.page("/ui/")
	if strings.Contains(inbox, string(r.ID)) || !strings.Contains(inbox, string(acme.ID)) {
		t.Errorf("acme's inbox lists the wrong requests")
	}
}

func TestViewerReadsOnly(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{}`)
	b := e.browser()
	b.signIn(viewerTok)
	inbox := b.page("/ui/")
	if strings.Contains(inbox, `data-action="bulk-approve"`) || strings.Contains(inbox, `name="approve" value=`) || !strings.Contains(inbox, "your role only reads") {
		t.Errorf("a viewer's inbox offers reviews")
	}
	detail := b.page("/ui/approvals/" + string(r.ID))
	if !strings.Contains(detail, `data-action="approve" disabled`) {
		t.Errorf("a viewer's detail page has an enabled approve button")
	}
	if a := b.review(r, "approve", url.Values{"arguments_hash": {r.ArgumentsHash}}); a.status != http.StatusForbidden {
		t.Errorf("a viewer's approve: %d, want 403", a.status)
	}
}

func TestInboxAndHistory(t *testing.T) {
	e := newEnv(t, nil)
	older := e.request(1, `{"a":1}`)
	newer := e.request(2, `{"a":2}`, func(r *approval.Request) { r.RequiredApprovals = 2; r.Tool = "refund" })
	decided := e.request(3, `{"a":3}`, func(r *approval.Request) { r.Server, r.Tool = "fs", "write_file" })
	if _, err := e.g.Review(t.Context(), decided.ID, approval.Principal{ID: "alice"}, approval.VerdictDeny, "wrong file", ""); err != nil {
		t.Fatal(err)
	}
	expired := e.request(4, `{"a":4}`, func(r *approval.Request) { r.ExpiresAt = e.now.Add(-time.Second) })
	b := e.browser()
	b.signIn(bobTok)
	inbox := b.page("/ui/")
	iNew, iOld := strings.Index(inbox, string(newer.ID)), strings.Index(inbox, string(older.ID))
	if iNew < 0 || iOld < 0 || iNew > iOld {
		t.Errorf("inbox is not newest first (newer at %d, older at %d)", iNew, iOld)
	}
	if strings.Contains(inbox, string(decided.ID)) {
		t.Error("inbox lists a decided request")
	}
	for _, want := range []string{"0 of 2</b> approvals", "0 of 1</b> approval", "rule <b>payments</b>", "by <b>agent-1</b>", `data-expires="`, "you can review"} {
		if !strings.Contains(inbox, want) {
			t.Errorf("inbox does not show %q", want)
		}
	}
	// A request past its deadline shows as expired with its buttons off,
	// even before the sweeper records it.
	detail := b.page("/ui/approvals/" + string(expired.ID))
	if !strings.Contains(detail, `data-state="expired"`) || !strings.Contains(detail, `data-action="approve" disabled`) || !strings.Contains(detail, `data-action="deny" formaction="/ui/approvals/`+string(expired.ID)+`/deny" disabled`) {
		t.Errorf("an overdue request is not shown expired with disabled buttons")
	}

	hist := b.page("/ui/history")
	if !strings.Contains(hist, string(decided.ID)) || strings.Contains(hist, string(older.ID)) || !strings.Contains(hist, "denied by alice: wrong file") {
		t.Errorf("history does not list exactly the decided request with its outcome")
	}
	for _, q := range []string{"state=denied", "server=fs", "tool=write_file", "requester=agent-1",
		"from=" + e.now.Add(-time.Hour).Format("2006-01-02T15:04")} {
		if page := b.page("/ui/history?" + q); !strings.Contains(page, string(decided.ID)) {
			t.Errorf("history?%s misses the denied request", q)
		}
	}
	for _, q := range []string{"state=expired", "server=pay", "tool=refund", "requester=someone",
		"to=" + e.now.Add(-time.Hour).Format("2006-01-02T15:04")} {
		if page := b.page("/ui/history?" + q); strings.Contains(page, string(decided.ID)) {
			t.Errorf("history?%s lists the denied request", q)
		}
	}
	if a := b.do("GET", "/ui/history?from=yesterday", nil); a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "Check the filters") {
		t.Errorf("a bad time filter: %d", a.status)
	}
}

// TestDeeplyNestedArguments renders arguments as deep as the gate accepts.
func TestDeeplyNestedArguments(t *testing.T) {
	e := newEnv(t, nil)
	deep := strings.Repeat(`{"a":`, approval.MaxDepth-1) + `"bottom"` + strings.Repeat(`}`, approval.MaxDepth-1)
	r := e.request(1, deep)
	b := e.browser()
	b.signIn(bobTok)
	if page := b.page("/ui/approvals/" + string(r.ID)); !strings.Contains(page, `"bottom"`) {
		t.Error("the deepest value is not shown")
	}
}

// TestDetailShowsWhoHoldsTheCall: the detail page names the gateway
// instance that holds (or held) the call and when its claim runs out, as
// the REST approval (held_by, held_until) and `approvals show` do.
func TestDetailShowsWhoHoldsTheCall(t *testing.T) {
	e := newEnv(t, nil)
	live := e.request(1, `{"a":1}`, func(r *approval.Request) {
		r.HeldBy, r.LeaseUntil = "gw-live-1", e.now.Add(time.Hour).Truncate(time.Second)
	})
	ended := e.request(2, `{"a":2}`, func(r *approval.Request) {
		r.HeldBy, r.LeaseUntil = "gw-gone-2", e.now.Add(-time.Hour).Truncate(time.Second)
	})
	ran := e.request(4, `{"a":4}`, func(r *approval.Request) {
		r.HeldBy, r.LeaseUntil = "gw-done-4", e.now.Add(time.Hour).Truncate(time.Second)
	})
	if _, err := e.g.Review(t.Context(), ran.ID, approval.Principal{ID: "alice"}, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	if page := b2(t, e).page("/ui/approvals/" + string(ran.ID)); !strings.Contains(page, "it held the call, which has ended") || strings.Contains(page, "renewed while it holds the call") {
		t.Errorf("the detail of a denied call does not say its holder let go")
	}
	none := e.request(3, `{"a":3}`)
	b := e.browser()
	b.signIn(bobTok)
	for _, c := range []struct {
		r    approval.Request
		want []string
	}{
		{live, []string{"<dt>Held by</dt>", "gw-live-1", "its claim runs to " + live.LeaseUntil.UTC().Format("2006-01-02 15:04:05 UTC")}},
		{ended, []string{"<dt>Held by</dt>", "gw-gone-2", "its claim ended at " + ended.LeaseUntil.UTC().Format("2006-01-02 15:04:05 UTC")}},
	} {
		for _, path := range []string{"/ui/approvals/" + string(c.r.ID), "/ui/fragment/approvals/" + string(c.r.ID)} {
			page := b.page(path)
			for _, w := range c.want {
				if !strings.Contains(page, w) {
					t.Errorf("%s does not contain %q", path, w)
				}
			}
		}
	}
	if page := b.page("/ui/approvals/" + string(none.ID)); strings.Contains(page, "Held by") {
		t.Errorf("the detail of a call no instance held shows a holder")
	}
}

// b2 is a browser signed in as bob.
func b2(t *testing.T, e *env) *browser {
	t.Helper()
	b := e.browser()
	b.signIn(bobTok)
	return b
}

// TestDetailMarksTheRequesterAmongApprovers (ops20): the detail page
// listed the requester (the proposer of a deployment policy change is
// among the admins who approve it) as an approver, though the requester
// may never review it; it is marked.
func TestDetailMarksTheRequesterAmongApprovers(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"a":1}`, func(r *approval.Request) { r.Approvers = []string{"agent-1", "bob"} })
	page := b2(t, e).page("/ui/approvals/" + string(r.ID))
	if !strings.Contains(page, "agent-1 (requested it: may not review), bob") {
		t.Errorf("the detail does not mark the requester among the approvers:\n%s", page)
	}
}

// TestLookAlikeSpacesEscaped (fixes31): a space other than U+0020 and the
// invisible characters show as escapes in the inbox row and on the detail
// page, in values and keys; before, the row and the page showed U+00A0,
// U+3000 and U+2000–U+200A, U+202F, U+205F as plain spaces, so "rm\u00a0-rf"
// read as "rm -rf".
func TestLookAlikeSpacesEscaped(t *testing.T) {
	tags := regexp.MustCompile(`<[^>]*>`)
	e := newEnv(t, nil)
	b := e.browser()
	b.signIn(bobTok)
	runes := []rune{0x00A0, 0x1680, 0x2000, 0x2005, 0x200A, 0x202F, 0x205F, 0x3000, 0x2800, // look-alike spaces
		0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x202A, 0x202E, 0x2066, 0x2069} // zero-width, bidi
	for i, r := range runes {
		esc := fmt.Sprintf(`\u%04X`, r)
		raw := fmt.Sprintf(`{"command":"rm%c-rf /tmp/x","k%cey":1}`, r, r)
		req := e.request(i+1, raw)
		for _, path := range []string{"/ui/", "/ui/fragment/inbox", "/ui/approvals/" + string(req.ID), "/ui/fragment/approvals/" + string(req.ID)} {
			page := b.page(path)
			if strings.ContainsRune(page, r) {
				t.Errorf("%s: U+%04X shown raw", path, r)
			}
			text := tags.ReplaceAllString(page, "") // the detail page marks each escape with a span
			for _, want := range []string{"rm" + esc + "-rf /tmp/x", "k" + esc + "ey"} {
				if !strings.Contains(text, want) {
					t.Errorf("%s: no %q", path, want)
				}
			}
		}
	}
	detail := b.page("/ui/approvals/" + string(e.request(100, `{"to":"a`+"\u00a0"+`b"}`).ID))
	if want := `title="look-alike space U&#43;00A0`; !strings.Contains(detail, want) {
		t.Errorf("detail page: no %q", want)
	}
}

// TestLargeArgumentsAsText (fixes31): arguments with more values than the
// page shows as a tree show as their display copy's text, whole: every
// value (the last record's too), the redaction marker marked, the hidden
// character as the copy's escape (and its warning); the page stays near the copy's size
// (the tree made 1 MB of records a 13 MB page). Small arguments keep the
// tree.
func TestLargeArgumentsAsText(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	b.signIn(bobTok)
	var sb strings.Builder
	sb.WriteString(`{"password":"hunter2","note":"a\u202eb","rows":[`)
	const rows = 2000 // 4 values each: past the tree's 5,000
	for i := range rows {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%d,"name":"row <%d>"}`, i, i)
	}
	sb.WriteString(`]}`)
	r := e.request(1, sb.String())
	for _, path := range []string{"/ui/approvals/" + string(r.ID), "/ui/fragment/approvals/" + string(r.ID)} {
		page := b.page(path)
		for _, want := range []string{
			`data-raw-args>These arguments have more than 5000 values`,
			`{&#34;id&#34;:0,&#34;name&#34;:&#34;row &lt;0&gt;&#34;}`,
			fmt.Sprintf(`{&#34;id&#34;:%d,&#34;name&#34;:&#34;row &lt;%d&gt;&#34;}]}`, rows-1, rows-1),
			`<span class="redacted">[redacted: key \&#34;password\&#34;]</span>`, // in JSON text: its quotes escaped
			// the display copy's escape, marked as on the tree (fixes32)
			`&#34;a<span class="hidden" title="hidden character U&#43;202E: it was escaped so it cannot hide or reorder text">\u202E</span>b&#34;`,
			`$.note: contains U&#43;202E RIGHT-TO-LEFT OVERRIDE`, // and the warning above
		} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: no %q", path, want)
			}
		}
		if strings.Contains(page, "hunter2") || strings.Contains(page, "\u202e") {
			t.Errorf("%s: a secret or a hidden character shown raw", path)
		}
		if n := strings.Count(page, `class="member"`); n != 0 {
			t.Errorf("%s: %d tree members; want the text view only", path, n)
		}
		if len(page) > 4*len(r.Arguments)+64<<10 {
			t.Errorf("%s: page of %d bytes for a display copy of %d", path, len(page), len(r.Arguments))
		}
	}
	small := e.request(2, `{"rows":[{"id":1,"name":"x"}]}`)
	if page := b.page("/ui/approvals/" + string(small.ID)); !strings.Contains(page, `class="member"`) || strings.Contains(page, "data-raw-args") {
		t.Error("small arguments not shown as a tree")
	}
}

// TestFoldedKeysWarned (policy44): arguments with two keys that differ
// only in case ({"path":…,"PATH":…}, which an upstream decoding with Go's
// encoding/json reads as one field, the last) get a display warning the
// detail page heads and the inbox row counts. On 8308deeb neither showed
// anything.
func TestFoldedKeysWarned(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"path":"/tmp/work/a","PATH":"/etc/shadow"}`)
	b := e.browser()
	b.signIn(bobTok)
	detail := b.page("/ui/approvals/" + string(r.ID))
	if !strings.Contains(detail, `class="warnings"`) || !strings.Contains(detail, `$: keys &#34;path&#34; and &#34;PATH&#34; differ only in case`) {
		t.Errorf("detail page does not head with the folded keys' warning:\n%s", detail)
	}
	if inbox := b.page("/ui/"); !strings.Contains(inbox, `⚠ 1 warning`) {
		t.Errorf("inbox row does not flag the folded keys' warning")
	}
}
