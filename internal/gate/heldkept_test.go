package gate

import (
	"context"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore"
)

// TestHeldReadKeepsTheCompactRequest: a read of a held call's request that
// finds it still pending (a wake-up that changed nothing here) leaves the
// wait keeping the compact heldReq, not the whole Request with the display
// copy of its arguments; what the wait would end on from it (its deadline
// while the store cannot be read) is that request's id, state, rule and
// expiry. A read that ends the wait keeps the whole request.
func TestHeldReadKeepsTheCompactRequest(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		g := New(db, pol, &Options{Instance: "here"})
		ctx, cancel := context.WithCancel(t.Context())
		id, ch := holdOnEvents(t, ctx, g, writeCall("/kept"), nil)
		stored, err := db.GetRequest(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored.Arguments) == 0 {
			t.Fatal("the stored request has no display arguments: nothing to leave out")
		}

		st := newHeldRead(id, time.Now().Add(time.Hour), nil, false)
		if done, err := g.readHeld(t.Context(), st); done || err != nil {
			t.Fatalf("readHeld = %v, %v; want the wait to go on", done, err)
		}
		if st.last != nil {
			t.Errorf("a read that found the request pending kept the whole request (%d B of display arguments)", len(st.last.Arguments))
		}
		got := st.result()
		if got.ID != id || got.State != approval.StatePending || got.Rule != stored.Rule ||
			!got.ExpiresAt.Equal(stored.ExpiresAt) || len(got.Arguments) != 0 {
			t.Errorf("result %+v; want id %s, pending, rule %q, expiry %v and no display arguments", got, id, stored.Rule, stored.ExpiresAt)
		}

		// Decided: the read that ends the wait keeps the whole request.
		if _, err := g.Review(t.Context(), id, alice, approval.VerdictDeny, "no", ""); err != nil {
			t.Fatal(err)
		}
		st = newHeldRead(id, time.Now().Add(time.Hour), nil, false)
		if done, err := g.readHeld(t.Context(), st); !done || err != nil {
			t.Fatalf("readHeld after the denial = %v, %v; want done", done, err)
		}
		if st.last == nil || st.last.State != approval.StateDenied || len(st.last.Arguments) == 0 {
			t.Errorf("the read that ended the wait: %+v; want the whole denied request", st.last)
		}
		cancel()
		if a := recvHeld(t, ch); a.Allowed {
			t.Fatalf("answer %+v, want the denied call refused", a)
		}
		waitNoSteps(t)
	})
}
