package gate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// downDue is the SQLite store (a store.DueTimer) whose sweeper calls
// fail as an unreachable database's do while down.
type downDue struct {
	*sqlstore.DB
	down atomic.Bool
}

func (d *downDue) fail() error {
	if d.down.Load() {
		return errOutage
	}
	return nil
}

func (d *downDue) CountPending(ctx context.Context, by string) (int, error) {
	if err := d.fail(); err != nil {
		return 0, err
	}
	return d.DB.CountPending(ctx, by)
}

func (d *downDue) Due(ctx context.Context, now time.Time, limit int) ([]approval.ID, error) {
	if err := d.fail(); err != nil {
		return nil, err
	}
	return d.DB.Due(ctx, now, limit)
}

func (d *downDue) NextDue(ctx context.Context) (store.DueTimes, error) {
	if err := d.fail(); err != nil {
		return store.DueTimes{}, err
	}
	return d.DB.NextDue(ctx)
}

func (d *downDue) PruneLedger(ctx context.Context, now time.Time) (int, error) {
	if err := d.fail(); err != nil {
		return 0, err
	}
	return d.DB.PruneLedger(ctx, now)
}

func (d *downDue) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if err := d.fail(); err != nil {
		return approval.Request{}, err
	}
	return d.DB.UpdateRequest(ctx, id, actor, fn)
}

// TestIdleSweeperSeesAnOutage (attack25): the sweeper records a lapsed
// dispatch's outcome as unknown only once the store has answered it for
// a whole lease (mayCallUnknown: after an outage a live holder elsewhere
// renews within Lease/3 of the store's return). It learnt of an outage
// from its list of due requests failing; a watched sweeper that is idle
// (idle24) lists nothing, only counts the pending requests, and that
// failing count did not reach the store's health: after an outage that
// began while it was idle, it called a dispatch another instance still
// runs "unknown" as soon as it heard of it.
func TestIdleSweeperSeesAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		// Instance a dispatches; its Run does not run here (its renewals
		// are what the outage stops).
		a := New(db, pol, &Options{Instance: "a"})
		xs := &downDue{DB: db}
		x := New(xs, pol, &Options{Watched: true, Instance: "x"})
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		wg.Go(func() { _ = x.Run(ctx) })
		time.Sleep(3 * time.Second) // x has read its due times: nothing
		synctest.Wait()

		// a consumes an approved call and is dispatching it when the
		// store goes down, before x's watch reported the change.
		ch := admitAsync(ctx, a, writeCall("/dispatching"))
		synctest.Wait()
		rs, _, err := db.ListRequests(ctx, store.Filter{State: approval.StatePending})
		if err != nil || len(rs) != 1 {
			t.Fatalf("pending requests %d (%v), want 1", len(rs), err)
		}
		id := rs[0].ID
		if _, err := a.Review(ctx, id, alice, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
		if got := <-ch; !got.Allowed {
			t.Fatalf("%+v, want allowed", got)
		}
		xs.down.Store(true)
		time.Sleep(time.Minute) // a's lease lapses in the outage
		synctest.Wait()
		xs.down.Store(false)
		x.Wake(id) // the watch's catch-up after the outage
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if r, err := db.GetRequest(ctx, id); err != nil || r.DispatchOutcome != approval.OutcomeNone {
			t.Fatalf("3 s after the store came back the dispatch's outcome is %q (%v), want none until the store answered x for a lease (15 s): a renews within 5 s", r.DispatchOutcome, err)
		}
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if r, err := db.GetRequest(ctx, id); err != nil || r.DispatchOutcome != approval.OutcomeUnknown {
			t.Errorf("18 s after the store came back a's lapsed dispatch's outcome is %q (%v), want unknown", r.DispatchOutcome, err)
		}
	})
}
