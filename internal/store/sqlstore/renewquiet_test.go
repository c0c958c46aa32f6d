package sqlstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestQuietRenewalReadsNoRows: renewing the same held requests as the
// last renewal, while nothing happened to them (10,000 calls held idle,
// every Lease/3), costs the same whether 100 or 1,000 are held: it counts
// the rows marked for the holder instead of reading them into the process
// (renewquiet.go). Counted in allocations, which do not depend on the
// machine's load: each row read allocates at least once (its id).
func TestQuietRenewalReadsNoRows(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			const few, many = 100, 1000
			ns := make([]int, few+many)
			for i := range ns {
				ns[i] = i + 1
			}
			small := createHeld(t, db, "gw-few", t0.Add(time.Minute), ns[:few]...)
			big := createHeld(t, db, "gw-many", t0.Add(time.Minute), ns[few:]...)
			until := t0.Add(5 * time.Minute)
			mustRenew(t, db, "gw-few", small, until, small...) // marks them
			mustRenew(t, db, "gw-many", big, until, big...)
			allocs := func(holder string, ids []approval.ID) float64 {
				return testing.AllocsPerRun(5, func() {
					got, err := db.RenewLeases(ctx, holder, ids, until)
					if err != nil || len(got) != len(ids) {
						t.Fatalf("RenewLeases(%s) renewed %d of %d: %v", holder, len(got), len(ids), err)
					}
				})
			}
			a, z := allocs("gw-few", small), allocs("gw-many", big)
			t.Logf("allocations per renewal: %.0f with %d held, %.0f with %d", a, few, z, many)
			if z-a > 200 {
				t.Fatalf("a renewal with nothing changed allocates %.0f times for %d held requests and %.0f for %d: it reads every held row (%.1f allocations per row)",
					a, few, z, many, (z-a)/(many-few))
			}
			for _, id := range []approval.ID{small[0], big[0], big[many-1]} {
				if raw := rawLease(t, db, id); raw != leaseMarker {
					t.Errorf("%s: stored lease_until %d, want the marker", id, raw)
				}
			}
		})
	}
}

// TestQuietRenewalSeesEveryChange: while the holder names the same ids as
// at its last renewal, each write that takes a request out of the set
// marked for it is seen by the next renewal, as a full renewal sees it: a
// consume's own concrete lease (marked again, still renewed), a
// settlement (not renewed, unmarked with the lease before), a take-over
// by another instance once the lease lapsed (not renewed), and a
// renewal that failed (the next one reads the rows again).
func TestQuietRenewalSeesEveryChange(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2, 3, 4)
			mustRenew(t, db, "gw-a", ids, t0.Add(5*time.Minute), ids...)
			mustRenew(t, db, "gw-a", ids, t0.Add(6*time.Minute), ids...) // quiet

			// A consume's renewal writes a concrete lease of the holder's
			// own: the next renewal marks it again.
			if _, err := db.UpdateRequest(ctx, ids[0], "toolgate", func(r *approval.Request) error {
				r.Renew("gw-a", t0.Add(7*time.Minute))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if raw := rawLease(t, db, ids[0]); raw == leaseMarker {
				t.Fatal("a concrete lease written over the marker kept the marker")
			}
			mustRenew(t, db, "gw-a", ids, t0.Add(8*time.Minute), ids...)
			if raw := rawLease(t, db, ids[0]); raw != leaseMarker {
				t.Errorf("renewed after its own concrete lease: stored lease_until %d, want the marker", raw)
			}
			if _, lu := leaseOf(t, db, ids[0]); !lu.Equal(t0.Add(8 * time.Minute)) {
				t.Errorf("renewed after its own concrete lease: lease %v, want t0+8m", lu)
			}

			// Settled: not renewed, and unmarked with the lease it had.
			if _, err := db.UpdateRequest(ctx, ids[1], "bob", func(r *approval.Request) error { return r.Cancel(t0.Add(time.Minute)) }); err != nil {
				t.Fatal(err)
			}
			mustRenew(t, db, "gw-a", ids, t0.Add(9*time.Minute), ids[0], ids[2], ids[3])
			if raw := rawLease(t, db, ids[1]); raw != t0.Add(8*time.Minute).UnixMilli() {
				t.Errorf("settled: stored lease_until %d, want %d (the lease before)", raw, t0.Add(8*time.Minute).UnixMilli())
			}

			// Taken over by another instance once gw-a's lease lapsed,
			// while gw-a still names the same ids (ids[1] too).
			if _, err := takeOver(ctx, db, ids[2], "gw-b", t0.Add(10*time.Minute)); err != nil {
				t.Fatal(err)
			}
			mustRenew(t, db, "gw-a", ids, t0.Add(11*time.Minute), ids[0], ids[3])
			if h, _ := leaseOf(t, db, ids[2]); h != "gw-b" {
				t.Errorf("taken over: held by %q, want gw-b", h)
			}
			mustRenew(t, db, "gw-a", ids, t0.Add(12*time.Minute), ids[0], ids[3]) // quiet again

			// A renewal that failed forgets the ids: after it, a concrete
			// lease written meanwhile is still marked again.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := db.RenewLeases(cctx, "gw-a", ids, t0.Add(13*time.Minute)); err == nil {
				t.Fatal("a renewal with its context cancelled succeeded")
			}
			if db.renewed.same("gw-a", slices.Sorted(slices.Values(ids))) {
				t.Error("a failed renewal left its ids remembered")
			}
			if _, err := db.UpdateRequest(ctx, ids[3], "toolgate", func(r *approval.Request) error {
				r.Renew("gw-a", t0.Add(14*time.Minute))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			mustRenew(t, db, "gw-a", ids, t0.Add(15*time.Minute), ids[0], ids[3])
			if raw := rawLease(t, db, ids[3]); raw != leaseMarker {
				t.Errorf("after a failed renewal: stored lease_until %d, want the marker", raw)
			}
		})
	}
}
