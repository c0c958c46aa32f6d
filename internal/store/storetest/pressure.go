package storetest

// Conformance tests of what keeps its promises under pressure (issue 9):
// caps counted inside the creating transaction, revocation serialized with
// creation and consume, batched lease renewal, the change feed and
// retention.

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// pressureTests are run by Run too.
var pressureTests = []struct {
	name string
	fn   func(*testing.T, store.Store)
}{
	{"CapsHoldUnderConcurrency", testCapsHoldUnderConcurrency},
	{"CapScopes", testCapScopes},
	{"CreateRefusedInRevokedSession", testCreateRefusedInRevokedSession},
	{"PolicyRequestNeedsBaseRevision", testPolicyRequestNeedsBaseRevision},
	{"UpdateRequestWithChain", testUpdateRequestWithChain},
	{"ConsumeRacingRevocation", testConsumeRacingRevocation},
	{"RenewLeases", testRenewLeases},
	{"Feed", testFeed},
	{"Prune", testPrune},
}

// testCapsHoldUnderConcurrency creates 100 requests of one principal at
// once under a cap of 8: exactly 8 are stored, and the other 92 get a
// CapError naming the cap (issue 9, defect 3: check-then-insert left
// 83–100 pending).
func testCapsHoldUnderConcurrency(t *testing.T, s store.Store) {
	const n, limit = 100, 8
	caps := []store.Cap{
		{Scope: store.CapPrincipal, Key: "desktop", Limit: limit, Name: "approvals.max_pending_per_principal"},
		{Scope: store.CapTotal, Limit: 1000, Name: "approvals.max_pending"},
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		refused int
	)
	for i := range n {
		wg.Go(func() {
			err := s.CreateRequest(t.Context(), pending(id(3, i)), caps...)
			mu.Lock()
			defer mu.Unlock()
			var ce *store.CapError
			switch {
			case err == nil:
				created++
			case errors.As(err, &ce) && errors.Is(err, store.ErrCapReached):
				refused++
				if ce.Cap.Name != "approvals.max_pending_per_principal" || ce.Pending != limit {
					t.Errorf("CapError = %+v, want the per-principal cap with %d pending", ce, limit)
				}
			default:
				t.Errorf("CreateRequest = %v, want nil or a CapError", err)
			}
		})
	}
	wg.Wait()
	if created != limit || refused != n-limit {
		t.Errorf("%d created, %d refused; want %d and %d", created, refused, limit, n-limit)
	}
	if got, err := s.CountPending(t.Context(), "desktop"); err != nil || got != limit {
		t.Errorf("CountPending = %d, %v; want %d", got, err, limit)
	}
	// A decision frees a place.
	rs, _, err := s.ListRequests(t.Context(), store.Filter{State: approval.StatePending, Limit: 1})
	if err != nil || len(rs) != 1 {
		t.Fatalf("ListRequests = %v, %v", rs, err)
	}
	mustUpdate(t, s, rs[0].ID, "x", func(r *approval.Request) error { return r.Cancel(t0) })
	if err := s.CreateRequest(t.Context(), pending(id(4, 1)), caps...); err != nil {
		t.Errorf("CreateRequest after a cancel = %v, want it stored", err)
	}
}

