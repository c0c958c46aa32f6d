package gate

import (
	"context"
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
}

func (s *committedButFailed) CreateRequest(ctx context.Context, r approval.Request, caps ...store.Cap) error {
	if err := s.Store.CreateRequest(ctx, r, caps...); err != nil {
		return err
	}
	if s.armed.Load() {
		return fmt.Errorf("attack14: after the commit: %w", store.ErrUnavailable)
	}
	return nil
}

// TestCreationFailedAfterItsCommit (attack14, heldpeak2's lease marks): a
// held call whose request's creation reports a failure after the row
// committed is denied (the store is unavailable), and leaves no lease mark
// behind (leaseHold and leaseCreating both dropped: nothing renews the
// row's own lease). The row stays pending until its lease lapses; then an
// identical re-send takes it over, waits, and is allowed once on its
// approval. Renewals meanwhile wake no call wrongly. On both stores.
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
