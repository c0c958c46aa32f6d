package gate

import (
	"errors"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
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
