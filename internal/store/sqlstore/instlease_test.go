package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Instance leases (migration 14): a renewal writes the holder's
// instance_leases row, and a request it holds carries leaseMarker and
// reads its effective lease from that row. These tests run on both
// stores.

var errKeep = errors.New("no change")

// createHeld creates pending requests 1..n held by holder with a concrete
// lease until until, as the gate's hold writes them.
func createHeld(t *testing.T, db *DB, holder string, until time.Time, ns ...int) []approval.ID {
	t.Helper()
	var ids []approval.ID
	for _, n := range ns {
		r := pendingRequest(testID(n))
		r.Renew(holder, until)
		if err := db.CreateRequest(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// rawLease reads the stored lease_until of id (NULL as 0).
func rawLease(t *testing.T, db *DB, id approval.ID) int64 {
	t.Helper()
	var v sql.NullInt64
	if err := db.sql.QueryRowContext(t.Context(), db.d.rebind(`SELECT lease_until FROM requests WHERE id = ?`), string(id)).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v.Int64
}

// mustRenew renews and checks which ids were renewed.
func mustRenew(t *testing.T, db *DB, holder string, ids []approval.ID, until time.Time, want ...approval.ID) {
	t.Helper()
	got, err := db.RenewLeases(t.Context(), holder, ids, until)
	if err != nil {
		t.Fatalf("RenewLeases(%s): %v", holder, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("RenewLeases(%s, %v) renewed %v, want %v", holder, ids, got, want)
	}
}

// leaseOf reads id and returns its holder and effective lease.
func leaseOf(t *testing.T, db *DB, id approval.ID) (string, time.Time) {
	t.Helper()
	r, err := db.GetRequest(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.HeldBy, r.LeaseUntil
}

// takeOver is the gate's take-over of a lapsed lease (hold.go), by holder
// as of now: errKeep when the lease has not lapsed.
func takeOver(ctx context.Context, db *DB, id approval.ID, holder string, now time.Time) (approval.Request, error) {
	return db.UpdateRequest(ctx, id, holder, func(r *approval.Request) error {
		if !r.LeaseLapsed(now) {
			return errKeep
		}
		r.Renew(holder, now.Add(time.Minute))
		return nil
	})
}

// TestInstanceLeaseRenewal: a renewal marks the requests it renews once
// and from then on extends them through the instance's row alone; every
// read returns the effective lease; a request the holder no longer names
// gets a concrete lease again (the instance's lease before the renewal),
// as does one that no longer needs a holder; another holder's requests
// and requests with a concrete lease (an older binary's) are left alone.
func TestInstanceLeaseRenewal(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			a := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2, 3)
			other := createHeld(t, db, "gw-old", t0.Add(time.Minute), 4)[0]

			mustRenew(t, db, "gw-a", a[:2], t0.Add(5*time.Minute), a[:2]...)
			for _, id := range a[:2] {
				if raw := rawLease(t, db, id); raw != leaseMarker {
					t.Errorf("%s: stored lease_until %d, want the marker", id, raw)
				}
				if h, lu := leaseOf(t, db, id); h != "gw-a" || !lu.Equal(t0.Add(5*time.Minute)) {
					t.Errorf("%s: held by %q until %v, want gw-a until %v", id, h, lu, t0.Add(5*time.Minute))
				}
			}
			if raw := rawLease(t, db, a[2]); raw != t0.Add(time.Minute).UnixMilli() {
				t.Errorf("an id not renewed: stored lease_until %d, want its own", raw)
			}

			// The second renewal writes the instance's row only.
			mustRenew(t, db, "gw-a", a[:2], t0.Add(10*time.Minute), a[:2]...)
			rs, _, err := db.ListRequests(ctx, store.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				want := t0.Add(time.Minute)
				if r.ID == a[0] || r.ID == a[1] {
					want = t0.Add(10 * time.Minute)
				}
				if !r.LeaseUntil.Equal(want) {
					t.Errorf("ListRequests: %s lease %v, want %v", r.ID, r.LeaseUntil, want)
				}
			}
			if _, lu := leaseOf(t, db, other); !lu.Equal(t0.Add(time.Minute)) || rawLease(t, db, other) == leaseMarker {
				t.Errorf("another holder's concrete lease changed: %v", lu)
			}

			// An update that does not touch the lease keeps the marker.
			if _, err := db.UpdateRequest(ctx, a[0], "bob", func(r *approval.Request) error { r.Reason = "looked at"; return nil }); err != nil {
				t.Fatal(err)
			}
			if raw := rawLease(t, db, a[0]); raw != leaseMarker {
				t.Errorf("an update of another column wrote lease_until %d", raw)
			}

			// a[1] is no longer held: it lapses when its last renewal said.
			mustRenew(t, db, "gw-a", a[:1], t0.Add(15*time.Minute), a[0])
			if raw := rawLease(t, db, a[1]); raw != t0.Add(10*time.Minute).UnixMilli() {
				t.Errorf("a request no longer held: stored lease_until %d, want %d (the lease it had)", raw, t0.Add(10*time.Minute).UnixMilli())
			}
			// a[0] is cancelled: a renewal does not renew it, and gives it a
			// concrete lease.
			if _, err := db.UpdateRequest(ctx, a[0], "bob", func(r *approval.Request) error { return r.Cancel(t0.Add(time.Minute)) }); err != nil {
				t.Fatal(err)
			}
			mustRenew(t, db, "gw-a", a[:1], t0.Add(20*time.Minute))
			if raw := rawLease(t, db, a[0]); raw != t0.Add(15*time.Minute).UnixMilli() {
				t.Errorf("a settled request: stored lease_until %d, want %d", raw, t0.Add(15*time.Minute).UnixMilli())
			}
		})
	}
}

// TestInstanceLeaseTakeOverAndRelease: another instance takes a request
// over only once its holder's instance lease lapsed; the old holder's next
// renewal no longer renews it, and the new holder's marks it. A release
// writes a concrete lease. A request whose holder's instance has no lease
// row at all is lapsed.
func TestInstanceLeaseTakeOverAndRelease(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2)
			mustRenew(t, db, "gw-a", ids, t0.Add(5*time.Minute), ids...)

			// The holder renews: no take-over before its instance lease ends.
			if _, err := takeOver(ctx, db, ids[0], "gw-b", t0.Add(4*time.Minute)); !errors.Is(err, errKeep) {
				t.Fatalf("take-over while the holder's instance lease runs: %v, want none", err)
			}
			// The holder crashed: its instance lease lapses, gw-b takes over.
			r, err := takeOver(ctx, db, ids[0], "gw-b", t0.Add(6*time.Minute))
			if err != nil || r.HeldBy != "gw-b" || !r.LeaseUntil.Equal(t0.Add(7*time.Minute)) {
				t.Fatalf("take-over after the lease lapsed = %+v, %v", r, err)
			}
			if raw := rawLease(t, db, ids[0]); raw != t0.Add(7*time.Minute).UnixMilli() {
				t.Errorf("taken over: stored lease_until %d, want a concrete time", raw)
			}
			mustRenew(t, db, "gw-a", ids, t0.Add(8*time.Minute), ids[1])
			mustRenew(t, db, "gw-b", ids[:1], t0.Add(9*time.Minute), ids[0])
			if h, lu := leaseOf(t, db, ids[0]); h != "gw-b" || !lu.Equal(t0.Add(9*time.Minute)) {
				t.Errorf("after gw-b's renewal: held by %q until %v", h, lu)
			}

			// Release turns the marker back into a time.
			rel := t0.Add(7 * time.Minute)
			r, err = db.UpdateRequest(ctx, ids[1], "toolgate", func(r *approval.Request) error { r.Release("gw-a", rel); return nil })
			if err != nil || !r.LeaseUntil.Equal(rel) {
				t.Fatalf("release = %v, %v; want lease %v", r.LeaseUntil, err, rel)
			}
			if raw := rawLease(t, db, ids[1]); raw != rel.UnixMilli() {
				t.Errorf("released: stored lease_until %d, want %d", raw, rel.UnixMilli())
			}
			if _, err := takeOver(ctx, db, ids[1], "gw-c", rel); err != nil {
				t.Errorf("take-over of a released request: %v", err)
			}

			// A marked request whose instance has no lease row is lapsed.
			if _, err := db.sql.ExecContext(ctx, db.d.rebind(`DELETE FROM instance_leases WHERE instance = ?`), "gw-b"); err != nil {
				t.Fatal(err)
			}
			if h, lu := leaseOf(t, db, ids[0]); h != "gw-b" || !lu.IsZero() {
				t.Errorf("without an instance row: held by %q until %v, want a lapsed (zero) lease", h, lu)
			}
		})
	}
}

