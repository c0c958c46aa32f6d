package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/store"
)

// grantTests are the GrantStore conformance tests; Run runs them too.
var grantTests = []struct {
	name string
	fn   func(*testing.T, store.Store)
}{
	{"GrantCreatedWithApproval", testGrantCreatedWithApproval},
	{"GrantRollsBackWithApproval", testGrantRollsBackWithApproval},
	{"GrantUseCountedAtomically", testGrantUseCountedAtomically},
	{"GrantUseRefusedWhenSpent", testGrantUseRefusedWhenSpent},
	{"GrantRevokeOnce", testGrantRevokeOnce},
	{"GrantList", testGrantList},
}

// gid returns a UUIDv7-shaped grant id.
func gid(n int) string { return fmt.Sprintf("0190eeee-0000-7000-8000-%012x", n) }

// grantTerms are the terms the suite's grants are made with: one hour, at
// most maxUses uses, for small amounts.
func grantTerms(maxUses int64) approval.GrantTerms {
	return approval.GrantTerms{When: "args.amount <= 100", TTL: time.Hour + 1500*time.Microsecond, MaxUses: maxUses}
}

// approveGranting approves request i (pending, one approval needed) as
// alice with terms attached, through UpdateRequestGranting, and returns the
// request and the grant with id gid(n) that the store made.
func approveGranting(t *testing.T, s store.Store, i approval.ID, n int, terms approval.GrantTerms, at time.Time) (approval.Request, grant.Grant) {
	t.Helper()
	r, g, err := s.UpdateRequestGranting(t.Context(), i, "alice", func(r *approval.Request) (*grant.Grant, error) {
		if err := r.ApproveWithGrant(approval.Reviewer{ID: "alice", Groups: []string{"ops"}}, "fine for an hour", "", terms, at); err != nil {
			return nil, err
		}
		g, ok, err := grant.FromApproval(gid(n), *r)
		if err != nil || !ok {
			return nil, fmt.Errorf("FromApproval = %v, %w", ok, err)
		}
		return &g, nil
	})
	if err != nil {
		t.Fatalf("UpdateRequestGranting(%s) = %v", i, err)
	}
	if g == nil {
		t.Fatalf("UpdateRequestGranting(%s) made no grant", i)
	}
	return r, *g
}

// mustGrant creates a grant with id gid(n) and maxUses for a fresh pending
// request id(70, n), approved at t0+1m.
func mustGrant(t *testing.T, s store.Store, n int, maxUses int64) grant.Grant {
	t.Helper()
	i := id(70, n)
	mustCreate(t, s, pending(i))
	_, g := approveGranting(t, s, i, n, grantTerms(maxUses), t0.Add(time.Minute))
	return g
}

func use(at time.Time) grant.Use {
	return grant.Use{At: at, Principal: "desktop", Session: "", ArgumentsHash: "sha256:" + fmt.Sprintf("%064x", at.UnixMilli())}
}

func grantEvents(evs []approval.Event, gid string) []approval.Event {
	return slices.DeleteFunc(slices.Clone(evs), func(ev approval.Event) bool { return ev.GrantID != gid })
}

