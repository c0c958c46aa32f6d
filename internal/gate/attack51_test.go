package gate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore"
)

// attack51: the dispatch re-check's quorum (requorum.go) attacked.

var (
	bobOps    = approval.Principal{ID: "bob", Kind: "human", Groups: []string{"ops"}}
	opsRoster = []Reviewer{{ID: "alice", Groups: []string{"ops"}}, {ID: "bob", Groups: []string{"ops"}}, {ID: "fred", Groups: []string{"finance"}}}
)

// approveRetry makes a retry-mode request for c on g and has each of by
// approve it; it returns the approved request.
func approveRetry(t *testing.T, g *Gate, db *sqlstore.DB, c Call, by ...approval.Principal) approval.Request {
	t.Helper()
	if a := g.Admit(t.Context(), c); a.Allowed || a.ApprovalID == "" {
		t.Fatalf("first send: %+v, want pending", a)
	}
	r := waitPending(t, db, 1)[0]
	for _, p := range by {
		if _, err := g.Review(t.Context(), r.ID, p, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustStored(t, db, r.ID); got.State != approval.StateApproved {
		t.Fatalf("after the reviews: %s, want approved", got.State)
	}
	return r
}

// mustRun checks that a ran the call through approval id, and finishes it.
func mustRun(t *testing.T, a Admission, id approval.ID) {
	t.Helper()
	if !a.Allowed || a.ApprovalID != id {
		t.Fatalf("admission %+v, want the call run through %s", a, id)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
}

// A policy revision under which the matching approve rules name approver
// lists with no one in common leaves no approver eligible: a fresh call is
// refused at once (hold), and so is a re-send, before its approval is
// looked up. A call held across that revision is not: an approval made
// elsewhere then consumed it with the decision's Approvers nil, which the
// count read as "anyone", and the call ran.
func TestNoEligibleApproverAtConsumeInvalidates(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Minute, &Options{Instance: "a", Reviewers: opsRoster})
		f.pol.p.Store(quorumPolicy(1, policy.ModeHold, "group:ops"))
		ch := admitAsync(t.Context(), f.gate, writeCall("/disjoint"))
		r := waitPending(t, db, 1)[0]

		p := quorumPolicy(1, policy.ModeHold, "group:ops")
		p.Rules = append(p.Rules, policy.Rule{Name: "finance writes", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Approve,
			Approval: &policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, Approvers: []string{"group:finance"}, ValidFor: 10 * time.Minute}})
		f.pol.p.Store(p)
		if a := f.gate.Admit(t.Context(), writeCall("/fresh")); a.Allowed || !strings.Contains(a.Message, "no approver is eligible") {
			t.Fatalf("a fresh call under the new policy: %+v, want refused, no approver eligible", a)
		}
		reviewBehind(t, db, r.ID, aliceOps)
		mustInvalidated(t, db, recv(t, ch), r.ID, `policy now leaves no approver eligible to review the call (rule "writes": its approvers lists have no one in common)`)
	})
}

// An approval counts for the call that runs: the agent's on_behalf_of
// moved (a restart of the other instance with another config) to the very
// approver who approved its call, who may not review a call made for him.
// The re-send on that instance must not run on bob's approval alone. The
// same without a roster (approvals.allow_no_approvers).
func TestApprovalByWhomTheCallerNowActsForInvalidates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		roster []Reviewer
	}{{"roster", opsRoster}, {"no roster", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, db *sqlstore.DB) {
				t.Helper()
				f := newFixtureOn(t, db, time.Minute, &Options{Instance: "a", Reviewers: tc.roster})
				f.pol.p.Store(quorumPolicy(1, policy.ModeRetry, "group:ops"))
				b := New(db, f.pol, &Options{Instance: "b", Reviewers: tc.roster})
				c := writeCall("/acts-for")
				c.Principal.OnBehalfOf = "carol"
				r := approveRetry(t, f.gate, db, c, bobOps)
				moved := c
				moved.Principal.OnBehalfOf = "bob"
				mustInvalidated(t, db, b.Admit(t.Context(), moved), r.ID,
					`policy now requires 1 approval from group:ops (rule "writes"); 0 of its approvals qualify`)
			})
		})
	}
}

