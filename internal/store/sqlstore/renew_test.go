package sqlstore

import (
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestRenewLeasesStreamed: RenewLeases reads the marked rows as a stream
// and looks each up in the sorted ids. With ids unsorted and repeated it
// still answers the ids it renewed in the order of ids (repeats
// included); more than a statement's worth (renewBatch) are marked, then
// left out of the next renewal (unmarked in chunks, each with the
// instance's lease before that renewal), and those settled meanwhile get
// that lease too (the one UPDATE of the marked rows no longer live).
func TestRenewLeasesStreamed(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			const n = 2*renewBatch + 100
			ns := make([]int, n)
			for i := range ns {
				ns[i] = i + 1
			}
			ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), ns...)
			other := createHeld(t, db, "gw-b", t0.Add(time.Minute), n+1)[0]

			// Unsorted, with a repeat and an id gw-a does not hold.
			asked := slices.Clone(ids)
			slices.Reverse(asked)
			asked = append(asked, ids[3], other, testID(n+2))
			want := slices.Clone(asked[:len(asked)-2])
			mustRenew(t, db, "gw-a", asked, t0.Add(5*time.Minute), want...)
			for _, id := range []approval.ID{ids[0], ids[n/2], ids[n-1]} {
				if raw := rawLease(t, db, id); raw != leaseMarker {
					t.Fatalf("%s: stored lease_until %d, want the marker", id, raw)
				}
			}

			// Settle two, then renew only the last ten: the settled and
			// the 1,088 not named get the lease of the renewal before.
			for _, id := range ids[:2] {
				if _, err := db.UpdateRequest(ctx, id, "bob", func(r *approval.Request) error { return r.Cancel(t0.Add(2 * time.Minute)) }); err != nil {
					t.Fatal(err)
				}
			}
			keep := ids[n-10:]
			mustRenew(t, db, "gw-a", keep, t0.Add(10*time.Minute), keep...)
			for i, id := range ids {
				raw := rawLease(t, db, id)
				switch {
				case i >= n-10 && raw != leaseMarker:
					t.Fatalf("%s (renewed): stored lease_until %d, want the marker", id, raw)
				case i < n-10 && raw != t0.Add(5*time.Minute).UnixMilli():
					t.Fatalf("%s (not named, or settled): stored lease_until %d, want %d", id, raw, t0.Add(5*time.Minute).UnixMilli())
				}
			}
			if raw := rawLease(t, db, other); raw != t0.Add(time.Minute).UnixMilli() {
				t.Errorf("another holder's request: stored lease_until %d, want its own", raw)
			}
			// Nothing named: nothing renewed, the marked ones unmarked.
			mustRenew(t, db, "gw-a", nil, t0.Add(15*time.Minute))
			if raw := rawLease(t, db, keep[0]); raw != t0.Add(10*time.Minute).UnixMilli() {
				t.Errorf("after a renewal naming nothing: stored lease_until %d, want %d", raw, t0.Add(10*time.Minute).UnixMilli())
			}
		})
	}
}
