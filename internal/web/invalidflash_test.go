package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"toolgate/internal/approval"
)

// TestApproveFlashSaysTheCallDidNotRun (truth51): when the approval's
// request is invalidated by the time the page after it is shown (the
// approval's own consume of the held call, or its holder's re-check,
// refused it), the flash says the call did not run and why, not
// "approved". On a7b144b1 it said "Your approval was recorded." only.
func TestApproveFlashSaysTheCallDidNotRun(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"to":"acct-1","amount":5}`, func(*approval.Request) {})
	bob := e.browser()
	bob.signIn(bobTok)
	a := bob.review(r, "approve", url.Values{"arguments_hash": {r.ArgumentsHash}})
	if a.status != http.StatusSeeOther {
		t.Fatalf("bob's approve: %d\n%s", a.status, a.body)
	}
	if _, err := e.db.UpdateRequest(t.Context(), r.ID, "toolgate", func(x *approval.Request) error {
		return x.Consume(x.Binding(), "no transfers", e.now)
	}); err != nil {
		t.Fatal(err)
	}
	page := bob.page(a.header.Get("Location"))
	const want = "Your approval was recorded, but the call did not run: the re-check against the policy in force and its approval quorum invalidated the request (policy now denies the call (rule &#34;no transfers&#34;))."
	if !strings.Contains(page, want) || strings.Contains(page, "it is approved") {
		t.Errorf("the page after the approval of a request since invalidated lacks %q:\n%s", want, page)
	}
}
