package gate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/pgtest"
)

// pgWatched opens dsn as one instance's store and runs its watch as serve
// does (changed wakes g's held calls), until the test ends. It returns
// the store and a function that, once g is known, starts the watch and
// returns the ids the watch woke and a channel that gets a value for each
// appended() call. The watch is listening when start returns.
func pgWatched(t *testing.T, dsn string) (*sqlstore.DB, func(g *Gate) (woken func(approval.ID) int, appended <-chan struct{})) {
	t.Helper()
	db, err := sqlstore.Open(t.Context(), sqlstore.Config{Driver: sqlstore.DriverPostgres, DSN: dsn, Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	start := func(g *Gate) (func(approval.ID) int, <-chan struct{}) {
		var (
			mu    sync.Mutex
			wakes = map[approval.ID]int{}
		)
		ready := make(chan struct{})
		app := make(chan struct{}, 64)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			first := true
			db.WatchLog(ctx, func(id approval.ID) {
				if id == "" {
					g.WakeAll()
					if first {
						first = false
						close(ready)
					}
					return
				}
				mu.Lock()
				wakes[id]++
				mu.Unlock()
				g.Wake(id)
			}, func() {
				select {
				case app <- struct{}{}:
				default:
				}
			})
		}()
		t.Cleanup(func() { cancel(); <-done })
		select {
		case <-ready:
		case <-time.After(30 * time.Second): // a hang guard
			t.Fatal("the watch never started listening")
		}
		return func(id approval.ID) int {
			mu.Lock()
			defer mu.Unlock()
			return wakes[id]
		}, app
	}
	return db, start
}

// On Postgres a held call is not woken by its own request's creation
// (its NOTIFY carries the event's type, and the watch calls only
// appended() for a creation), and a decision made on another instance
// right after the creation, before the wait starts (the admission reads
// nothing after creating the request: its subscription was made before,
// subscribeCreated), still wakes it through that decision's NOTIFY, and
// the call runs once; the store is never read for it before the
// decision. Fails with the creation waking the call (the skip reverted)
// at the first check, with a skip that drops the decision's notification
// too (too broad) or a subscription made after the decision at
// recvHeld.
func TestHeldCallNotWokenByItsCreationOnPostgres(t *testing.T) {
	dsn := pgtest.Fresh(t)
	dbA, startA := pgWatched(t, dsn)
	dbB, _ := pgWatched(t, dsn)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	reads := &countReads{Store: dbA}
	g := New(reads, pol, &Options{})
	other := New(dbB, pol, &Options{})
	woken, appended := startA(g)

	decided := false
	c := writeCall("/peak")
	c.OnHold = func(r approval.Request) {
		// The creation has committed; its notification reaches A's
		// watch, which calls appended() for it, and nothing else has
		// been written.
		select {
		case <-appended:
		case <-time.After(30 * time.Second): // a hang guard
			t.Error("no notification of the request's creation")
		}
		if n := woken(r.ID); n != 0 {
			t.Errorf("the watch woke %s %d times on its creation, want 0", r.ID, n)
		}
		if _, err := other.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Errorf("review through the other instance: %v", err)
			return
		}
		decided = true
	}
	id, ch := holdOnEvents(t, t.Context(), g, c, nil)
	if !decided {
		t.Fatal("the decision was not made after the creation")
	}
	a := recvHeld(t, ch)
	if !a.Allowed || a.ApprovalID != id {
		t.Fatalf("admission %+v, want the call allowed", a)
	}
	if n := reads.n.Load(); n != 1 {
		t.Errorf("%d reads of the request, want 1 (the woken wait's; none after its creation)", n)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	if n := woken(id); n == 0 {
		t.Errorf("the decision's notification did not wake %s", id)
	}
}

// countReads is a store that counts its GetRequest calls.
type countReads struct {
	store.Store
	n atomic.Int32
}

func (s *countReads) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	s.n.Add(1)
	return s.Store.GetRequest(ctx, id)
}
