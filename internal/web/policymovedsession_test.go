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

// TestPolicyMovedNoteOfASessionHold (review49): after a policy change the
// detail page said of every pending tool call that, if the new policy
// allows it, "an identical re-send runs without this approval". A
// session's require_approval hold (gate.SessionRule) is not lifted by a
// policy that allows the call: the re-send waits on the same request. Its
// page says so instead; a policy rule's page keeps the re-send sentence.
func TestPolicyMovedNoteOfASessionHold(t *testing.T) {
	e := newEnv(t, nil)
	held := policy.NewHolder(&policy.Policy{Default: policy.Allow, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}})
	e.g = gate.New(e.db, held, nil)
	e.api = api.New(e.g, func(tok string) (approval.Principal, []string, bool) {
		id, ok := e.people[hashHex(tok)]
		return id.p, id.roles, ok
	}, nil)
	e.inbox = e.newInbox(nil)
	asked := held.Revision()
	sess := e.request(1, `{"a":1}`, func(r *approval.Request) { r.PolicyRevision, r.Rule = asked, gate.SessionRule })
	rule := e.request(2, `{"a":2}`, func(r *approval.Request) { r.PolicyRevision, r.Rule = asked, "writes" })
	held.Store(&policy.Policy{Default: policy.Allow, Rules: []policy.Rule{{Name: "reads", Tools: []string{"read"}, Effect: policy.Allow}},
		Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}})
	b := b2(t, e)
	const resend = "if it allows it, an identical re-send runs without this approval"
	page := b.page("/ui/approvals/" + string(sess.ID))
	if !strings.Contains(page, "data-policy-moved") || strings.Contains(page, resend) ||
		!strings.Contains(page, "if it allows it, the session's require_approval still holds the call for this approval") {
		t.Errorf("the page of a session's require_approval hold after a policy change:\n%s", page)
	}
	if page := b.page("/ui/approvals/" + string(rule.ID)); !strings.Contains(page, resend) {
		t.Errorf("the page of a policy rule's hold lost the re-send sentence:\n%s", page)
	}
}
