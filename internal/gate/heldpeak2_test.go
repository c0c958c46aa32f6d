package gate

import (
	"context"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// blockCreate is a store whose CreateRequest announces the request's id
// on created and then waits for release before it writes.
type blockCreate struct {
	store.Store
	created chan approval.ID
	release chan struct{}
}

func (s *blockCreate) CreateRequest(ctx context.Context, r approval.Request, caps ...store.Cap) error {
	s.created <- r.ID
	<-s.release
	return s.Store.CreateRequest(ctx, r, caps...)
}

// A renewal of this process's leases that runs while a held call's
// request is being created leaves that request out of its batch and wakes
// no one: the row does not exist yet, so it was missing from the store's
// answer, and the wake-up made the call read the request it had just
// written (on Postgres, in a burst, hundreds to thousands of calls per
// renewal, each keeping the whole request it read; docs/performance.md,
// "heldpeak2"). Once the creation has returned, the request is renewed as
// before. The decision made here hands the call its row (wakeDecided), so
// the request is never read. Fails with the creating ids named in the
// renewal (leaseCreating not set, or ids not skipping it): the call's
// subscription is woken by the renewal, and the call reads its request.
func TestRenewalDuringCreationWakesNoHeldCall(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	bc := &blockCreate{Store: db, created: make(chan approval.ID, 1), release: make(chan struct{})}
	reads := &countReads{Store: bc}
	g := New(reads, pol, &Options{})

	type admitted struct {
		hctx context.Context //nolint:containedctx // handed to the test's goroutine
		adm  *Admission
		held bool
	}
	res := make(chan admitted, 1)
	go func() {
		c := writeCall("/renewed")
		adm := new(Admission)
		hctx, held := g.AdmitOrHold(t.Context(), &c, adm)
		res <- admitted{hctx: hctx, adm: adm, held: held}
	}()
	var id approval.ID
	select {
	case id = <-bc.created:
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("the request was never created")
	}
	// The creation is in flight: the renewal runs now.
	if slices.Contains(g.leases.ids(), id) {
		t.Errorf("a renewal names %s while it is being created", id)
	}
	g.renewOnce(t.Context())
	g.hub.mu.Lock()
	w := g.hub.subs[string(id)]
	g.hub.mu.Unlock()
	if w == nil {
		t.Fatalf("the held call's subscription to %s was woken by the renewal", id)
	}
	close(bc.release)
	var a admitted
	select {
	case a = <-res:
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("the admission never returned")
	}
	if !a.held {
		t.Fatalf("call not held: %+v", a.adm)
	}
	if !slices.Contains(g.leases.ids(), id) {
		t.Errorf("the renewals leave %s out after its creation", id)
	}
	g.renewOnce(t.Context())
	ch := make(chan *Admission, 2)
	g.WaitHoldFunc(a.hctx, a.adm.TakeHold(), func(ans *Admission) { ch <- ans })
	if _, err := g.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatal(err)
	}
	ans := recvHeld(t, ch)
	if !ans.Allowed || ans.ApprovalID != id {
		t.Fatalf("admission %+v, want the call allowed", ans)
	}
	ans.Finish(t.Context(), approval.OutcomeOK)
	if n := reads.n.Load(); n != 0 {
		t.Errorf("%d reads of the request, want 0 (the decision hands the call its row)", n)
	}
}
