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

// TestGrantsDisabledMarksTheRequest (review50b): a call held by an
// instance with grants turned off (Options.GrantsDisabled, config
// grants.enabled: false) records NoGrants, so the inbox does not offer
// "Approve and remember", the REST approval says grants_forbidden, and an
// approve with grant terms through another instance whose config still
// allows grants (a rollout of the config change) is refused with nothing
// recorded. On 0e8fe8d7 the request said nothing and the other instance
// made the grant.
func TestGrantsDisabledMarksTheRequest(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		off := newFixtureOn(t, db, time.Hour, &Options{RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour, GrantsDisabled: true})
		off.pol.p.Store(retryPolicy(time.Hour))
		a := off.gate.Admit(t.Context(), writeArgs("/tmp/b"))
		if a.Allowed || a.ApprovalID == "" {
			t.Fatalf("grants disabled: %+v, want approval required", a)
		}
		r, err := db.GetRequest(t.Context(), a.ApprovalID)
		if err != nil || !r.NoGrants {
			t.Fatalf("request held with grants disabled: NoGrants = %v (%v), want true", r.NoGrants, err)
		}

		on := newFixtureOn(t, db, time.Hour, &Options{RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour})
		on.pol.p.Store(retryPolicy(time.Hour))
		_, made, err := on.gate.ApproveWithGrant(t.Context(), a.ApprovalID, bobApprover, "ok", "", approval.GrantTerms{TTL: time.Hour})
		if !errors.Is(err, grant.ErrForbidden) || made != nil {
			t.Fatalf("ApproveWithGrant on an instance that allows grants = %v, %v; want grant.ErrForbidden", made, err)
		}
		if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || r.State != approval.StatePending || len(r.Reviews) != 0 {
			t.Fatalf("after the refused approve: %s with %d reviews (%v), want pending with none", r.State, len(r.Reviews), err)
		}
		if gs, _, err := db.ListGrants(t.Context(), store.GrantFilter{Limit: 100}); err != nil || len(gs) != 0 {
			t.Errorf("grants after the refused approve: %d (%v), want none", len(gs), err)
		}
	})
}

// TestSessionHoldTakesNoGrantWhenThePolicyForbidsThem (review50b): the
// approval a session's require_approval asks for is the policy's
// approval; once that says grants: false (a reload), a grant made before
// no longer stands in for it, and the request records NoGrants. No test
// covered the session path of grants: false.
func TestSessionHoldTakesNoGrantWhenThePolicyForbidsThem(t *testing.T) {
	clk := newClock()
	holder := policy.NewHolder(allowAll())
	db := newFixture(t, time.Minute, nil).db
	var sessAp atomic.Pointer[policy.Approval]
	ap := allowAll().Approval
	ap.Mode = policy.ModeRetry
	sessAp.Store(&ap)
	g := New(db, holder, &Options{Now: clk.now, ServerExists: knownServers, RetryWait: time.Nanosecond,
		SessionApprovalFunc: func() policy.Approval { return *sessAp.Load() }})
	f := &fixture{db: db, gate: g}
	_, p := mustSession(t, g, host, session.NewSession{
		Tools:           []string{"fs"},
		RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}},
	})
	c := sessionCall(p, "fs", "write_file")
	gr := grantVia(t, f, c, alice, approval.GrantTerms{TTL: time.Hour})
	c2 := c
	c2.Arguments = []byte(`{"path":"/b"}`)
	if a := g.Admit(t.Context(), c2); !a.Allowed || a.Grant != gr.ID {
		t.Fatalf("session call under the grant: %+v", a)
	}

	no := false
	off := ap
	off.Grants = &no
	sessAp.Store(&off)
	a := g.Admit(t.Context(), c2)
	if a.Allowed || a.Grant != "" || a.ApprovalID == "" {
		t.Fatalf("session call with the policy's grants: false: %+v, want approval required", a)
	}
	if got := grantNow(t, db, gr.ID); got.Uses != 1 {
		t.Errorf("grant uses = %d, want 1 (none after grants: false)", got.Uses)
	}
	if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || !r.NoGrants {
		t.Errorf("session-held request NoGrants = %v (%v), want true", r.NoGrants, err)
	}
}