func testGrantCreatedWithApproval(t *testing.T, s store.Store) {
	ctx := t.Context()
	i := id(70, 1)
	mustCreate(t, s, pending(i))
	at := t0.Add(time.Minute + 250*time.Microsecond)
	r, g := approveGranting(t, s, i, 1, grantTerms(3), at)
	if r.State != approval.StateApproved || len(r.Reviews) != 1 || r.Reviews[0].Grant == nil {
		t.Fatalf("request after the review = %+v, want approved with the terms on its review", r)
	}
	// The terms round-trip on the review, to the millisecond.
	wantTerms := approval.GrantTerms{When: "args.amount <= 100", TTL: time.Hour + time.Millisecond, MaxUses: 3, ReviewerGroups: []string{"ops"}}
	if diff := cmp.Diff(&wantTerms, mustGet(t, s, i).Reviews[0].Grant); diff != "" {
		t.Errorf("stored review terms (-want +got):\n%s", diff)
	}
	want := grant.Grant{
		ID: gid(1), Principal: "desktop", OnBehalfOf: "carol", Tenant: "acme", Server: "pay", Tool: "transfer",
		When: "args.amount <= 100", CreatedAt: store.Millis(at), ExpiresAt: store.Millis(at.Add(time.Hour + 1500*time.Microsecond)),
		MaxUses: 3, CreatedBy: "alice", ApprovedBy: []grant.Approver{{ID: "alice", Groups: []string{"ops"}}}, Approvals: 1,
		Reason: "fine for an hour", SourceApproval: i, Rule: "payments need two",
	}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("grant returned (-want +got):\n%s", diff)
	}
	got, err := s.GetGrant(ctx, gid(1))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetGrant (-want +got):\n%s", diff)
	}
	if _, err := s.GetGrant(ctx, gid(99)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetGrant(unknown) = %v, want ErrNotFound", err)
	}
	evs := allEvents(t, s)
	if got := types(eventsOf(evs, i)); !slices.Equal(got, []approval.EventType{approval.EventRequested, approval.EventReviewed, approval.EventApproved}) {
		t.Errorf("request events = %v", got)
	}
	ge := grantEvents(evs, gid(1))
	if len(ge) != 1 || ge[0].Type != grant.EventCreated || ge[0].Actor != "alice" || !ge[0].At.Equal(store.Millis(at)) || ge[0].RequestID != "" || ge[0].State != "" {
		t.Errorf("grant events = %+v, want one grant_created by alice at %v", ge, at)
	}
}

func testGrantRollsBackWithApproval(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustGrant(t, s, 1, 0)
	// A second grant with the same id: the insert fails, and the review of
	// the second request is rolled back with it.
	i := id(70, 2)
	mustCreate(t, s, pending(i))
	before := len(allEvents(t, s))
	_, _, err := s.UpdateRequestGranting(ctx, i, "alice", func(r *approval.Request) (*grant.Grant, error) {
		if err := r.ApproveWithGrant(reviewer("alice"), "", "", grantTerms(0), t0.Add(time.Minute)); err != nil {
			return nil, err
		}
		g, _, err := grant.FromApproval(gid(1), *r)
		return &g, err
	})
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("a grant with a taken id = %v, want ErrAlreadyExists", err)
	}
	if r := mustGet(t, s, i); r.State != approval.StatePending || len(r.Reviews) != 0 {
		t.Errorf("request after the failed grant = %s with %d reviews, want pending with none", r.State, len(r.Reviews))
	}
	// fn's own error writes nothing either.
	boom := errors.New("boom")
	if _, _, err := s.UpdateRequestGranting(ctx, i, "alice", func(r *approval.Request) (*grant.Grant, error) {
		_ = r.ApproveWithGrant(reviewer("alice"), "", "", grantTerms(0), t0.Add(time.Minute))
		return nil, boom
	}); !errors.Is(err, boom) {
		t.Errorf("fn error = %v, want it returned as is", err)
	}
	if got := len(allEvents(t, s)); got != before {
		t.Errorf("events went from %d to %d after failed updates", before, got)
	}
	// No grant: a plain update.
	r, g, err := s.UpdateRequestGranting(ctx, i, "alice", func(r *approval.Request) (*grant.Grant, error) {
		return nil, r.Review(reviewer("alice"), approval.VerdictApprove, "", "", t0.Add(time.Minute))
	})
	if err != nil || g != nil || r.State != approval.StateApproved {
		t.Errorf("update without a grant = %s, %v, %v; want approved, nil, nil", r.State, g, err)
	}
	if _, err := s.GetGrant(ctx, gid(2)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetGrant after the rollbacks = %v, want ErrNotFound", err)
	}
}