// testCapScopes checks what each scope counts.
func testCapScopes(t *testing.T, s store.Store) {
	ctx := t.Context()
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	child := childSession(2, root.ID, session.ModeInherited, nil)
	mustCreateSession(t, s, child, root.Principal)

	n := 0
	create := func(r approval.Request, caps ...store.Cap) error {
		n++
		r.ID = id(5, n)
		return s.CreateRequest(ctx, r, caps...)
	}
	by := func(p string) approval.Request { r := pending(""); r.RequestedBy = p; return r }
	refusedBy := func(err error, name string) bool {
		var ce *store.CapError
		return errors.As(err, &ce) && ce.Cap.Name == name
	}

	// Session tree: the root's and the child's requests count together.
	tree := store.Cap{Scope: store.CapSessionTree, Key: string(root.ID), Limit: 2, Name: "tree"}
	if err := create(by(root.Principal), tree); err != nil {
		t.Fatal(err)
	}
	if err := create(by(child.Principal), tree); err != nil {
		t.Fatal(err)
	}
	if err := create(by(child.Principal), tree); !refusedBy(err, "tree") {
		t.Errorf("third request in a tree capped at 2 = %v, want refused by the tree cap", err)
	}
	// Total: every pending tool call counts, policy requests do not.
	total := store.Cap{Scope: store.CapTotal, Limit: 3, Name: "total"}
	if err := create(by("desktop"), total); err != nil {
		t.Fatal(err)
	}
	if err := create(by("laptop"), total); !refusedBy(err, "total") {
		t.Errorf("fourth pending request under a total of 3 = %v, want refused by the total cap", err)
	}
	// Policy requests of one session: unexpired pending ones count.
	pr := store.Cap{Scope: store.CapPolicyRequests, Key: string(root.ID), Limit: 1, Name: "policy"}
	policyReq := func(expires time.Time) approval.Request {
		r := by(root.Principal)
		r.Kind, r.Target, r.BaseRevision, r.ExpiresAt = approval.KindSessionPolicy, string(root.ID), 1, expires
		return r
	}
	if err := create(policyReq(t0.Add(-time.Second)), pr); err != nil { // already overdue: does not count
		t.Fatal(err)
	}
	if err := create(policyReq(t0.Add(time.Minute)), pr); err != nil {
		t.Fatalf("first live policy request = %v", err)
	}
	if err := create(policyReq(t0.Add(time.Minute)), pr); !refusedBy(err, "policy") {
		t.Errorf("second live policy request under a cap of 1 = %v, want refused", err)
	}
	// A cap with no room at all is a programming error, not a refusal.
	if err := create(by("desktop"), store.Cap{Scope: store.CapPrincipal, Key: "desktop", Name: "zero"}); err == nil || errors.Is(err, store.ErrCapReached) {
		t.Errorf("cap with limit 0 = %v, want an error that is not ErrCapReached", err)
	}
}

// testCreateRefusedInRevokedSession checks that no request of a revoked
// session (or of one below a revoked session) can be created.
func testCreateRefusedInRevokedSession(t *testing.T, s store.Store) {
	ctx := t.Context()
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	child := childSession(2, root.ID, session.ModeInherited, nil)
	mustCreateSession(t, s, child, root.Principal)
	if _, err := s.RevokeSession(ctx, root.ID, "host-app", t0); err != nil {
		t.Fatal(err)
	}
	r := pending(id(1, 1))
	r.RequestedBy = child.Principal
	if err := s.CreateRequest(ctx, r); !errors.Is(err, session.ErrRevoked) {
		t.Errorf("CreateRequest by a session under a revoked root = %v, want session.ErrRevoked", err)
	}
	if _, err := s.GetRequest(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRequest after the refusal = %v, want ErrNotFound", err)
	}
}

