package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"toolgate/internal/approval"
)

// TestApprovalCompletingQuorumSaysTheRecheck (explain50): the approver
// whose approval completes a 2-of-2 quorum in the inbox is told that the
// request is approved (2 of 2) and that the call runs when its holder
// re-checks it against the policy in force and its approval quorum, not that it runs; the page's
// outcome says it has not run yet. Once the dispatch re-check invalidated
// it (the policy now denies it; a real SQLite store), the page says that
// instead. On 3eefbceb the flash was "Your approval was recorded." and the
// outcome "approved by bob, not yet dispatched".
func TestApprovalCompletingQuorumSaysTheRecheck(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"to":"acct-1","amount":5}`, func(r *approval.Request) { r.RequiredApprovals = 2 })
	hash := url.Values{"arguments_hash": {r.ArgumentsHash}}
	const recheck = "The call runs when its holder re-checks it against the policy in force and its approval quorum"

	alice := e.browser()
	alice.signIn(aliceTok)
	a := alice.review(r, "approve", hash)
	if a.status != http.StatusSeeOther {
		t.Fatalf("alice's approve: %d\n%s", a.status, a.body)
	}
	if page := alice.page(a.header.Get("Location")); !strings.Contains(page, "Your approval was recorded.") || strings.Contains(page, recheck) {
		t.Errorf("the page after the first of two approvals:\n%s", page)
	}

	bob := e.browser()
	bob.signIn(bobTok)
	a = bob.review(r, "approve", hash)
	if a.status != http.StatusSeeOther {
		t.Fatalf("bob's approve: %d\n%s", a.status, a.body)
	}
	page := bob.page(a.header.Get("Location"))
	for _, w := range []string{"it is approved (2 of 2). " + recheck, "approved by bob, not yet run: the call runs when its holder re-checks it against the policy in force and its approval quorum"} {
		if !strings.Contains(page, w) {
			t.Errorf("the page after the approval completing the quorum lacks %q:\n%s", w, page)
		}
	}

	// The holder's re-check: the policy in force now denies the call.
	if _, err := e.db.UpdateRequest(t.Context(), r.ID, "toolgate", func(x *approval.Request) error {
		return x.Consume(x.Binding(), "no transfers", e.now)
	}); err != nil {
		t.Fatal(err)
	}
	if got := e.state(r.ID); got.State != approval.StateInvalidated {
		t.Fatalf("after the re-check: %s (%q), want invalidated", got.State, got.Reason)
	}
	page = bob.page("/ui/approvals/" + string(r.ID))
	if !strings.Contains(page, "invalidated: policy now denies the call (rule &#34;no transfers&#34;)") || strings.Contains(page, "not yet run") {
		t.Errorf("the page of the invalidated request does not say what happened:\n%s", page)
	}
}
