package sqlstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/storetest"
)

// everyRequested announces "requested" events on channels a and b, and
// "approved" ones on a.
func everyRequested(ev approval.Event, _ approval.Request) []string {
	switch ev.Type {
	case approval.EventRequested:
		return []string{"a", "b", "a"} // a twice: one row
	case approval.EventApproved:
		return []string{"a"}
	}
	return nil
}

// seqIDs returns a newID function giving evt-1, evt-2, …
func seqIDs() func() (string, error) {
	var n atomic.Int64
	return func() (string, error) { return fmt.Sprintf("evt-%d", n.Add(1)), nil }
}

func approve(t *testing.T, db *DB, id approval.ID, at time.Time) {
	t.Helper()
	if _, err := db.UpdateRequest(t.Context(), id, "bob", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", at)
	}); err != nil {
		t.Fatal(err)
	}
}

func TestFanOut(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			newID := seqIDs()
			r1, r2 := pendingRequest(testID(1)), pendingRequest(testID(2))
			for _, r := range []approval.Request{r1, r2} {
				if err := db.CreateRequest(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			approve(t, db, r1.ID, t0.Add(time.Minute))
			// A session event in between is passed over.
			s := session.Session{ID: "s1", Principal: "session:s1", TokenHash: "h1", Mode: session.ModeDefault, Revision: 1, CreatedAt: t0, CreatedBy: "host"}
			if err := db.CreateSession(ctx, s, "host"); err != nil {
				t.Fatal(err)
			}
			storetest.FeedShowsAll(t, db)
			var seen []approval.State
			res, err := db.FanOut(ctx, 2, t0, func(ev approval.Event, r approval.Request) []string {
				seen = append(seen, r.State)
				return everyRequested(ev, r)
			}, newID)
			if err != nil {
				t.Fatal(err)
			}
			if want := (store.FanOutResult{Events: 2, Deliveries: 4, More: true}); res != want {
				t.Errorf("first FanOut = %+v, want %+v", res, want)
			}
			// match sees each request as stored now (r1 is already approved).
			if !slices.Contains(seen, approval.StateApproved) {
				t.Errorf("match saw states %v, want r1 as approved", seen)
			}
			res, err = db.FanOut(ctx, 10, t0, everyRequested, newID)
			if err != nil {
				t.Fatal(err)
			}
			if want := (store.FanOutResult{Events: 3, Deliveries: 1}); res != want {
				t.Errorf("second FanOut = %+v, want %+v (reviewed, approved and the session's event; only approved announced)", res, want)
			}
			if res, err := db.FanOut(ctx, 10, t0, everyRequested, newID); err != nil || res != (store.FanOutResult{}) {
				t.Errorf("third FanOut = %+v, %v; want nothing left", res, err)
			}
			ds, err := db.Deliveries(ctx, "", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			type row struct {
				EventID, Channel string
				Request          approval.ID
				Type             approval.EventType
				State            approval.State
				Actor            string
			}
			var got []row
			for _, d := range ds {
				got = append(got, row{d.EventID, d.Channel, d.Event.RequestID, d.Event.Type, d.Event.State, d.Event.Actor})
				if d.State != store.DeliveryPending || d.Attempts != 0 || !d.NextAt.Equal(t0) || d.Event.Seq == 0 || d.Event.At.IsZero() {
					t.Errorf("new delivery %+v: want pending, no attempts, due at t0, with its event's seq and time", d)
				}
			}
			want := []row{
				{"evt-1", "a", r1.ID, approval.EventRequested, approval.StatePending, "desktop"},
				{"evt-1", "b", r1.ID, approval.EventRequested, approval.StatePending, "desktop"},
				{"evt-2", "a", r2.ID, approval.EventRequested, approval.StatePending, "desktop"},
				{"evt-2", "b", r2.ID, approval.EventRequested, approval.StatePending, "desktop"},
				{"evt-3", "a", r1.ID, approval.EventApproved, approval.StateApproved, "bob"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("deliveries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFanOutStartsAtTheNewestEvent: a database upgraded from release 5
// announces none of the events it already had.
func TestFanOutStartsAtTheNewestEvent(t *testing.T) {
	rows, err := os.ReadFile(filepath.Join("testdata", "release5", "rows.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, oldDatabase(t, b, 5, string(rows)))
			if evs, err := db.Events(t.Context(), 0, 0); err != nil || len(evs) == 0 {
				t.Fatalf("Events = %d, %v; want the old rows' events", len(evs), err)
			}
			all := func(approval.Event, approval.Request) []string { return []string{"a"} }
			if res, err := db.FanOut(t.Context(), 0, t0, all, seqIDs()); err != nil || res != (store.FanOutResult{}) {
				t.Errorf("FanOut = %+v, %v; want nothing: history is not announced", res, err)
			}
			if err := db.CreateRequest(t.Context(), pendingRequest(testID(99))); err != nil {
				t.Fatal(err)
			}
			storetest.FeedShowsAll(t, db)
			if res, err := db.FanOut(t.Context(), 0, t0, all, seqIDs()); err != nil || res.Deliveries != 1 {
				t.Errorf("FanOut after a new request = %+v, %v; want its one delivery", res, err)
			}
		})
	}
}

func TestClaimAndFinish(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			r := pendingRequest(testID(1))
			if err := db.CreateRequest(ctx, r); err != nil {
				t.Fatal(err)
			}
			approve(t, db, r.ID, t0.Add(time.Minute))
			onA := func(ev approval.Event, r approval.Request) []string {
				return slices.DeleteFunc(everyRequested(ev, r), func(c string) bool { return c != "a" })
			}
			storetest.FeedShowsAll(t, db)
			if _, err := db.FanOut(ctx, 0, t0, onA, seqIDs()); err != nil {
				t.Fatal(err)
			}
			lease := t0.Add(30 * time.Second)
			claim := func(owner string, now time.Time) []store.Delivery {
				t.Helper()
				ds, err := db.ClaimDeliveries(ctx, owner, now, now.Add(30*time.Second), 0)
				if err != nil {
					t.Fatal(err)
				}
				return ds
			}
			// Only the first event of the request: the second waits behind it.
			ds := claim("x", t0)
			if len(ds) != 1 || ds[0].Event.Type != approval.EventRequested || ds[0].LeaseOwner != "x" || !ds[0].LeaseUntil.Equal(lease) || ds[0].Attempts != 1 {
				t.Fatalf("claim = %+v, want the requested event leased to x, attempt 1", ds)
			}
			first := ds[0]
			if ds := claim("y", t0.Add(time.Second)); len(ds) != 0 {
				t.Fatalf("y claimed %+v while x holds the lease", ds)
			}
			if at, ok, err := db.NextDelivery(ctx); err != nil || !ok || !at.Equal(lease) {
				t.Errorf("NextDelivery = %v, %v, %v; want the end of x's lease", at, ok, err)
			}
			// x renews its lease; then it lapses: y takes over, and x's late
			// renewal and result are refused.
			if err := db.RenewDelivery(ctx, first.ID, "y", lease.Add(time.Second)); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("RenewDelivery by y, which holds no lease = %v, want ErrConflict", err)
			}
			if err := db.RenewDelivery(ctx, first.ID, "x", lease.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if ds := claim("y", lease); len(ds) != 0 {
				t.Fatalf("y claimed %+v at the end of the lease x renewed", ds)
			}
			lease = lease.Add(time.Second)
			ds = claim("y", lease)
			if len(ds) != 1 || ds[0].ID != first.ID || ds[0].Attempts != 2 {
				t.Fatalf("claim after the lease = %+v, want the same delivery, attempt 2", ds)
			}
			if err := db.RenewDelivery(ctx, first.ID, "x", lease.Add(time.Minute)); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("RenewDelivery by x after losing the lease = %v, want ErrConflict", err)
			}
			err := db.FinishDelivery(ctx, first.ID, "x", store.DeliveryResult{State: store.DeliveryDelivered, At: lease})
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("FinishDelivery by x after losing the lease = %v, want ErrConflict", err)
			}
			// y fails, to retry in a minute.
			retry := lease.Add(time.Minute)
			if err := db.FinishDelivery(ctx, first.ID, "y", store.DeliveryResult{State: store.DeliveryPending, NextAt: retry, At: lease, Error: "receiver answered 500"}); err != nil {
				t.Fatal(err)
			}
			if ds := claim("y", retry.Add(-time.Millisecond)); len(ds) != 0 {
				t.Fatalf("claimed %+v before NextAt", ds)
			}
			if at, ok, err := db.NextDelivery(ctx); err != nil || !ok || !at.Equal(retry) {
				t.Errorf("NextDelivery = %v, %v, %v; want the retry time", at, ok, err)
			}
			ds = claim("y", retry)
			if len(ds) != 1 || ds[0].Attempts != 3 || ds[0].LastError != "receiver answered 500" {
				t.Fatalf("claim at NextAt = %+v, want attempt 3 with the last error", ds)
			}
			if err := db.FinishDelivery(ctx, first.ID, "y", store.DeliveryResult{State: store.DeliveryDelivered, At: retry, Ref: `{"ts":"1"}`}); err != nil {
				t.Fatal(err)
			}
			if err := db.FinishDelivery(ctx, first.ID, "y", store.DeliveryResult{State: store.DeliveryDelivered, At: retry}); !errors.Is(err, store.ErrConflict) {
				t.Errorf("finishing a final delivery again = %v, want ErrConflict", err)
			}
			if ref, err := db.MessageRef(ctx, r.ID, "a"); err != nil || ref != `{"ts":"1"}` {
				t.Errorf("MessageRef = %q, %v", ref, err)
			}
			if _, err := db.MessageRef(ctx, r.ID, "b"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("MessageRef on another channel = %v, want ErrNotFound", err)
			}
			// Now the approved event comes out; it fails for good and keeps
			// a new ref in place of the old.
			ds = claim("z", retry)
			if len(ds) != 1 || ds[0].Event.Type != approval.EventApproved {
				t.Fatalf("claim = %+v, want the approved event", ds)
			}
			if err := db.FinishDelivery(ctx, ds[0].ID, "z", store.DeliveryResult{State: store.DeliveryFailed, At: retry, Error: "gave up", Ref: `{"ts":"2"}`}); err != nil {
				t.Fatal(err)
			}
			if ref, _ := db.MessageRef(ctx, r.ID, "a"); ref != `{"ts":"2"}` {
				t.Errorf("MessageRef after a second ref = %q", ref)
			}
			if _, ok, err := db.NextDelivery(ctx); err != nil || ok {
				t.Errorf("NextDelivery = %v, %v; want none pending", ok, err)
			}
			all, err := db.Deliveries(ctx, "a", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 2 || all[0].State != store.DeliveryDelivered || !all[0].DoneAt.Equal(retry) || all[1].State != store.DeliveryFailed || all[1].LastError != "gave up" || all[1].LeaseOwner != "" {
				t.Errorf("deliveries = %+v", all)
			}
			if err := db.FinishDelivery(ctx, all[1].ID, "z", store.DeliveryResult{State: store.DeliveryDelivered}); err == nil {
				t.Errorf("a final result without its time was accepted")
			}
		})
	}
}

// TestTwoHandlesDeliverEachOnce fans out and claims from two *DB on one
// database at once, as two instances would: every (event, channel) is
// made once and claimed by exactly one of them.
func TestTwoHandlesDeliverEachOnce(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			cfg := b.fresh(t)
			dbs := []*DB{openTest(t, cfg), openTest(t, cfg)}
			ctx := t.Context()
			const requests = 30
			channels := func(approval.Event, approval.Request) []string { return []string{"a", "b"} }
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				claimed = map[int64]string{} // delivery id → owner
				dupes   []int64
				stop    atomic.Bool
			)
			for w, db := range dbs {
				owner := fmt.Sprintf("instance-%d", w)
				wg.Go(func() {
					for {
						last := stop.Load()
						res, err := db.FanOut(ctx, 7, t0, channels, seqIDs())
						if err != nil {
							t.Errorf("%s: FanOut = %v", owner, err)
							return
						}
						ds, err := db.ClaimDeliveries(ctx, owner, t0, t0.Add(time.Hour), 5)
						if err != nil {
							t.Errorf("%s: ClaimDeliveries = %v", owner, err)
							return
						}
						for _, d := range ds {
							mu.Lock()
							if _, dup := claimed[d.ID]; dup {
								dupes = append(dupes, d.ID)
							}
							claimed[d.ID] = owner
							mu.Unlock()
							if err := db.FinishDelivery(ctx, d.ID, owner, store.DeliveryResult{State: store.DeliveryDelivered, At: t0}); err != nil {
								t.Errorf("%s: FinishDelivery = %v", owner, err)
							}
						}
						if last && !res.More && len(ds) == 0 {
							return
						}
					}
				})
			}
			for i := range requests {
				if err := dbs[i%2].CreateRequest(ctx, pendingRequest(testID(i))); err != nil {
					t.Fatal(err)
				}
			}
			storetest.FeedShowsAll(t, dbs[0])
			stop.Store(true)
			wg.Wait()
			if len(dupes) > 0 {
				t.Errorf("deliveries claimed twice: %v", dupes)
			}
			if len(claimed) != 2*requests {
				t.Errorf("%d deliveries claimed, want %d", len(claimed), 2*requests)
			}
			ds, err := dbs[0].Deliveries(ctx, "", 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			pairs := map[string]bool{}
			for _, d := range ds {
				k := fmt.Sprintf("%d/%s", d.Event.Seq, d.Channel)
				if pairs[k] || d.State != store.DeliveryDelivered || d.Attempts != 1 {
					t.Errorf("delivery %+v: want one delivered row per event and channel, one attempt", d)
				}
				pairs[k] = true
			}
			if len(ds) != 2*requests {
				t.Errorf("%d delivery rows, want %d", len(ds), 2*requests)
			}
		})
	}
}

