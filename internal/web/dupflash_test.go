package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestRepeatedVerdictSaysNothingWasRecorded (fixes49): a reviewer who
// posted the verdict they had already given (a second tab, a double
// click) was told "Your approval was recorded" or "Your denial was
// recorded", though the API answered that nothing was recorded
// (duplicate). The page says their earlier review stands, and what the
// request is now; a verdict after someone else decided it is a 409 that
// names who did.
func TestRepeatedVerdictSaysNothingWasRecorded(t *testing.T) {
	e := newEnv(t, nil)
	bob := b2(t, e)
	pageAfter := func(t *testing.T, a answer) string {
		t.Helper()
		if a.status != http.StatusSeeOther {
			t.Fatalf("review: %d\n%s", a.status, a.body)
		}
		return bob.page(a.header.Get("Location"))
	}
	approve := func(r approval.Request, reason string) url.Values {
		return url.Values{"arguments_hash": {r.ArgumentsHash}, "reason": {reason}}
	}

	t.Run("approve twice, quorum not reached", func(t *testing.T) {
		r := e.request(1, `{"a":1}`, func(r *approval.Request) { r.RequiredApprovals = 2 })
		if page := pageAfter(t, bob.review(r, "approve", approve(r, "first"))); !strings.Contains(page, "Your approval was recorded") {
			t.Fatalf("the first approval's page does not say it was recorded")
		}
		page := pageAfter(t, bob.review(r, "approve", approve(r, "second")))
		if strings.Contains(page, "Your approval was recorded") {
			t.Errorf("the repeated approval's page says it was recorded")
		}
		if want := "You had already approved this request: your earlier review stands and nothing new was recorded (a new reason or grant terms are not kept). It is pending."; !strings.Contains(page, want) {
			t.Errorf("the repeated approval's page does not say %q", want)
		}
		if got := e.state(r.ID); len(got.Reviews) != 1 || got.Reviews[0].Reason != "first" {
			t.Errorf("reviews after the repeat: %+v", got.Reviews)
		}
	})
	t.Run("deny twice", func(t *testing.T) {
		r := e.request(2, `{"a":2}`, func(r *approval.Request) {
			r.HeldBy, r.LeaseUntil = "gw-live-2", e.now.Add(6*time.Hour)
		})
		if page := pageAfter(t, bob.review(r, "deny", approve(r, "no"))); !strings.Contains(page, "Your denial was recorded") {
			t.Fatalf("the first denial's page does not say it was recorded")
		}
		page := pageAfter(t, bob.review(r, "deny", approve(r, "still no")))
		if strings.Contains(page, "Your denial was recorded") || strings.Contains(page, "gets your reason") {
			t.Errorf("the repeated denial's page says it was recorded")
		}
		if want := "You had already denied this request: your earlier review stands and nothing new was recorded (a new reason or grant terms are not kept). It is denied, decided by bob."; !strings.Contains(page, want) {
			t.Errorf("the repeated denial's page does not say %q", want)
		}
		if got := e.state(r.ID); got.Reason != "no" {
			t.Errorf("the reason now %q, want the first", got.Reason)
		}
	})
	t.Run("approve, then approve with a grant", func(t *testing.T) {
		r := e.request(3, `{"a":3}`)
		pageAfter(t, bob.review(r, "approve", approve(r, "ok")))
		page := pageAfter(t, bob.review(r, "approve", grantForm(r, "1h", "", "")))
		if strings.Contains(page, "recorded and remembered as a grant") || strings.Contains(page, "grant terms were recorded") {
			t.Errorf("the repeated approval with a grant says a grant was recorded")
		}
		if want := "You had already approved this request"; !strings.Contains(page, want) || !strings.Contains(page, "It is approved, decided by bob.") {
			t.Errorf("the repeated approval with a grant does not say %q and its state", want)
		}
	})
	t.Run("decided by someone else", func(t *testing.T) {
		r := e.request(4, `{"a":4}`, func(r *approval.Request) { r.Approvers = []string{"bob", "group:ops"} })
		alice := e.browser()
		alice.signIn(aliceTok)
		pageAfter(t, alice.review(r, "deny", approve(r, "not this one")))
		a := bob.review(r, "approve", approve(r, "fine"))
		if a.status != http.StatusConflict || !strings.Contains(a.body, "decided by alice): nothing was recorded") || strings.Contains(a.body, "was recorded.") {
			t.Errorf("approving a request alice denied: %d\n%s", a.status, a.body)
		}
	})
}
