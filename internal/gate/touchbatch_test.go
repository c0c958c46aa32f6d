package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// readsByID is a real store that counts the reads of each request
// (GetRequest) and the batched lease reads (EachLease).
type readsByID struct {
	store.Store
	mu      sync.Mutex
	reads   map[approval.ID]int
	batches int
}

func (s *readsByID) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	s.mu.Lock()
	s.reads[id]++
	s.mu.Unlock()
	return s.Store.GetRequest(ctx, id)
}

func (s *readsByID) EachLease(ctx context.Context, ids []approval.ID, fn func(store.Lease)) error {
	s.mu.Lock()
	s.batches++
	s.mu.Unlock()
	return s.Store.EachLease(ctx, ids, fn)
}

// take returns the counts since the last take and resets them.
func (s *readsByID) take() (reads map[approval.ID]int, total, batches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reads, batches = s.reads, s.batches
	for _, n := range reads {
		total += n
	}
	s.reads, s.batches = map[approval.ID]int{}, 0
	return reads, total, batches
}

// TestTouchedReadsTheWaitedLeasesOnce (held27; attack26's finding): on
// SQLite the watch calls Touched after every poll that saw another
// connection's commit, and every take-over waiting on another instance's
// lease (an identical re-send: waitForeignLease; a re-send naming its
// approval: resume) read its request again: N waits, N reads per Touched
// (after a crash with 10,000 re-sends, ≈ 40,000 reads a second). Touched
// now reads the waited leases in one batch and wakes only the waits whose
// request moved. Then: a release elsewhere, reported by the next Touched,
// still wakes its waits at once (and only them), and a renewal of the
// holder's lease wakes nobody.
func TestTouchedReadsTheWaitedLeasesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40 // half identical re-sends, half re-sends naming their approval
		db := sqlitetest.Open(t)
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		x := New(db, pol, &Options{Instance: "x", Lease: time.Hour, MaxPendingPerPrincipal: 100})
		ys := &readsByID{Store: db, reads: map[approval.ID]int{}}
		y := New(ys, pol, &Options{Instance: "y", Lease: time.Hour, MaxPendingPerPrincipal: 100})

		xctx, xstop := context.WithCancel(t.Context())
		defer xstop()
		cancels := make([]context.CancelCauseFunc, n)
		firsts := make([]<-chan Admission, n)
		for i := range n {
			ctx, cancel := context.WithCancelCause(xctx)
			cancels[i] = cancel
			firsts[i] = admitAsync(ctx, x, writeCall(fmt.Sprintf("/touched-%d", i)))
		}
		synctest.Wait()
		pending := waitPending(t, db, n)
		byPath := map[string]approval.ID{}
		for _, r := range pending {
			byPath[string(r.Arguments)] = r.ID
		}
		yctx, ystop := context.WithCancel(t.Context())
		defer ystop()
		resends := make([]<-chan Admission, n)
		ids := make([]approval.ID, n)
		for i := range n {
			c := writeCall(fmt.Sprintf("/touched-%d", i))
			ids[i] = byPath[string(c.Arguments)]
			if i%2 == 1 {
				c.Resume = ids[i]
			}
			resends[i] = admitAsync(yctx, y, c)
		}
		synctest.Wait() // every re-send waits on x's lease
		for i, ch := range resends {
			select {
			case a := <-ch:
				t.Fatalf("re-send %d answered %+v, want it waiting on x's lease", i, a)
			default:
			}
		}
		ys.take()

		const touches = 4
		for range touches {
			y.Touched() // as y's watch does on SQLite after each commit of another connection
			synctest.Wait()
		}
		if _, total, batches := ys.take(); total > touches {
			t.Errorf("%d Touched with %d take-overs waiting: %d reads of a request (and %d batched lease reads), want at most %d: one batched read of the waited leases per Touched, not one read per wait",
				touches, n, total, batches, touches)
		}

		// A release by x, reported by y's next Touched, wakes the waits on
		// that request at once, and only them.
		const released = 3 // an identical re-send's
		cancels[released](errors.New("connection closed"))
		if a := <-firsts[released]; a.Allowed {
			t.Fatalf("x's call: %+v, want not run", a)
		}
		synctest.Wait()
		y.Touched()
		synctest.Wait()
		reads, _, _ := ys.take()
		if cur, err := db.GetRequest(t.Context(), ids[released]); err != nil || cur.HeldBy != "y" {
			t.Errorf("x released %s and y's watch told y (Touched): held by %q (%v), want taken over by y at once", ids[released], cur.HeldBy, err)
		}
		for id, k := range reads {
			if id != ids[released] {
				t.Errorf("after a release of %s, the wait on %s read its request %d times, want 0 (nothing moved)", ids[released], id, k)
			}
		}

		// A renewal of x's lease (a later end) wakes nobody.
		if _, err := db.RenewLeases(t.Context(), "x", ids, time.Now().Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		y.Touched()
		synctest.Wait()
		if _, total, _ := ys.take(); total != 0 {
			t.Errorf("a renewal of x's leases woke the waits: %d reads, want 0", total)
		}
		ystop()
		xstop()
		for i, ch := range append(resends, firsts...) {
			if i != n+released { // answered above
				<-ch
			}
		}
	})
}

// TestTouchedDuringATakeOversReadWakesIt (held27): an identical re-send
// waiting on another instance's lease (waitForeignLease) registers for
// Touched before it reads the request. A release elsewhere whose Touched
// comes while the wait reads (it has not noted what it read when the
// batch is compared) wakes it whatever the batch read: it reads again and
// takes the request over at once, not at the lease's end.
func TestTouchedDuringATakeOversReadWakesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		s := &afterRead{Store: db}
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		x := New(db, pol, &Options{Instance: "x", Lease: time.Hour})
		y := New(s, pol, &Options{Instance: "y", Lease: time.Hour})
		c := writeCall("/takeover-touched")
		xctx, xcancel := context.WithCancelCause(t.Context())
		first := admitAsync(xctx, x, c) // x's live call holds it
		r := waitPending(t, db, 1)[0]
		s.id = r.ID
		s.hook = func() {
			xcancel(errors.New("connection closed")) // x's caller goes away: x releases its lease
			if a := recv(t, first); a.Allowed {
				t.Errorf("x's call: %+v, want not run", a)
			}
			y.Touched() // as y's watch does on SQLite after x's commit
		}
		s.armed.Store(true)
		ctx, cancel := context.WithCancel(t.Context())
		resent := admitAsync(ctx, y, c)
		start := time.Now()
		synctest.Wait()
		cur, err := db.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.HeldBy != "y" || cur.LeaseLapsed(time.Now()) {
			t.Errorf("x released its lease while y's take-over read the request, and y was told (Touched), but y did not take it over (held by %q, lease until %s): it waits for the lease's end as read (%s)",
				cur.HeldBy, cur.LeaseUntil.Format(time.RFC3339), r.LeaseUntil.Sub(start).Round(time.Second))
		}
		cancel()
		if a := recv(t, resent); a.Allowed {
			t.Fatalf("re-send: %+v, want not run (its caller went away)", a)
		}
	})
}
