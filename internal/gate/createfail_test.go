package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// committedButFailed is the real store, except that, while armed, a
// request's creation commits and then reports a failure, as a lost
// commit acknowledgement or a deadline passing just after the commit
// would.
type committedButFailed struct {
	store.Store
	armed atomic.Bool
	// fail, when set, is what an armed creation reports after its commit
	// (else store.ErrUnavailable).
	fail func() error
}

func (s *committedButFailed) CreateRequest(ctx context.Context, r approval.Request, caps ...store.Cap) error {
	if err := s.Store.CreateRequest(ctx, r, caps...); err != nil {
		return err
	}
	switch {
	case !s.armed.Load():
		return nil
	case s.fail != nil:
		return s.fail()
	}
	return fmt.Errorf("attack14: after the commit: %w", store.ErrUnavailable)
}

// TestCreationFailedAfterItsCommit (attack14, heldpeak2's lease marks): a
// held call whose request's creation reports a failure after the row
// committed is denied (the store is unavailable), and leaves no lease mark
// behind (leaseHold and leaseCreating both dropped: nothing renews the
// row's own lease). The row stays pending, leased to this instance, whose
// identical re-send takes it over (at once: no call of this process holds
// it, takeOver), waits, and is allowed once on its approval. Renewals meanwhile wake no call wrongly. On both stores.
func TestCreationFailedAfterItsCommit(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		cs := &committedButFailed{Store: db}
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		g := New(cs, pol, &Options{Lease: 600 * time.Millisecond})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go g.renewLeases(ctx)
		watch(t, db, g)

		cs.armed.Store(true)
		a := g.Admit(t.Context(), writeCall("/created-then-failed"))
		cs.armed.Store(false)
		if a.Allowed || !strings.Contains(a.Message, "denied: the approval store is unavailable") {
			t.Fatalf("answer %q (allowed %v), want a denial naming the store", a.Message, a.Allowed)
		}
		if ids := g.leases.ids(); len(ids) != 0 {
			t.Fatalf("lease marks left: %v", ids)
		}
		g.leases.mu.Lock()
		marks := len(g.leases.held)
		g.leases.mu.Unlock()
		if marks != 0 {
			t.Fatalf("%d lease marks left (being created included)", marks)
		}
		orphan := waitPending(t, db, 1)[0]

		// The identical re-send takes the request over once its lease
		// lapsed, and runs on its approval.
		ch := admitAsync(t.Context(), g, writeCall("/created-then-failed"))
		deadline := time.Now().Add(30 * time.Second)
		for !g.leases.has(orphan.ID, leaseHold) {
			if time.Now().After(deadline) {
				t.Fatal("the re-send never held the orphaned request")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if rs := waitPending(t, db, 1); rs[0].ID != orphan.ID {
			t.Fatalf("pending %s, want the orphaned %s only", rs[0].ID, orphan.ID)
		}
		if _, err := g.Review(t.Context(), orphan.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a = recv(t, ch)
		if !a.Allowed || a.ApprovalID != orphan.ID {
			t.Fatalf("re-send after approval: %+v, want allowed on %s", a, orphan.ID)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		r, err := db.GetRequest(t.Context(), orphan.ID)
		if err != nil || r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeOK {
			t.Fatalf("request %s outcome %q (%v), want consumed, ok", r.State, r.DispatchOutcome, err)
		}
		if ids := g.leases.ids(); len(ids) != 0 {
			t.Fatalf("lease marks left after the outcome: %v", ids)
		}
	})
}

// TestCreationCancelledAtItsCommitReleasesItsLease (closing22): a held
// call whose caller went away while its request's creation committed (on
// Postgres a COMMIT cancelled in flight can land; here the creation
// commits and then reports the cancellation) left the request pending and
// leased to its instance for a whole lease, which an identical re-send on
// another instance waited out. Its lease is now released as a dropped held
// call's is, and the re-send takes the request over at once. On both
// stores.
func TestCreationCancelledAtItsCommitReleasesItsLease(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		ctx, cancel := context.WithCancelCause(t.Context())
		cs := &committedButFailed{Store: db, fail: func() error {
			cancel(errors.New("client connection dropped"))
			return fmt.Errorf("commit: %w", context.Canceled)
		}}
		g := New(cs, pol, &Options{Lease: time.Hour})
		cs.armed.Store(true)
		if a := g.Admit(ctx, writeCall("/cancelled-at-commit")); a.Allowed {
			t.Fatalf("cancelled call allowed: %+v", a)
		}
		cs.armed.Store(false)
		orphan := waitPending(t, db, 1)[0]
		takenOverElsewhere(t, db, g, pol, "/cancelled-at-commit", orphan.ID, "its caller went away during its creation")
	})
}

