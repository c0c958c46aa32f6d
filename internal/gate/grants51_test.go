package gate

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// writesPolicy is retryPolicy with an approve rule on fs.write_file
// (grants allowed) and, with big, a second one for the path /tmp/big that
// says grants: false (as "two people approve every refund over 100").
func writesPolicy(big bool) *policy.Policy {
	p := retryPolicy(time.Hour)
	p.Rules = append(p.Rules, policy.Rule{Name: "writes", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Approve})
	if big {
		no := false
		p.Rules = append(p.Rules, policy.Rule{Name: "big writes", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Approve,
			When: `args.path == "/tmp/big"`, Approval: &policy.Approval{Grants: &no}})
	}
	return p
}

// refusedWithNothingRecorded checks that an approve with grant terms of id
// is refused with grant.ErrForbidden and leaves the request pending with
// no review and the store with wantGrants grants.
func refusedWithNothingRecorded(t *testing.T, g *Gate, db *sqlstore.DB, id approval.ID, wantGrants int) {
	t.Helper()
	_, made, err := g.ApproveWithGrant(t.Context(), id, bobApprover, "ok", "", approval.GrantTerms{TTL: time.Hour})
	if !errors.Is(err, grant.ErrForbidden) || made != nil {
		t.Fatalf("ApproveWithGrant = %v, %v; want grant.ErrForbidden", made, err)
	}
	if r, err := db.GetRequest(t.Context(), id); err != nil || r.State != approval.StatePending || len(r.Reviews) != 0 {
		t.Fatalf("after the refused approve: %s with %d reviews (%v), want pending with none", r.State, len(r.Reviews), err)
	}
	if gs, _, err := db.ListGrants(t.Context(), store.GrantFilter{Limit: 100}); err != nil || len(gs) != wantGrants {
		t.Fatalf("grants after the refused approve: %d (%v), want %d", len(gs), err, wantGrants)
	}
}

// TestGrantTermsRefusedWhenThePolicyNowForbidsThem (grants51): a call held
// while the policy allowed grants, then the policy (a reload: a
// policy.Holder, with revisions) says grants: false for such calls. An
// approve with grant terms is refused (grant.ErrForbidden, nothing
// recorded), though the request's NoGrants, fixed when it was held, is
// false; a plain approve works. The arguments are not kept, so the
// argument-dependent rule counts for every held call of the tool that the
// older revision held; a call held under the revision in force keeps the
// decision made with its arguments (a small write takes grant terms). On
// a2628f8c the first approve made the grant. SQLite file and Postgres.
func TestGrantTermsRefusedWhenThePolicyNowForbidsThem(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		h := policy.NewHolder(writesPolicy(false))
		g := New(db, h, &Options{RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour})
		watch(t, db, g)
		big := g.Admit(t.Context(), writeArgs("/tmp/big"))
		small := g.Admit(t.Context(), writeArgs("/tmp/small"))
		for _, a := range []Admission{big, small} {
			if a.Allowed || a.ApprovalID == "" {
				t.Fatalf("before the change: %+v, want approval required", a)
			}
			if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || r.NoGrants {
				t.Fatalf("held while grants were allowed: NoGrants = %v (%v), want false", r.NoGrants, err)
			}
		}

		h.Store(writesPolicy(true))
		refusedWithNothingRecorded(t, g, db, big.ApprovalID, 0)
		refusedWithNothingRecorded(t, g, db, small.ApprovalID, 0) // held under the old revision: fails closed

		// Held under the revision in force: the decision made with its
		// arguments stands (the rule forbidding grants did not match).
		now := g.Admit(t.Context(), writeArgs("/tmp/small2"))
		if now.Allowed || now.ApprovalID == "" {
			t.Fatalf("after the change: %+v, want approval required", now)
		}
		r, made, err := g.ApproveWithGrant(t.Context(), now.ApprovalID, bobApprover, "ok", "", approval.GrantTerms{TTL: time.Hour, When: `args.path != "/tmp/big"`})
		if err != nil || made == nil || r.State != approval.StateApproved {
			t.Fatalf("grant terms on a call held under the policy in force = %s, %v, %v; want approved with a grant", r.State, made, err)
		}
		if _, err := g.Review(t.Context(), big.ApprovalID, bobApprover, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatalf("plain approve: %v", err)
		}
	})
}