// TestInstanceLeaseDue: the sweeper's Due finds a consumed request without
// an outcome once its effective lease lapsed: its instance's for a marked
// request, its own for a concrete one (an older binary's).
func TestInstanceLeaseDue(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			marked := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1)[0]
			concrete := createHeld(t, db, "gw-old", t0.Add(3*time.Minute), 2)[0]
			for _, id := range []approval.ID{marked, concrete} {
				if _, err := db.UpdateRequest(ctx, id, "toolgate", func(r *approval.Request) error {
					r.State, r.DecidedBy, r.DecidedAt, r.ConsumedAt = approval.StateConsumed, "bob", t0.Add(time.Second), t0.Add(2*time.Second)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			mustRenew(t, db, "gw-a", []approval.ID{marked}, t0.Add(5*time.Minute), marked)
			for _, c := range []struct {
				now  time.Duration
				want []approval.ID
			}{
				{2 * time.Minute, nil},
				{4 * time.Minute, []approval.ID{concrete}},
				{6 * time.Minute, []approval.ID{concrete, marked}},
			} {
				got, err := db.Due(ctx, t0.Add(c.now), 0)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("Due(t0+%v) = %v, want %v", c.now, got, c.want)
				}
			}
			mustRenew(t, db, "gw-a", []approval.ID{marked}, t0.Add(10*time.Minute), marked)
			if got, err := db.Due(ctx, t0.Add(6*time.Minute), 0); err != nil || !slices.Equal(got, []approval.ID{concrete}) {
				t.Errorf("Due after the holder renewed = %v, %v; want [%s]", got, err, concrete)
			}
		})
	}
}