// takenOverElsewhere fails t unless request id, left pending by a call of
// g (after what), is no longer leased, g keeps no lease mark, and an
// identical re-send of path on another instance takes it over at once and
// runs on its approval.
func takenOverElsewhere(t *testing.T, db *sqlstore.DB, g *Gate, pol *swappable, path string, id approval.ID, what string) {
	t.Helper()
	r, err := db.GetRequest(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !r.LeaseLapsed(time.Now()) {
		t.Fatalf("request %s still leased to %s until %v after %s: an identical re-send on another instance waits that long", r.ID, r.HeldBy, r.LeaseUntil, what)
	}
	if ids := g.leases.ids(); len(ids) != 0 {
		t.Fatalf("lease marks left: %v", ids)
	}
	other := New(db, pol, &Options{Lease: time.Hour, Instance: "gw-other"})
	watch(t, db, other)
	ch := resendHeldOn(t, other, path, id, untilNearDeadline(t))
	if _, err := other.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if !a.Allowed || a.ApprovalID != id {
		t.Fatalf("re-send after approval: %+v, want allowed on %s", a, id)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
}

// writeSeen is the real store, reporting each request write that
// returned on seen (buffered; a full buffer drops the report).
type writeSeen struct {
	store.Store
	seen chan approval.ID
}

func (s *writeSeen) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	r, err := s.Store.UpdateRequest(ctx, id, actor, fn)
	select {
	case s.seen <- id:
	default:
	}
	return r, err
}

// TestCreationFailedAfterItsCommitReleasesItsLease (closing23, lease23's
// leftover): a held call whose request's creation reports a store failure
// after the row committed (a lost COMMIT reply; the caller still there)
// is refused, and its request stayed pending and leased to its instance
// for a whole lease, which an identical re-send on another instance
// waited out (15 s by default; an hour here). The lease is now released
// in the background (best effort, bounded, owned by the gate: the
// refusal does not wait for it), and the re-send on the other instance
// takes the request over at once. On both stores.
func TestCreationFailedAfterItsCommitReleasesItsLease(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		ws := &writeSeen{Store: db, seen: make(chan approval.ID, 1)}
		cs := &committedButFailed{Store: ws}
		g := New(cs, pol, &Options{Lease: time.Hour})
		cs.armed.Store(true)
		a := g.Admit(t.Context(), writeCall("/failed-after-commit"))
		cs.armed.Store(false)
		if a.Allowed || !strings.Contains(a.Message, "denied: the approval store is unavailable") {
			t.Fatalf("answer %q (allowed %v), want a denial naming the store", a.Message, a.Allowed)
		}
		orphan := waitPending(t, db, 1)[0]
		select {
		case id := <-ws.seen:
			if id != orphan.ID {
				t.Fatalf("wrote %s, want the orphaned %s", id, orphan.ID)
			}
		case <-untilNearDeadline(t):
			t.Fatalf("request %s: its lease was never released after its creation failed (the caller still there): an identical re-send on another instance waits a whole lease", orphan.ID)
		}
		takenOverElsewhere(t, db, g, pol, "/failed-after-commit", orphan.ID, "its creation failed")
	})
}

// blockedWrites is the real store, whose request writes wait until open
// is closed, each reported on entered first. The wait does not count
// against the write's deadline (the release's attemptTimeout): under
// load the test's admissions may take longer than that.
type blockedWrites struct {
	store.Store
	open    chan struct{}
	entered chan approval.ID
}

func (s *blockedWrites) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	s.entered <- id
	<-s.open
	return s.Store.UpdateRequest(context.WithoutCancel(ctx), id, actor, fn)
}

// TestCreationFailureReleasesAreBounded: the background releases of
// creations that failed after their commit (releaseLater) never hold up
// the refusal, even when the store does not answer the release or a
// renewal batch is in flight (which a release waits for), and at
// most maxBackgroundReleases are written at once; the leases of the
// others are left to lapse (nothing of this process holds them). Every
// release written ends its lease; none leaves a lease mark behind.
func TestCreationFailureReleasesAreBounded(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		bw := &blockedWrites{Store: db, open: make(chan struct{}), entered: make(chan approval.ID, 2*maxBackgroundReleases)}
		cs := &committedButFailed{Store: bw}
		g := New(cs, pol, &Options{Lease: time.Hour})
		cs.armed.Store(true)
		n := maxBackgroundReleases + 2
		g.leases.renewing.Lock() // a renewal batch in flight (in an outage: up to a lease)
		for i := range n {
			// Each refused while the releases before it are still blocked.
			if a := g.Admit(t.Context(), writeCall(fmt.Sprintf("/failed-after-commit-%d", i))); a.Allowed || !strings.Contains(a.Message, "denied: the approval store is unavailable") {
				t.Fatalf("answer %q (allowed %v), want a denial naming the store", a.Message, a.Allowed)
			}
		}
		cs.armed.Store(false)
		if got := len(g.releasing); got != maxBackgroundReleases {
			t.Fatalf("%d background releases under way, want %d", got, maxBackgroundReleases)
		}
		g.leases.renewing.Unlock()
		released := map[approval.ID]bool{}
		for range maxBackgroundReleases {
			released[<-bw.entered] = true
		}
		g.leases.mu.Lock()
		marks, inRelease := len(g.leases.held), len(g.leases.inRelease)
		g.leases.mu.Unlock()
		if marks != 0 || inRelease != maxBackgroundReleases {
			t.Fatalf("%d lease marks and %d releases in flight, want 0 and %d", marks, inRelease, maxBackgroundReleases)
		}
		close(bw.open)
		g.releases.Wait()
		if len(bw.entered) != 0 {
			t.Fatalf("%d more releases written, want %d in all", len(bw.entered), maxBackgroundReleases)
		}
		rs := waitPending(t, db, n)
		for _, r := range rs {
			if lapsed := r.LeaseLapsed(time.Now()); lapsed != released[r.ID] {
				t.Errorf("request %s: lease lapsed %v (held by %q until %v), want %v", r.ID, lapsed, r.HeldBy, r.LeaseUntil, released[r.ID])
			}
		}
		if len(g.releasing) != 0 {
			t.Fatalf("%d background release slots still taken", len(g.releasing))
		}
	})
}
