package sqlstore

import (
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestSettlingWriteUnmarks: a write that leaves a marked request needing
// no holder (a cancellation through the general write; a dispatch
// outcome, on Postgres its one statement) gives the row its effective
// lease, the instance's, as a concrete lease in the same UPDATE; a write
// that leaves it live (a decision, a consume that kept its lease) keeps
// the marker. The renewal then has no settled row to write (renew.go,
// step 2), and still renews the live ones. Before pglease45 the settled
// rows kept the marker until the next renewal rewrote each of them.
func TestSettlingWriteUnmarks(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2, 3)
			mustRenew(t, db, "gw-a", ids, t0.Add(5*time.Minute), ids...)
			until := t0.Add(5 * time.Minute).UnixMilli()
			marked := func(what string, id approval.ID, want bool) {
				t.Helper()
				raw := rawLease(t, db, id)
				switch {
				case want && raw != leaseMarker:
					t.Errorf("%s: stored lease_until %d, want the marker", what, raw)
				case !want && raw != until:
					t.Errorf("%s: stored lease_until %d, want the instance's lease %d", what, raw, until)
				}
			}

			if _, err := db.UpdateRequest(ctx, ids[0], "bob", func(r *approval.Request) error { return r.Cancel(t0.Add(time.Minute)) }); err != nil {
				t.Fatal(err)
			}
			marked("cancelled", ids[0], false)

			for _, id := range ids[1:] {
				if _, err := db.UpdateRequest(ctx, id, "bob", approveFn); err != nil {
					t.Fatal(err)
				}
				marked("approved", id, true)
				if _, err := db.UpdateRequest(ctx, id, "gw-a", func(r *approval.Request) error {
					return r.Consume(r.Binding(), "", t0.Add(2*time.Minute)) // the lease kept, as the gate's holdForDispatch keeps it
				}); err != nil {
					t.Fatal(err)
				}
				marked("consumed, in dispatch", id, true)
			}
			if err := db.RecordOutcome(ctx, ids[1], approval.OutcomeOK, nil, "gw-a"); err != nil {
				t.Fatal(err)
			}
			marked("its outcome recorded", ids[1], false)
			if h, lu := leaseOf(t, db, ids[1]); h != "gw-a" || !lu.Equal(t0.Add(5*time.Minute)) {
				t.Errorf("its outcome recorded: held by %q until %v, want gw-a until t0+5m", h, lu)
			}

			mustRenew(t, db, "gw-a", ids, t0.Add(10*time.Minute), ids[2])
			marked("settled, after the renewal", ids[1], false)
			if _, lu := leaseOf(t, db, ids[2]); !lu.Equal(t0.Add(10 * time.Minute)) {
				t.Errorf("in dispatch, after the renewal: lease %v, want t0+10m", lu)
			}
		})
	}
}
