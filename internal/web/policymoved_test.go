package web_test

import (
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// TestDetailSaysThePolicyChangedSince (fixes49): a pending approval
// outlives a change of the deployment policy; the call is checked again
// against the policy in force when it runs, and a policy that now denies
// it makes approving it run nothing, but the page said nothing of the
// change. It says so while the request is pending and the revision in
// force is not the one that asked for it.
func TestDetailSaysThePolicyChangedSince(t *testing.T) {
	e := newEnv(t, nil)
	held := policy.NewHolder(&policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}})
	e.g = gate.New(e.db, held, nil)
	e.api = api.New(e.g, func(tok string) (approval.Principal, []string, bool) {
		id, ok := e.people[hashHex(tok)]
		return id.p, id.roles, ok
	}, nil)
	e.inbox = e.newInbox(nil)
	asked := held.Revision()
	if asked == "" {
		t.Fatal("the holder's policy has no revision")
	}
	r := e.request(1, `{"a":1}`, func(r *approval.Request) { r.PolicyRevision = asked })
	decided := e.request(2, `{"a":2}`, func(r *approval.Request) { r.PolicyRevision = asked })
	if _, err := e.g.Review(t.Context(), decided.ID, approval.Principal{ID: "bob", Kind: "human"}, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	b := b2(t, e)
	const note = "The deployment policy changed since this request was made"
	if page := b.page("/ui/approvals/" + string(r.ID)); strings.Contains(page, note) {
		t.Fatalf("the page says the policy changed while it has not")
	}

	held.Store(&policy.Policy{Default: policy.Deny, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}})
	if held.Revision() == asked {
		t.Fatal("the new policy has the old revision")
	}
	page := b.page("/ui/approvals/" + string(r.ID))
	if !strings.Contains(page, note) || !strings.Contains(page, `revision <span class="mono">`+asked+`</span> asked for it`) ||
		!strings.Contains(page, "if that policy denies it, approving runs nothing; if it allows it, an identical re-send runs without this approval") {
		t.Errorf("the page of a pending approval after a policy change does not say so:\n%s", page)
	}
	if page := b.page("/ui/approvals/" + string(decided.ID)); strings.Contains(page, note) {
		t.Errorf("the page of a decided approval says the policy changed since")
	}
}
