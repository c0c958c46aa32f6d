package gate

import (
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore"
)

// TestGrantApproverNoLongerEligibleAdmitsNothing (review51b): the grant
// counterpart of TestApproverNoLongerEligibleInvalidates. Two approvers of
// group:ops make a grant for a rule needing two; an instance started with
// another roster (alice is no longer an approver, carol is of another
// tenant) counts neither behind the grant, as its consume re-check counts
// neither behind an approval, so the grant admits nothing there; the
// instance whose roster still lists them uses it (the control). On
// 89d66645 the grant admitted the call on the second instance (the groups
// recorded when it was made were counted, whoever the roster lists now),
// while the same two approvals of a held call were invalidated.
func TestGrantApproverNoLongerEligibleAdmitsNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		before := []Reviewer{{ID: "alice", Groups: []string{"ops"}}, {ID: "carol", Groups: []string{"ops"}}}
		after := []Reviewer{{ID: "carol", Groups: []string{"ops"}, Tenant: "other"}}
		f := newFixtureOn(t, db, time.Minute, &Options{Instance: "a", Reviewers: before, GrantMaxTTL: time.Hour})
		f.pol.p.Store(quorumPolicy(2, policy.ModeRetry, "group:ops"))
		b := New(db, f.pol, &Options{Instance: "b", Reviewers: after, GrantMaxTTL: time.Hour})

		first := f.gate.Admit(t.Context(), writeCall("/granted"))
		if first.Allowed || first.ApprovalID == "" {
			t.Fatalf("first send: %+v, want pending", first)
		}
		terms := approval.GrantTerms{TTL: time.Hour}
		if _, made, err := f.gate.ApproveWithGrant(t.Context(), first.ApprovalID, aliceOps, "ok", "", terms); err != nil || made != nil {
			t.Fatalf("alice's approve with terms = %v, %v; want pending, no grant yet", made, err)
		}
		_, made, err := f.gate.ApproveWithGrant(t.Context(), first.ApprovalID, carolOps, "ok", "", terms)
		if err != nil || made == nil || len(made.ApprovedBy) != 2 {
			t.Fatalf("carol's approve with terms = %+v, %v; want a grant approved by both", made, err)
		}

		if a := b.Admit(t.Context(), writeCall("/other-roster")); a.Allowed || a.Grant != "" {
			t.Fatalf("instance b (neither approver eligible): %+v, want not allowed by grant %s", a, made.ID)
		}
		a := f.gate.Admit(t.Context(), writeCall("/same-roster"))
		if !a.Allowed || a.Grant != made.ID {
			t.Fatalf("instance a (both approvers eligible): %+v, want allowed by grant %s", a, made.ID)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
	})
}

// TestGrantTermsRefusedOnceTheHoldingRuleIsGone (review51b): a call held
// by a rule saying grants: true, under a policy whose approval says
// grants: false; a reload removes that rule, so the call now falls to the
// default, which forbids grants: grant terms are refused, nothing
// recorded, and the refusal names the policy's approval, not a rule
// "default". On 89d66645 the grant was made.
func TestGrantTermsRefusedOnceTheHoldingRuleIsGone(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		yes, no := true, false
		p := writesPolicy(false)
		p.Approval.Grants = &no
		p.Rules[len(p.Rules)-1].Approval = &policy.Approval{Grants: &yes} // "writes" allows grants
		h := policy.NewHolder(p)
		g := New(db, h, &Options{RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour})
		watch(t, db, g)
		a := g.Admit(t.Context(), writeArgs("/tmp/a"))
		if a.Allowed || a.ApprovalID == "" {
			t.Fatalf("%+v, want approval required", a)
		}
		if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || r.NoGrants || r.Rule != "writes" {
			t.Fatalf("held: rule %q NoGrants %v (%v), want rule writes taking grants", r.Rule, r.NoGrants, err)
		}
		gone := writesPolicy(false)
		gone.Approval.Grants = &no
		gone.Rules = gone.Rules[:len(gone.Rules)-1]
		h.Store(gone)
		_, _, err := g.ApproveWithGrant(t.Context(), a.ApprovalID, bobApprover, "ok", "", approval.GrantTerms{TTL: time.Hour})
		if err == nil || !strings.Contains(err.Error(), "policy.approval, for calls the policy's default holds") || strings.Contains(err.Error(), `rule "default"`) {
			t.Errorf("refusal %v, want one naming policy.approval for the default", err)
		}
		refusedWithNothingRecorded(t, g, db, a.ApprovalID, 0)
	})
}
