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