// TestPruneEndedInstanceLeases: Prune deletes the lease rows of instances
// whose lease ended a day ago (a new instance id per process start would
// pile them up) and keeps the others; a request marked for a pruned
// instance reads as lapsed, as it did before.
func TestPruneEndedInstanceLeases(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			gone := createHeld(t, db, "gw-gone", t0.Add(time.Minute), 1)
			live := createHeld(t, db, "gw-live", t0.Add(time.Minute), 2)
			mustRenew(t, db, "gw-gone", gone, t0.Add(time.Minute), gone...)
			mustRenew(t, db, "gw-live", live, t0.Add(24*time.Hour), live...)
			if _, err := db.Prune(ctx, store.Retention{}, t0.Add(25*time.Hour)); err != nil {
				t.Fatal(err)
			}
			rows, err := db.sql.QueryContext(ctx, `SELECT instance FROM instance_leases ORDER BY instance`)
			names, err := collect(rows, err, func(rows *sql.Rows) (string, error) {
				var s string
				return s, rows.Scan(&s)
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names, []string{"gw-live"}) {
				t.Errorf("instance leases after Prune: %v, want [gw-live]", names)
			}
			if h, lu := leaseOf(t, db, gone[0]); h != "gw-gone" || !lu.IsZero() {
				t.Errorf("request of a pruned instance: held by %q until %v, want a lapsed lease", h, lu)
			}
		})
	}
}

// TestInstanceLeaseUnmarkedAfterPruneStaysDue: a consumed request marked
// for an instance whose lease row Prune deleted (the instance died a day
// ago) is due; when that instance renews again (it was stalled for a day:
// a suspended VM, a store out of reach) without naming it, the request
// gets a concrete lease again: one that has lapsed, not none, so the sweeper
// still finds it and records its outcome unknown instead of leaving it
// consumed without an outcome forever.
func TestInstanceLeaseUnmarkedAfterPruneStaysDue(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			x := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1)[0]
			if _, err := db.UpdateRequest(ctx, x, "toolgate", func(r *approval.Request) error {
				r.State, r.DecidedBy, r.DecidedAt, r.ConsumedAt = approval.StateConsumed, "bob", t0.Add(time.Second), t0.Add(2*time.Second)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			mustRenew(t, db, "gw-a", []approval.ID{x}, t0.Add(time.Minute), x)
			now := t0.Add(25 * time.Hour)
			if _, err := db.Prune(ctx, store.Retention{}, now); err != nil {
				t.Fatal(err)
			}
			if got, err := db.Due(ctx, now, 0); err != nil || !slices.Equal(got, []approval.ID{x}) {
				t.Fatalf("Due after the instance's row was pruned = %v, %v; want [%s]", got, err, x)
			}
			// The instance comes back holding another call.
			y := createHeld(t, db, "gw-a", now.Add(time.Minute), 2)[0]
			mustRenew(t, db, "gw-a", []approval.ID{y}, now.Add(time.Minute), y)
			if raw := rawLease(t, db, x); raw == leaseMarker {
				t.Fatalf("a request the instance no longer names kept the marker")
			}
			if got, err := db.Due(ctx, now, 0); err != nil || !slices.Contains(got, x) {
				t.Errorf("Due after the same instance id renewed without it = %v, %v; want %s in it", got, err, x)
			}
			r, err := db.UpdateRequest(ctx, x, "toolgate", func(r *approval.Request) error { return r.Sweep(now) })
			if err != nil || r.DispatchOutcome != approval.OutcomeUnknown {
				t.Errorf("Sweep: outcome %q, %v; want unknown", r.DispatchOutcome, err)
			}
		})
	}
}
