package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"toolgate/internal/approval"
)

// TestApprovalInRetryModeSaysTheResend (review50): approving a call held
// in retry mode, which nothing holds until its caller re-sends it, tells
// the approver (flash and outcome) that it runs when its caller re-sends
// it, as the CLI and Slack say, not "when its holder re-checks it". On
// 0c9d0562 the inbox said the latter for every mode.
func TestApprovalInRetryModeSaysTheResend(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"to":"acct-1","amount":5}`, func(r *approval.Request) { r.Mode = "retry" })
	bob := e.browser()
	bob.signIn(bobTok)
	a := bob.review(r, "approve", url.Values{"arguments_hash": {r.ArgumentsHash}})
	if a.status != http.StatusSeeOther {
		t.Fatalf("bob's approve: %d\n%s", a.status, a.body)
	}
	page := bob.page(a.header.Get("Location"))
	for _, w := range []string{
		"it is approved (1 of 1). The call runs when its caller re-sends it, if the re-check against the policy in force admits it",
		"approved by bob, not yet run: the call runs when its caller re-sends it, if the re-check against the policy in force admits it",
	} {
		if !strings.Contains(page, w) {
			t.Errorf("the page after the approval lacks %q:\n%s", w, page)
		}
	}
	if strings.Contains(page, "when its holder") {
		t.Errorf("the page says the call runs when its holder re-checks it; a retry-mode call has none:\n%s", page)
	}
}
