package gate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// firstReadHook is a store that closes read when request id is first read
// (GetRequest): a take-over waiting for another instance's lease reads
// the request before it waits.
type firstReadHook struct {
	store.Store
	id   approval.ID
	once sync.Once
	read chan struct{}
}

func (s *firstReadHook) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	r, err := s.Store.GetRequest(ctx, id)
	if id == s.id {
		s.once.Do(func() { close(s.read) })
	}
	return r, err
}

// watchTouched wires db's watch to g as serve does (Wake, WakeAll,
// Changed, Touched), until the test ends.
func watchTouched(t *testing.T, db *sqlstore.DB, g *Gate) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.WatchLogTouched(ctx, func(id approval.ID) {
			if id == "" {
				g.WakeAll()
			} else {
				g.Wake(id)
			}
		}, g.Changed, g.Touched)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestTakeOverWokenByAnotherInstancesRelease (fixes25): an identical
// re-send on instance y whose request instance x holds waits for x's
// lease (takeOver). When x's call goes away, x releases the lease at
// once, but y waited on a timer only: until the lease would have ended
// (one lease, 15 s by default; an hour here). y now hears of the release
// through the store's watch (on Postgres a notification of the release,
// on SQLite the watch's poll of the commits: Touched) and takes the
// request over at once; the timer stays as the fallback. Two gates on
// one store, on both stores.
func TestTakeOverWokenByAnotherInstancesRelease(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(2 * time.Hour))
		x := New(db, pol, &Options{Lease: time.Hour, Instance: "gw-x"})
		watchTouched(t, db, x)
		fail := untilNearDeadline(t)
		ctx, drop := context.WithCancelCause(t.Context())
		dropped := admitHeld(ctx, t, x, writeCall("/released-elsewhere"))
		r := waitPending(t, db, 1)[0]

		hook := &firstReadHook{Store: db, id: r.ID, read: make(chan struct{})}
		y := New(hook, pol, &Options{Lease: time.Hour, Instance: "gw-y"})
		watchTouched(t, db, y)
		c := writeCall("/released-elsewhere")
		heldOn := make(chan approval.ID, 1)
		c.OnHold = func(r approval.Request) { heldOn <- r.ID }
		resend := admitAsync(t.Context(), y, c)
		select {
		case <-hook.read: // y found x's lease running and waits for it
		case a := <-resend:
			t.Fatalf("the re-send was answered without waiting for x's lease: %+v", a)
		case <-fail:
			t.Fatal("the re-send never looked at x's lease")
		}

		drop(errors.New("client connection dropped")) // not an explicit cancel: x releases its lease
		if a := recv(t, dropped); a.Allowed {
			t.Fatalf("dropped call answered %+v", a)
		}
		select {
		case id := <-heldOn:
			if id != r.ID {
				t.Fatalf("the re-send is held on %s, want %s taken over", id, r.ID)
			}
		case a := <-resend:
			t.Fatalf("the re-send was answered %+v, want held on %s", a, r.ID)
		case <-fail:
			cur, _ := db.GetRequest(t.Context(), r.ID)
			t.Fatalf("x released its lease on %s (held by %q until %v), but the re-send on y was not woken: it waits for the lease's end", r.ID, cur.HeldBy, cur.LeaseUntil)
		}
		if _, err := x.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a := recv(t, resend)
		if !a.Allowed || a.ApprovalID != r.ID {
			t.Fatalf("the re-send after approval: %+v, want allowed on %s", a, r.ID)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
	})
}