func testGrantUseCountedAtomically(t *testing.T, s store.Store) {
	ctx := t.Context()
	const maxUses, callers = 5, 16
	g := mustGrant(t, s, 1, maxUses)
	var (
		wins atomic.Int32
		wg   sync.WaitGroup
	)
	for k := range callers {
		wg.Go(func() {
			_, err := s.UseGrant(ctx, g.ID, use(t0.Add(2*time.Minute+time.Duration(k)*time.Millisecond)))
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, grant.ErrSpent):
				t.Errorf("UseGrant = %v, want nil or ErrSpent", err)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != maxUses {
		t.Fatalf("%d concurrent uses succeeded, want exactly %d (max_uses)", n, maxUses)
	}
	got, err := s.GetGrant(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Uses != maxUses || got.State(t0.Add(3*time.Minute)) != grant.StateExhausted {
		t.Errorf("grant after the uses: uses %d, state %s; want %d, exhausted", got.Uses, got.State(t0.Add(3*time.Minute)), maxUses)
	}
	us, err := s.GrantUses(ctx, g.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ns []int64
	for _, u := range us {
		ns = append(ns, u.N)
		if u.GrantID != g.ID || u.Principal != "desktop" || u.ArgumentsHash == "" {
			t.Errorf("use %+v: want grant %s by desktop with a hash", u, g.ID)
		}
	}
	if !slices.Equal(ns, []int64{5, 4, 3, 2, 1}) {
		t.Errorf("use numbers newest first = %v, want 5..1", ns)
	}
	if evs := grantEvents(allEvents(t, s), g.ID); len(evs) != 1+maxUses || types(evs[1:])[0] != grant.EventUsed || evs[1].Actor != "desktop" {
		t.Errorf("grant events = %+v, want grant_created and %d grant_used by desktop", evs, maxUses)
	}
}

func testGrantUseRefusedWhenSpent(t *testing.T, s store.Store) {
	ctx := t.Context()
	expiring := mustGrant(t, s, 1, 0)
	if _, err := s.UseGrant(ctx, expiring.ID, use(expiring.ExpiresAt)); !errors.Is(err, grant.ErrSpent) {
		t.Errorf("use at the expiry = %v, want ErrSpent", err)
	}
	if g, err := s.UseGrant(ctx, expiring.ID, use(expiring.ExpiresAt.Add(-time.Millisecond))); err != nil || g.Uses != 1 {
		t.Errorf("use a millisecond before the expiry = %+v, %v; want 1 use", g, err)
	}
	revoked := mustGrant(t, s, 2, 0)
	if _, _, err := s.RevokeGrant(ctx, revoked.ID, "bob", "no longer needed", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UseGrant(ctx, revoked.ID, use(t0.Add(3*time.Minute))); !errors.Is(err, grant.ErrSpent) {
		t.Errorf("use after revocation = %v, want ErrSpent", err)
	}
	once := mustGrant(t, s, 3, 1)
	if _, err := s.UseGrant(ctx, once.ID, use(t0.Add(2*time.Minute))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UseGrant(ctx, once.ID, use(t0.Add(2*time.Minute))); !errors.Is(err, grant.ErrSpent) {
		t.Errorf("second use of a one-use grant = %v, want ErrSpent", err)
	}
	if _, err := s.UseGrant(ctx, gid(99), use(t0.Add(2*time.Minute))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("use of an unknown grant = %v, want ErrNotFound", err)
	}
	// Only the usable grant is offered for a call; none after its expiry.
	usable := mustGrant(t, s, 4, 0)
	gs, err := s.UsableGrants(ctx, "desktop", "pay", "transfer", t0.Add(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range gs {
		ids = append(ids, g.ID)
	}
	if want := []string{expiring.ID, usable.ID}; !slices.Equal(ids, want) {
		t.Errorf("UsableGrants = %v, want %v (not the revoked or used-up ones)", ids, want)
	}
	if gs, err := s.UsableGrants(ctx, "desktop", "pay", "transfer", usable.ExpiresAt); err != nil || len(gs) != 0 {
		t.Errorf("UsableGrants at the expiry = %d grants, %v; want none", len(gs), err)
	}
	for _, other := range [][3]string{{"laptop", "pay", "transfer"}, {"desktop", "pay", "refund"}, {"desktop", "fs", "transfer"}} {
		if gs, err := s.UsableGrants(ctx, other[0], other[1], other[2], t0.Add(3*time.Minute)); err != nil || len(gs) != 0 {
			t.Errorf("UsableGrants%v = %d grants, %v; want none", other, len(gs), err)
		}
	}
}

func testGrantRevokeOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	g := mustGrant(t, s, 1, 0)
	at := t0.Add(5*time.Minute + 700*time.Microsecond)
	got, changed, err := s.RevokeGrant(ctx, g.ID, "bob", "done", at)
	if err != nil || !changed {
		t.Fatalf("RevokeGrant = %v, changed %v", err, changed)
	}
	if !got.RevokedAt.Equal(store.Millis(at)) || got.RevokedBy != "bob" || got.RevokeReason != "done" || got.State(at) != grant.StateRevoked {
		t.Errorf("revoked grant = %+v", got)
	}
	again, changed, err := s.RevokeGrant(ctx, g.ID, "carol", "again", at.Add(time.Minute))
	if err != nil || changed {
		t.Fatalf("second RevokeGrant = %v, changed %v; want no change", err, changed)
	}
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("second revocation changed the grant (-first +second):\n%s", diff)
	}
	if evs := grantEvents(allEvents(t, s), g.ID); len(evs) != 2 || evs[1].Type != grant.EventRevoked || evs[1].Actor != "bob" {
		t.Errorf("grant events = %+v, want grant_created, then one grant_revoked by bob", evs)
	}
	if _, _, err := s.RevokeGrant(ctx, gid(99), "bob", "", at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeGrant(unknown) = %v, want ErrNotFound", err)
	}
}

func testGrantList(t *testing.T, s store.Store) {
	ctx := t.Context()
	var all []string
	for n := 1; n <= 5; n++ {
		all = append(all, mustGrant(t, s, n, 0).ID)
	}
	if _, _, err := s.RevokeGrant(ctx, all[1], "bob", "", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	ids := func(gs []grant.Grant) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	var paged []string
	cursor := ""
	for range 10 {
		gs, next, err := s.ListGrants(ctx, store.GrantFilter{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, ids(gs)...)
		if cursor = next; cursor == "" {
			break
		}
	}
	if !slices.Equal(paged, all) {
		t.Errorf("pages = %v, want %v", paged, all)
	}
	cases := []struct {
		name string
		f    store.GrantFilter
		want []string
	}{
		{"usable", store.GrantFilter{UsableAt: t0.Add(3 * time.Minute)}, []string{all[0], all[2], all[3], all[4]}},
		{"tenant", store.GrantFilter{Tenant: "acme"}, all},
		{"other tenant", store.GrantFilter{Tenant: "globex"}, nil},
		{"principal server tool", store.GrantFilter{Principal: "desktop", Server: "pay", Tool: "transfer"}, all},
		{"other tool", store.GrantFilter{Tool: "refund"}, nil},
		{"prefix", store.GrantFilter{IDPrefix: all[3]}, all[3:4]},
		{"suffix", store.GrantFilter{IDSuffix: all[2][len(all[2])-8:]}, all[2:3]},
		{"whole id as suffix", store.GrantFilter{IDSuffix: all[4]}, all[4:5]},
		{"suffix longer than an id", store.GrantFilter{IDSuffix: "0" + all[4]}, nil},
		{"suffix and usable", store.GrantFilter{IDSuffix: all[1][len(all[1])-8:], UsableAt: t0.Add(3 * time.Minute)}, nil},
		{"expired", store.GrantFilter{UsableAt: t0.Add(2 * time.Hour)}, nil},
	}
	for _, tc := range cases {
		gs, _, err := s.ListGrants(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ids(gs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ListGrants = %v, want %v", tc.name, got, tc.want)
		}
	}
}