// The same for the agent's tenant: bob reviews tenant acme only; the
// agent moved to tenant globex (the other instance's config), where bob
// could not review a fresh call. His approval does not run it there.
func TestApprovalOfTheTenantTheCallerLeftInvalidates(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		roster := []Reviewer{{ID: "bob", Groups: []string{"ops"}, Tenant: "acme"}, {ID: "gina", Groups: []string{"ops"}, Tenant: "globex"}}
		f := newFixtureOn(t, db, time.Minute, &Options{Instance: "a", Reviewers: roster})
		f.pol.p.Store(quorumPolicy(1, policy.ModeRetry, "group:ops"))
		b := New(db, f.pol, &Options{Instance: "b", Reviewers: roster})
		c := writeCall("/tenant")
		c.Principal.Tenant, c.Principal.OnBehalfOf = "acme", "carol"
		r := approveRetry(t, f.gate, db, c, approval.Principal{ID: "bob", Kind: "human", Groups: []string{"ops"}, Tenant: "acme"})
		moved := c
		moved.Principal.Tenant = "globex"
		mustInvalidated(t, db, b.Admit(t.Context(), moved), r.ID,
			`policy now requires 1 approval from group:ops (rule "writes"); 0 of its approvals qualify`)
	})
}

// A session call approved under a rule (group:ops) whose rule now allows
// it, while its session still requires approval: a fresh call is held for
// the session approval (the policy's default, from group:security). The
// ops approval does not stand in for it: the count applied the session
// approval only to requests made under it (r.Rule), so the call ran.
func TestRuleNowAllowingLeavesTheSessionApproval(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		sessAp := policy.Approval{Timeout: time.Minute, Mode: policy.ModeRetry, Approvals: 1, Approvers: []string{"group:security"}, ValidFor: 10 * time.Minute}
		roster := []Reviewer{{ID: "alice", Groups: []string{"ops"}}, {ID: "sam", Groups: []string{"security"}}}
		pol := &swappable{}
		pol.p.Store(quorumPolicy(1, policy.ModeRetry, "group:ops"))
		g := New(db, pol, &Options{ServerExists: knownServers, RetryWait: time.Nanosecond, Reviewers: roster, SessionApproval: sessAp})
		_, p := mustSession(t, g, host, session.NewSession{
			Tools:           []string{"fs"},
			RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}},
		})
		c := writeCall("/session")
		c.Principal = p
		a := g.Admit(t.Context(), c)
		if a.Allowed || a.ApprovalID == "" {
			t.Fatalf("first send: %+v, want held", a)
		}
		if r := mustStored(t, db, a.ApprovalID); r.Rule != "writes" {
			t.Fatalf("held under %q, want the rule writes", r.Rule)
		}
		if _, err := g.Review(t.Context(), a.ApprovalID, aliceOps, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		allow := quorumPolicy(1, policy.ModeRetry)
		allow.Rules[len(allow.Rules)-1].Effect, allow.Rules[len(allow.Rules)-1].Approval = policy.Allow, nil
		pol.p.Store(allow)
		mustInvalidated(t, db, g.Admit(t.Context(), c), a.ApprovalID,
			`policy now requires 1 approval from group:security (rule "`+SessionRule+`"); 0 of its approvals qualify`)
	})
}

