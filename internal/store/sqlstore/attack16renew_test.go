package sqlstore

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestRenewLeasesCancelledMidStream: a renewal of more than a
// statement's worth of ids (renewBatch) whose context is cancelled at
// every point of its run, one run after another, either answers every id
// renewed and every request then has the new lease, or answers an error
// and no id; never some ids, and never a half-renewed set: all the
// requests' leases stay equal (each the one of the last renewal that
// committed), so no held call believes its lease was renewed when it was
// not (attack16).
func TestRenewLeasesCancelledMidStream(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			const n = renewBatch + 10
			ns := make([]int, n)
			for i := range ns {
				ns[i] = i + 1
			}
			ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), ns...)
			// A request settled before the runs: never answered.
			if _, err := db.UpdateRequest(t.Context(), ids[5], "bob", func(r *approval.Request) error { return r.Cancel(t0.Add(time.Second)) }); err != nil {
				t.Fatal(err)
			}
			live := slices.Delete(slices.Clone(ids), 5, 6)
			asked := slices.Clone(ids)
			slices.Reverse(asked) // unsorted: the answer follows the order asked
			want := slices.Clone(live)
			slices.Reverse(want)
			errs, oks := 0, 0
			for i := range 30 {
				until := t0.Add(time.Duration(10+i) * time.Minute)
				ctx, cancel := context.WithCancel(t.Context())
				yielded := make(chan struct{})
				go func() {
					defer close(yielded)
					for range i * 6 {
						runtime.Gosched()
					}
					cancel()
				}()
				got, err := db.RenewLeases(ctx, "gw-a", asked, until)
				<-yielded
				if err != nil {
					errs++
					if got != nil {
						t.Fatalf("run %d: an error (%v) with ids answered renewed: %d of them", i, err, len(got))
					}
				} else {
					oks++
					if !slices.Equal(got, want) {
						t.Fatalf("run %d: renewed %d ids, want the %d live ones in the order asked", i, len(got), len(want))
					}
				}
				// All or nothing: every live request has one lease, and a
				// renewal that answered has given it.
				first, err := db.GetRequest(t.Context(), live[0])
				if err != nil {
					t.Fatal(err)
				}
				if got != nil && !first.LeaseUntil.Equal(until) {
					t.Fatalf("run %d: answered renewed, but the lease is %s, want %s", i, first.LeaseUntil, until)
				}
				for _, id := range []approval.ID{live[renewBatch-1], live[renewBatch], live[len(live)-1]} {
					r, err := db.GetRequest(t.Context(), id)
					if err != nil {
						t.Fatal(err)
					}
					if !r.LeaseUntil.Equal(first.LeaseUntil) || r.HeldBy != "gw-a" {
						t.Fatalf("run %d: %s holds %q to %s, %s to %s: a half-renewed set", i, id, r.HeldBy, r.LeaseUntil, live[0], first.LeaseUntil)
					}
				}
			}
			t.Logf("%d runs renewed, %d ended by the cancellation", oks, errs)
			// Whatever the runs did, a renewal afterwards answers them all.
			mustRenew(t, db, "gw-a", asked, t0.Add(time.Hour), want...)
		})
	}
}

// errNotLapsed refuses a take-over of a request whose lease still runs.
var errNotLapsed = errors.New("the lease still runs")

// TestRenewLeasesRacingTakeOvers: while gw-a renews its leases on more
// than a statement's worth of requests (their leases lapsed as of now),
// gw-b takes over each one whose lease it reads lapsed, from four
// goroutines, and a fifth cancels some. No request is both answered
// renewed to gw-a and taken over by gw-b (two instances believing they
// hold one call), and each answered renewed is held by gw-a at the end.
// The renewal starts once 40 take-overs were tried, so some come before
// it, some during it and the rest after it
// (attack16).
func TestRenewLeasesRacingTakeOvers(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			const n = renewBatch + 60
			ns := make([]int, n)
			for i := range ns {
				ns[i] = i + 1
			}
			ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), ns...)
			mustRenew(t, db, "gw-a", ids, t0.Add(time.Minute), ids...) // marked: the lease is the instance's
			now := t0.Add(5 * time.Minute)                             // gw-a's lease has lapsed

			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				taken = map[approval.ID]bool{}
				start = make(chan struct{})
				some  = make(chan struct{}) // closed once 40 take-overs were tried
				tried atomic.Int64
			)
			for w := range 4 {
				wg.Go(func() {
					<-start
					for i := w; i < n; i += 4 {
						id := ids[(i*7)%n]
						_, err := db.UpdateRequest(ctx, id, "gw-b", func(r *approval.Request) error {
							if r.State.Terminal() || r.HeldBy != "gw-a" || now.Before(r.LeaseUntil) {
								return errNotLapsed
							}
							r.Renew("gw-b", now.Add(time.Hour))
							return nil
						})
						if tried.Add(1) == 40 {
							close(some)
						}
						switch {
						case err == nil:
							mu.Lock()
							taken[id] = true
							mu.Unlock()
						case !errors.Is(err, errNotLapsed):
							t.Errorf("take-over of %s: %v", id, err)
						}
					}
				})
			}
			wg.Go(func() {
				<-start
				for i := 0; i < n; i += 9 {
					if _, err := db.UpdateRequest(ctx, ids[i], "bob", func(r *approval.Request) error {
						if r.State.Terminal() {
							return errNotLapsed
						}
						return r.Cancel(now)
					}); err != nil && !errors.Is(err, errNotLapsed) {
						t.Errorf("cancel of %s: %v", ids[i], err)
					}
				}
			})
			var renewed []approval.ID
			var rerr error
			wg.Go(func() {
				<-some // the renewal runs amid the take-overs, not before them
				renewed, rerr = db.RenewLeases(ctx, "gw-a", ids, now.Add(10*time.Minute))
			})
			close(start)
			wg.Wait()
			if rerr != nil {
				t.Fatal(rerr)
			}
			if !slices.IsSorted(renewed) {
				t.Error("renewed ids not in the order asked")
			}
			for _, id := range renewed {
				if taken[id] {
					t.Errorf("%s: answered renewed to gw-a and taken over by gw-b", id)
				}
				r, err := db.GetRequest(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if r.HeldBy != "gw-a" {
					t.Errorf("%s: answered renewed to gw-a, held by %q", id, r.HeldBy)
				}
			}
			t.Logf("%d renewed, %d taken over, of %d", len(renewed), len(taken), n)
		})
	}
}
