package gate

import (
	"errors"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// noGrantsPolicy is retryPolicy with two approve rules on fs.write_file:
// one that allows grants (inherits) and one that forbids them, so the
// combined decision forbids them (any matching rule that forbids grants
// forbids them).
func noGrantsPolicy() *policy.Policy {
	p := retryPolicy(time.Hour)
	no := false
	p.Rules = append(p.Rules,
		policy.Rule{Name: "writes", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Approve},
		policy.Rule{Name: "two people approve every write", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Approve,
			Approval: &policy.Approval{Grants: &no}})
	return p
}

// TestGrantsForbiddenByRule is newuser50's case: a grant with no predicate
// made while the policy allowed grants; then the policy says grants: false
// for the tool. The grant is inert for its calls (each needs its own
// approval, the grant is never used), and an approve with grant terms of
// such a call is refused (grant.ErrForbidden) with nothing recorded, while
// a plain approve works. SQLite file and Postgres.
func TestGrantsForbiddenByRule(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Hour, &Options{RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour})
		f.pol.p.Store(retryPolicy(time.Hour))
		g := grantVia(t, f, writeArgs("/tmp/a"), alice, approval.GrantTerms{TTL: time.Hour})
		if a := f.gate.Admit(t.Context(), writeArgs("/tmp/b")); !a.Allowed || a.Grant != g.ID {
			t.Fatalf("before the change: %+v, want allowed by grant %s", a, g.ID)
		}

		f.pol.p.Store(noGrantsPolicy())
		a := f.gate.Admit(t.Context(), writeArgs("/tmp/50000"))
		if a.Allowed || a.ApprovalID == "" || a.Grant != "" {
			t.Fatalf("after grants: false: %+v, want approval required", a)
		}
		if got := grantNow(t, f.db, g.ID); got.Uses != 1 {
			t.Errorf("grant uses = %d, want 1 (none after grants: false)", got.Uses)
		}
		r, err := f.db.GetRequest(t.Context(), a.ApprovalID)
		if err != nil || !r.NoGrants {
			t.Fatalf("stored request NoGrants = %v (%v), want true", r.NoGrants, err)
		}

		_, made, err := f.gate.ApproveWithGrant(t.Context(), a.ApprovalID, bobApprover, "ok", "", approval.GrantTerms{TTL: time.Hour})
		if !errors.Is(err, grant.ErrForbidden) || made != nil {
			t.Fatalf("ApproveWithGrant = %v, %v; want grant.ErrForbidden", made, err)
		}
		r, err = f.db.GetRequest(t.Context(), a.ApprovalID)
		if err != nil || r.State != approval.StatePending || len(r.Reviews) != 0 {
			t.Fatalf("after the refused approve: %s with %d reviews (%v), want pending with none", r.State, len(r.Reviews), err)
		}
		gs, _, err := f.db.ListGrants(t.Context(), store.GrantFilter{Limit: 100})
		if err != nil || len(gs) != 1 {
			t.Errorf("grants after the refused approve: %d (%v), want the 1 made before", len(gs), err)
		}
		if _, err := f.gate.Review(t.Context(), a.ApprovalID, bobApprover, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatalf("plain approve: %v", err)
		}
		// Back to a policy that allows grants: the old grant stands in again.
		f.pol.p.Store(retryPolicy(time.Hour))
		if a := f.gate.Admit(t.Context(), writeArgs("/tmp/c")); !a.Allowed || a.Grant != g.ID {
			t.Errorf("grants allowed again: %+v, want allowed by grant %s", a, g.ID)
		}
	})
}

// TestGrantsDisabledByConfig: Options.GrantsDisabled (config
// grants.enabled: false) makes a grant made before inert and refuses an
// approve with grant terms, recording nothing.
func TestGrantsDisabledByConfig(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Hour, &Options{RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour})
		f.pol.p.Store(retryPolicy(time.Hour))
		g := grantVia(t, f, writeArgs("/tmp/a"), alice, approval.GrantTerms{TTL: time.Hour})

		off := newFixtureOn(t, db, time.Hour, &Options{RetryWait: time.Nanosecond, GrantMaxTTL: 2 * time.Hour, GrantsDisabled: true})
		off.pol.p.Store(retryPolicy(time.Hour))
		a := off.gate.Admit(t.Context(), writeArgs("/tmp/b"))
		if a.Allowed || a.ApprovalID == "" || a.Grant != "" {
			t.Fatalf("grants disabled: %+v, want approval required", a)
		}
		if got := grantNow(t, db, g.ID); got.Uses != 0 {
			t.Errorf("grant uses = %d, want 0", got.Uses)
		}
		_, made, err := off.gate.ApproveWithGrant(t.Context(), a.ApprovalID, bobApprover, "ok", "", approval.GrantTerms{TTL: time.Hour})
		if !errors.Is(err, grant.ErrForbidden) || made != nil {
			t.Fatalf("ApproveWithGrant = %v, %v; want grant.ErrForbidden", made, err)
		}
		if r, err := db.GetRequest(t.Context(), a.ApprovalID); err != nil || r.State != approval.StatePending || len(r.Reviews) != 0 {
			t.Fatalf("after the refused approve: %s with %d reviews (%v), want pending with none", r.State, len(r.Reviews), err)
		}
	})
}