// TestGrantTermsRefusedWhenTheDefaultNowForbidsThem (grants51): a call held
// by the default (an approve) before the policy's approval said grants:
// false takes no grant terms after.
func TestGrantTermsRefusedWhenTheDefaultNowForbidsThem(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		h := policy.NewHolder(retryPolicy(time.Hour))
		g := New(db, h, &Options{RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour})
		watch(t, db, g)
		a := g.Admit(t.Context(), writeArgs("/tmp/a"))
		if a.Allowed || a.ApprovalID == "" {
			t.Fatalf("%+v, want approval required", a)
		}
		no := false
		p := retryPolicy(time.Hour)
		p.Approval.Grants = &no
		h.Store(p)
		refusedWithNothingRecorded(t, g, db, a.ApprovalID, 0)
	})
}

// TestGrantsDisabledFollowsTheFunc (grants51): Options.GrantsDisabledFunc
// (serve's, following grants.enabled across a config reload) is read on
// every use: turned off, a grant made before admits nothing, an approve
// with grant terms is refused and a new hold records NoGrants; turned on
// again, the grant admits calls again.
func TestGrantsDisabledFollowsTheFunc(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		var off atomic.Bool
		f := newFixtureOn(t, db, time.Hour, &Options{RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour, GrantsDisabledFunc: off.Load})
		f.pol.p.Store(retryPolicy(time.Hour))
		gr := grantVia(t, f, writeArgs("/tmp/a"), alice, approval.GrantTerms{TTL: time.Hour, When: `args.path != "/tmp/held"`})
		pending := f.gate.Admit(t.Context(), writeArgs("/tmp/held")) // held while grants are on
		if pending.Allowed || pending.ApprovalID == "" {
			t.Fatalf("%+v: want approval required (the grant excludes it)", pending)
		}

		off.Store(true)
		a := f.gate.Admit(t.Context(), writeArgs("/tmp/b"))
		if a.Allowed || a.ApprovalID == "" || a.Grant != "" {
			t.Fatalf("grants turned off: %+v, want approval required", a)
		}
		if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || !r.NoGrants {
			t.Fatalf("held with grants turned off: NoGrants = %v (%v), want true", r.NoGrants, err)
		}
		refusedWithNothingRecorded(t, f.gate, db, pending.ApprovalID, 1)

		off.Store(false)
		if a := f.gate.Admit(t.Context(), writeArgs("/tmp/c")); !a.Allowed || a.Grant != gr.ID {
			t.Errorf("grants turned on again: %+v, want allowed by grant %s", a, gr.ID)
		}
	})
}

// TestSessionHoldTakesNoGrantTermsOnceTheApprovalForbidsThem (grants51): a
// call a session's require_approval held while the session approval (the
// policy's approval) allowed grants takes no grant terms once it says
// grants: false, though the policy's revision did not move (the session
// approval comes from Options.SessionApprovalFunc).
func TestSessionHoldTakesNoGrantTermsOnceTheApprovalForbidsThem(t *testing.T) {
	clk := newClock()
	holder := policy.NewHolder(allowAll())
	db := newFixture(t, time.Minute, nil).db
	var sessAp atomic.Pointer[policy.Approval]
	ap := allowAll().Approval
	ap.Mode = policy.ModeRetry
	sessAp.Store(&ap)
	g := New(db, holder, &Options{Now: clk.now, ServerExists: knownServers, RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour,
		SessionApprovalFunc: func() policy.Approval { return *sessAp.Load() }})
	_, p := mustSession(t, g, host, session.NewSession{
		Tools:           []string{"fs"},
		RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}},
	})
	a := g.Admit(t.Context(), sessionCall(p, "fs", "write_file"))
	if a.Allowed || a.ApprovalID == "" {
		t.Fatalf("session call: %+v, want approval required", a)
	}
	if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || r.NoGrants || r.Rule != SessionRule {
		t.Fatalf("held: NoGrants %v, rule %q (%v); want false, %q", r.NoGrants, r.Rule, err, SessionRule)
	}
	no := false
	off := ap
	off.Grants = &no
	sessAp.Store(&off)
	refusedWithNothingRecorded(t, g, db, a.ApprovalID, 0)
}