// testPolicyRequestNeedsBaseRevision checks that a session_policy request
// is stored only while its target is at its base revision.
func testPolicyRequestNeedsBaseRevision(t *testing.T, s store.Store) {
	ctx := t.Context()
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	r := pending(id(1, 1))
	r.RequestedBy, r.Kind, r.Target, r.BaseRevision = root.Principal, approval.KindSessionPolicy, string(root.ID), 1
	if _, _, err := s.UpdateSession(ctx, root.ID, "host-app", t0, func(ss *session.Session) error {
		ss.Tools = []string{"fs"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRequest(ctx, r); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateRequest against revision 1 of a session at 2 = %v, want ErrConflict", err)
	}
	r.BaseRevision = 2
	if err := s.CreateRequest(ctx, r); err != nil {
		t.Errorf("CreateRequest against the current revision = %v", err)
	}
	r.ID, r.Target = id(1, 2), string(sid(404))
	if err := s.CreateRequest(ctx, r); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CreateRequest for an unknown session = %v, want ErrNotFound", err)
	}
}

// testUpdateRequestWithChain checks that fn gets the requesting session's
// chain (nil for a principal that is no session) as committed.
func testUpdateRequestWithChain(t *testing.T, s store.Store) {
	ctx := t.Context()
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	child := childSession(2, root.ID, session.ModeInherited, nil)
	mustCreateSession(t, s, child, root.Principal)
	mine := pending(id(1, 1))
	mine.RequestedBy = child.Principal
	mustCreate(t, s, mine)
	plain := pending(id(1, 2))
	mustCreate(t, s, plain)

	var got session.Chain
	if _, err := s.UpdateRequestWithChain(ctx, mine.ID, "x", func(_ *approval.Request, c session.Chain) error {
		got = c
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != child.ID || got[1].ID != root.ID || got.Revoked() {
		t.Errorf("chain = %v, want [child root], live", got)
	}
	if _, err := s.UpdateRequestWithChain(ctx, plain.ID, "x", func(_ *approval.Request, c session.Chain) error {
		got = c
		return nil
	}); err != nil || got != nil {
		t.Errorf("chain of a plain principal's request = %v, %v; want nil", got, err)
	}
}

// testConsumeRacingRevocation approves a session's request and then
// consumes it while the session is revoked concurrently, many times: the
// consume either commits first (the revocation then leaves the request
// consumed) or sees the session revoked and invalidates. Never both
// "consumed" and a revocation that reported it invalidated, and never a
// consume that saw a live session after the revocation committed.
func testConsumeRacingRevocation(t *testing.T, s store.Store) {
	ctx := t.Context()
	const rounds = 30
	consumed, invalidated := 0, 0
	for i := range rounds {
		root := rootSession(100 + i)
		mustCreateSession(t, s, root, "host-app")
		r := pending(id(9, i))
		r.RequestedBy = root.Principal
		mustCreate(t, s, r)
		mustReview(t, s, r.ID, "alice", approval.VerdictApprove, t0.Add(time.Second))

		var (
			wg      sync.WaitGroup
			rev     store.Revocation
			revErr  error
			got     approval.Request
			consErr error
		)
		wg.Go(func() { rev, revErr = s.RevokeSession(ctx, root.ID, "host-app", t0.Add(time.Minute)) })
		wg.Go(func() {
			got, consErr = s.UpdateRequestWithChain(ctx, r.ID, "gw", func(x *approval.Request, c session.Chain) error {
				deny := ""
				if c.Revoked() {
					deny = "session revoked"
				}
				return x.Consume(x.Binding(), deny, t0.Add(time.Minute))
			})
		})
		wg.Wait()
		if revErr != nil {
			t.Fatalf("round %d: RevokeSession = %v", i, revErr)
		}
		switch {
		case consErr == nil && got.State == approval.StateConsumed:
			consumed++
			if slices.Contains(rev.Invalidated, r.ID) {
				t.Errorf("round %d: consumed, yet the revocation reports it invalidated", i)
			}
		case consErr == nil && got.State == approval.StateInvalidated:
			invalidated++
		case errors.Is(consErr, approval.ErrNotApproved):
			invalidated++ // the revocation invalidated it first
			if !slices.Contains(rev.Invalidated, r.ID) {
				t.Errorf("round %d: consume found it not approved, but the revocation did not invalidate it", i)
			}
		default:
			t.Fatalf("round %d: consume = %+v, %v", i, got, consErr)
		}
		if final := mustGet(t, s, r.ID); final.State == approval.StateApproved {
			t.Errorf("round %d: request left approved after a revocation", i)
		}
	}
	t.Logf("%d rounds: %d consumed before the revocation, %d voided by it", rounds, consumed, invalidated)
}

// testRenewLeases checks that RenewLeases extends only the leases the
// holder still holds on requests that still need a holder.
func testRenewLeases(t *testing.T, s store.Store) {
	ctx := t.Context()
	until := t0.Add(time.Minute)
	later := t0.Add(time.Hour)
	held := func(n int, holder string) approval.Request {
		r := pending(id(2, n))
		r.Renew(holder, until)
		mustCreate(t, s, r)
		return r
	}
	a := held(1, "gw-a")
	b := held(2, "gw-b") // another holder
	c := held(3, "gw-a") // settled below
	mustUpdate(t, s, c.ID, "x", func(r *approval.Request) error { return r.Cancel(t0) })
	d := held(4, "gw-a") // consumed, no outcome yet: the dispatch lease
	mustReview(t, s, d.ID, "alice", approval.VerdictApprove, t0.Add(time.Second))
	mustUpdate(t, s, d.ID, "gw-a", func(r *approval.Request) error { return r.Consume(r.Binding(), "", t0.Add(2*time.Second)) })
	// More than one statement's worth of ids, most unknown.
	ids := []approval.ID{a.ID, b.ID, c.ID, d.ID}
	for i := range 1200 {
		ids = append(ids, id(6, i))
	}
	events := len(allEvents(t, s))
	got, err := s.RenewLeases(ctx, "gw-a", ids, later)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]approval.ID{a.ID, d.ID}, got); diff != "" {
		t.Errorf("renewed (-want +got):\n%s", diff)
	}
	for _, x := range []struct {
		id   approval.ID
		want time.Time
	}{{a.ID, later}, {b.ID, until}, {c.ID, until}, {d.ID, later}} {
		if r := mustGet(t, s, x.id); !r.LeaseUntil.Equal(x.want) {
			t.Errorf("%s LeaseUntil = %v, want %v", x.id, r.LeaseUntil, x.want)
		}
	}
	if n := len(allEvents(t, s)); n != events {
		t.Errorf("RenewLeases wrote %d events, want none", n-events)
	}
}

// feedSettles is how long the feed tests wait for committed events to
// show in the feed. On Postgres an event shows once every transaction that
// was running when it committed has ended, anywhere in the cluster (other
// tests' databases included): usually at once, but not necessarily. A hang
// guard, not a timing assertion.
const feedSettles = 30 * time.Second

// feedUntil reads the feed from cur until it has returned n events (or
// feedSettles passed), limit at a time, and returns them with the cursor
// after the last.
func feedUntil(t *testing.T, s store.Store, cur store.Cursor, n, limit int) ([]approval.Event, store.Cursor) {
	t.Helper()
	var out []approval.Event
	deadline := time.Now().Add(feedSettles)
	for len(out) < n {
		evs, next, err := s.Feed(t.Context(), cur, limit)
		if err != nil {
			t.Fatal(err)
		}
		if limit > 0 && len(evs) > limit {
			t.Fatalf("Feed(limit %d) returned %d events", limit, len(evs))
		}
		switch {
		case len(evs) == 0 && next != cur:
			t.Fatalf("an empty page moved the cursor from %v to %v", cur, next)
		case len(evs) > 0 && !cur.Before(next):
			t.Fatalf("cursor went from %v to %v, want forward", cur, next)
		case len(evs) == 0 && time.Now().After(deadline):
			t.Fatalf("the feed returned %d events in %v, want %d", len(out), feedSettles, n)
		case len(evs) == 0:
			time.Sleep(time.Millisecond)
		}
		out = append(out, evs...)
		cur = next
	}
	return out, cur
}

// testFeed checks the change feed: FeedEnd, paging with the cursor, every
// event once and in commit order, nothing committed before the start.
func testFeed(t *testing.T, s store.Store) {
	ctx := t.Context()
	if c, err := s.FeedEnd(ctx); err != nil || c != (store.Cursor{}) {
		t.Fatalf("FeedEnd of an empty log = %v, %v; want the zero cursor", c, err)
	}
	mustCreate(t, s, pending(id(1, 1)))
	first, start := feedUntil(t, s, store.Cursor{}, 1, 0)
	if first[0].RequestID != id(1, 1) {
		t.Fatalf("first event %+v", first[0])
	}
	if end, err := s.FeedEnd(ctx); err != nil || end != start {
		t.Fatalf("FeedEnd = %v, %v; want %v, the cursor of the one event", end, err, start)
	}
	mustCreate(t, s, pending(id(1, 2)))
	mustReview(t, s, id(1, 2), "alice", approval.VerdictApprove, t0.Add(time.Second))
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	evs, cur := feedUntil(t, s, start, 4, 2)
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprint(ev.Type, " ", ev.RequestID, ev.SessionID))
	}
	want := []string{
		"requested " + string(id(1, 2)),
		"reviewed " + string(id(1, 2)),
		"approved " + string(id(1, 2)),
		"session_created " + string(root.ID),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("feed after the start (-want +got):\n%s", diff)
	}
	if more, next, err := s.Feed(ctx, cur, 0); err != nil || len(more) != 0 || next != cur {
		t.Errorf("Feed at the end = %v, %v, %v; want nothing and the same cursor", more, next, err)
	}
	c, err := store.ParseCursor(cur.String())
	if err != nil || c != cur {
		t.Errorf("ParseCursor(%q) = %v, %v; want %v", cur.String(), c, err, cur)
	}
	if end, err := s.FeedEnd(ctx); err != nil || end != cur {
		t.Errorf("FeedEnd = %v, %v; want %v, the last cursor read", end, err, cur)
	}
}