// The opposite failure: without a roster (approvals.allow_no_approvers)
// an approval by group qualified only when the decision's approvers were
// the very list it was reviewed under, in the same order. Two approve
// rules reordered in the file (same quorum, same people) list the
// combined approvers in the other order, and the approval was invalidated.
// A list that only adds entries keeps them too; one that drops the
// reviewer's group does not (the control).
func TestReorderedApproversKeepTheApprovalWithoutARoster(t *testing.T) {
	rule := func(name string, approvers ...string) policy.Rule {
		return policy.Rule{Name: name, Server: "fs", Tools: []string{"write_file"}, Effect: policy.Approve,
			Approval: &policy.Approval{Timeout: time.Minute, Mode: policy.ModeRetry, Approvals: 1, Approvers: approvers, ValidFor: 10 * time.Minute}}
	}
	withRules := func(rules ...policy.Rule) *policy.Policy {
		p := testPolicy(time.Minute)
		p.Rules = append(p.Rules, rules...)
		return p
	}
	first := withRules(rule("ops or sre", "group:ops", "group:sre"), rule("sre or ops", "group:sre", "group:ops", "group:dba"))
	for _, tc := range []struct {
		name string
		now  *policy.Policy
		runs bool
	}{
		{"reordered", withRules(rule("sre or ops", "group:sre", "group:ops", "group:dba"), rule("ops or sre", "group:ops", "group:sre")), true},
		{"widened", withRules(rule("wider", "group:dba", "group:sre", "group:ops")), true},
		{"narrowed", withRules(rule("sre only", "group:sre")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, db *sqlstore.DB) {
				t.Helper()
				f := newFixtureOn(t, db, time.Minute, &Options{Instance: "a"})
				f.pol.p.Store(first)
				b := New(db, f.pol, &Options{Instance: "b"})
				c := writeCall("/" + tc.name)
				r := approveRetry(t, f.gate, db, c, aliceOps)
				if got := strings.Join(r.Approvers, ","); got != "group:ops,group:sre" {
					t.Fatalf("reviewed under %s", got)
				}
				f.pol.p.Store(tc.now)
				a := b.Admit(t.Context(), c)
				if tc.runs {
					mustRun(t, a, r.ID)
					return
				}
				if a.Allowed {
					a.Finish(t.Context(), approval.OutcomeOK)
					t.Fatalf("admission %+v, want the approval invalidated", a)
				}
			})
		})
	}
}

// An approver who may also create sessions (role admin, or host and
// approver) makes a root session, calls through its token (the requester
// is session:<id>, acting for whomever the creator named) and approves
// the call: the review admitted it, the creator being neither the session
// principal nor the person it acts for, and the call ran. The review, with
// or without grant terms, now refuses it as self-review (a child
// session's call too); an approval recorded without that check (an
// instance of an earlier release) does not count at the consume, which
// reads the chain. Control: another approver's approval runs the call.
func TestSessionCreatorsOwnApprovalDoesNotQualify(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		roster := []Reviewer{{ID: "adam"}, {ID: "alice"}}
		f := newFixtureOn(t, db, time.Minute, &Options{Reviewers: roster, ServerExists: knownServers, RetryWait: time.Nanosecond})
		f.pol.p.Store(quorumPolicy(1, policy.ModeRetry))
		adam := approval.Principal{ID: "adam", Kind: "human"}
		_, p := mustSession(t, f.gate, adam, session.NewSession{Tools: []string{"fs"}, OnBehalfOf: "carol"})
		_, child := mustSession(t, f.gate, p, session.NewSession{})
		for i, who := range []approval.Principal{p, child} {
			c := writeCall(fmt.Sprintf("/own-session-%d", i))
			c.Principal = who
			if a := f.gate.Admit(t.Context(), c); a.Allowed || a.ApprovalID == "" {
				t.Fatalf("first send: %+v, want pending", a)
			}
			r := waitPending(t, db, 1)[0]
			if _, err := f.gate.Review(t.Context(), r.ID, approval.Principal{ID: "ADAM", Kind: "human"}, approval.VerdictApprove, "mine", ""); !errors.Is(err, approval.ErrSelfReview) {
				t.Fatalf("the creator's review of %s's call: %v, want self-review", who.ID, err)
			}
			if _, _, err := f.gate.ApproveWithGrant(t.Context(), r.ID, adam, "mine", "", approval.GrantTerms{TTL: time.Minute}); !errors.Is(err, approval.ErrSelfReview) {
				t.Fatalf("the creator's review with grant terms: %v, want self-review", err)
			}
			reviewBehind(t, db, r.ID, adam) // as an instance without the check
			mustInvalidated(t, db, f.gate.Admit(t.Context(), c), r.ID, `policy now requires 1 approval from any approver (rule "writes"); 0 of its approvals qualify`)

			ok := approveRetry(t, f.gate, db, c, alice)
			mustRun(t, f.gate.Admit(t.Context(), c), ok.ID)
		}
	})
}
