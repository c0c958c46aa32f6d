package gate

import (
	"fmt"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestRenewalWakesOnlyTheMissing: renewOnce finds the ids the store did
// not renew by walking its answer beside the ids it asked for (the answer
// keeps their order: store.Store.RenewLeases), and wakes the held calls of
// those only: here a request another instance took over and an id the
// store does not know, between and after requests still held. Fails when
// the walk or the store's order is wrong (a held request's call is woken,
// or a missing one's is not).
func TestRenewalWakesOnlyTheMissing(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	g := New(db, pol, &Options{})
	now := time.Now()
	var ids []approval.ID
	for i := range 4 {
		r := approval.Request{ID: approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012x", i+1)), State: approval.StatePending,
			Server: "fs", Tool: "write", Arguments: []byte(`{}`), ArgumentsHash: "sha256:00", RequestedBy: "agent",
			CreatedAt: now, ExpiresAt: now.Add(time.Hour), RequiredApprovals: 1}
		holder := g.instance
		if i == 1 {
			holder = "gw-other" // taken over
		}
		r.Renew(holder, now.Add(time.Minute))
		if err := db.CreateRequest(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	ids = append(ids, approval.ID("01900000-0000-7000-8000-0000000000ff")) // unknown to the store
	subs := make([]*wakeup, len(ids))
	for i, id := range ids {
		g.leases.hold(id, false)
		w, cancel := g.hub.subscribe(string(id))
		t.Cleanup(cancel)
		subs[i] = w
	}
	g.renewOnce(t.Context())
	for i, w := range subs {
		woken := false
		select {
		case <-w.C:
			woken = true
		default:
		}
		if want := i == 1 || i == len(ids)-1; woken != want {
			t.Errorf("%s: woken %v, want %v", ids[i], woken, want)
		}
	}
}

// TestIdleRenewalSkipsTheStore: a process that holds no lease does not
// write to the store every Lease/3 (issue 13: the idle process's 5 s
// transaction mapped its code back after each release of the executable's
// pages). The first renewal goes to the store, and so does every renewal
// while a lease is held, the one after the last lease is dropped (it
// unmarks the requests marked for this instance) and every one after a
// failed renewal; the others are skipped.
func TestIdleRenewalSkipsTheStore(t *testing.T) {
	f := newFaultyFixture(t, time.Minute, nil)
	g := f.gate
	now := time.Now()
	r := approval.Request{ID: approval.ID("01900000-0000-7000-8000-000000000001"), State: approval.StatePending,
		Server: "fs", Tool: "write", Arguments: []byte(`{}`), ArgumentsHash: "sha256:00", RequestedBy: "agent",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), RequiredApprovals: 1}
	r.Renew(g.instance, now.Add(time.Minute))
	if err := f.db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	step := func(what string, want int) {
		t.Helper()
		g.renewOnce(t.Context())
		if got := f.store.count("RenewLeases"); got != want {
			t.Fatalf("%s: %d renewals reached the store, want %d", what, got, want)
		}
	}
	step("first renewal, nothing held", 1)
	step("nothing held since a renewal of nothing", 1)
	step("still nothing held", 1)
	m := g.leases.hold(r.ID, false)
	step("a lease held", 2)
	step("the lease still held", 3)
	g.leases.unhold(r.ID, m)
	step("the renewal after the last lease was dropped", 4)
	step("nothing held since", 4)

	f.store.down.Store(true)
	m = g.leases.hold(r.ID, false)
	step("a lease held, the store down", 5)
	g.leases.unhold(r.ID, m)
	step("nothing held after a failed renewal", 6)
	step("nothing held after a failed renewal of nothing", 7)
	f.store.down.Store(false)
	step("the store back", 8)
	step("nothing held since a renewal of nothing", 8)
}