// testPrune checks retention: a prefix of the event log goes (stopping at
// an open request's event), old terminal requests whose events are gone
// go, open ones never, and revoked sessions go once their events are.
// Events of transitions are stamped with the store's clock (the real one),
// so the test prunes as of 100 days from now.
func testPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	day := 24 * time.Hour
	base := time.Now().UTC()
	at := func(d int) time.Time { return base.Add(time.Duration(d) * day) }
	mk := func(n, d int) approval.Request {
		r := pending(id(8, n))
		r.CreatedAt, r.ExpiresAt = at(d), at(d).Add(time.Minute)
		mustCreate(t, s, r)
		return r
	}
	old := mk(1, 0)
	mustUpdate(t, s, old.ID, "x", func(r *approval.Request) error { return r.Cancel(at(0)) })
	open := mk(2, 1) // still pending
	old2 := mk(3, 2)
	mustUpdate(t, s, old2.ID, "x", func(r *approval.Request) error { return r.Cancel(at(2)) })

	now := at(100)
	feedUntil(t, s, store.Cursor{}, 5, 0) // Prune only deletes what the feed shows
	if p, err := s.Prune(ctx, store.Retention{}, now); err != nil || p.Events+p.Requests+p.Sessions != 0 {
		t.Fatalf("Prune with no retention = %+v, %v; want nothing deleted", p, err)
	}
	r := store.Retention{Requests: 30 * day, Events: 30 * day, Sessions: 30 * day}
	p, err := s.Prune(ctx, r, now)
	if err != nil {
		t.Fatal(err)
	}
	// The "requested" and "cancelled" events of old go; the prefix stops
	// at the open request's "requested" event, so old2's stay, and so does
	// old2.
	if p.Events != 2 || p.Requests != 1 || p.Through == (store.Cursor{}) {
		t.Errorf("Prune = %+v; want 2 events and 1 request deleted, and where the pruned prefix ends", p)
	}
	if _, err := s.GetRequest(ctx, old.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old terminal request: %v, want deleted", err)
	}
	mustGet(t, s, open.ID)
	mustGet(t, s, old2.ID)
	evs, _, err := s.Feed(ctx, store.Cursor{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[0].RequestID != open.ID {
		t.Errorf("first kept event %+v, want the open request's", evs)
	}

	// Once the open request is settled, the rest of the old prefix goes,
	// and with it the settled requests and a session revoked long ago.
	mustUpdate(t, s, open.ID, "x", func(r *approval.Request) error { return r.Cancel(at(1)) })
	root := rootSession(1)
	root.CreatedAt = at(3)
	mustCreateSession(t, s, root, "host-app")
	if _, err := s.RevokeSession(ctx, root.ID, "host-app", at(3)); err != nil {
		t.Fatal(err)
	}
	recent := mk(4, 99) // young: it and its event stay
	feedUntil(t, s, store.Cursor{}, 7, 0)
	p2, err := s.Prune(ctx, r, now)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Requests != 2 || p2.Sessions != 1 {
		t.Errorf("second Prune = %+v; want the two settled requests and the revoked session deleted", p2)
	}
	if !p.Through.Before(p2.Through) {
		t.Errorf("pruned prefix moved from %v to %v, want forward", p.Through, p2.Through)
	}
	mustGet(t, s, recent.ID)
	left, _, err := s.Feed(ctx, store.Cursor{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].RequestID != recent.ID {
		t.Errorf("events left = %+v, want only the young request's", left)
	}
	if from, _, err := s.Feed(ctx, p2.Through, 1000); err != nil || len(from) != 1 {
		t.Errorf("Feed after the pruned prefix = %v, %v; want the one kept event", from, err)
	}
}