// BenchmarkDeliveryLifecycle measures the outbox's store work per
// delivery, apart from the receiver: a hundredth of one FanOut of 100
// events, one ClaimDeliveries and one FinishDelivery. Compare with
// BenchmarkRequestLifecycle, the store work of one held call (whose events
// each become at most one delivery per channel).
func BenchmarkDeliveryLifecycle(b *testing.B) {
	for _, be := range backends {
		b.Run(be.driver, func(b *testing.B) {
			db := openTest(b, be.fresh(b))
			ctx := b.Context()
			one := func(ev approval.Event, _ approval.Request) []string { return []string{"hook"} }
			newID := seqIDs()
			made, queued := 0, 0
			for b.Loop() {
				if queued == 0 {
					b.StopTimer()
					for range 100 {
						made++
						if err := db.CreateRequest(ctx, pendingRequest(testID(made))); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
					res, err := db.FanOut(ctx, 100, t0, one, newID)
					if err != nil || res.Deliveries != 100 {
						b.Fatalf("FanOut = %+v, %v", res, err)
					}
					queued = 100
				}
				ds, err := db.ClaimDeliveries(ctx, "bench", t0, t0.Add(time.Minute), 1)
				if err != nil || len(ds) != 1 {
					b.Fatalf("ClaimDeliveries = %d, %v", len(ds), err)
				}
				if err := db.FinishDelivery(ctx, ds[0].ID, "bench", store.DeliveryResult{State: store.DeliveryDelivered, At: t0}); err != nil {
					b.Fatal(err)
				}
				queued--
			}
		})
	}
}
