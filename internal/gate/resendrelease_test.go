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

// releaseHook is a store whose next request write can be held back
// (block: the write waits until open is closed) or failed (fail), and
// which reports when the write after that returned (looked).
type releaseHook struct {
	store.Store
	mu      sync.Mutex
	block   chan struct{} // the next write waits for it to close; entered is closed then
	entered chan struct{}
	fail    error         // the next write fails with it
	looked  chan struct{} // closed when the write after the held back one returned
	armed   bool          // looked is armed: the next write that returns closes it
}

func (s *releaseHook) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	s.mu.Lock()
	block, entered, fail := s.block, s.entered, s.fail
	s.block, s.entered, s.fail = nil, nil, nil
	looked, armed := s.looked, s.armed && block == nil && fail == nil
	if armed {
		s.armed = false
	}
	s.mu.Unlock()
	switch {
	case block != nil:
		close(entered)
		<-block
	case fail != nil:
		return approval.Request{}, fail
	}
	r, err := s.Store.UpdateRequest(ctx, id, actor, fn)
	if armed {
		close(looked)
	}
	return r, err
}

// untilNearDeadline returns a channel that fires shortly before the test's
// deadline (a minute from now without one): a wait that is over in
// milliseconds when the code is right fails with its own message rather
// than hanging until the test binary is killed.
func untilNearDeadline(t *testing.T) <-chan time.Time {
	t.Helper()
	d, ok := t.Deadline()
	if !ok {
		return time.After(time.Minute)
	}
	return time.After(time.Until(d) * 9 / 10)
}

// TestResendTakesOverItsOwnReleasedLease (closing21): a call whose caller
// went away leaves its request pending and releases its lease so that an
// identical re-send takes it over at once. A re-send to the same instance
// that looked while the release was still being written (a renewal batch
// in flight, a slow store), or after it could not be written, found the
// instance's own lease running and waited for it to lapse (up to one
// lease, 15 s by default; an hour here). It now waits for the release in
// flight, and takes over a lease of its own instance that no call of the
// process holds. Two re-sends never both hold it. On both stores.
func TestResendTakesOverItsOwnReleasedLease(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight bool // the dropped call's release is held back while a re-send looks; else it fails
	}{
		{"release in flight", true},
		{"release failed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, db *sqlstore.DB) {
				t.Helper()
				pol := &swappable{}
				pol.p.Store(testPolicy(time.Hour))
				hs := &releaseHook{Store: db}
				g := New(hs, pol, &Options{Lease: time.Hour})
				watch(t, db, g)
				ctx, cancel := context.WithCancelCause(t.Context())
				dropped := admitAsync(ctx, g, writeCall("/own-lease"))
				r := waitPending(t, db, 1)[0]
				open := make(chan struct{})
				hs.mu.Lock()
				if tc.inFlight {
					hs.block, hs.entered = open, make(chan struct{})
				} else {
					hs.fail = errors.New("store unreachable")
				}
				entered := hs.entered
				hs.looked, hs.armed = make(chan struct{}), true
				hs.mu.Unlock()
				fail := untilNearDeadline(t)
				wait := func(ch <-chan struct{}, what string) {
					t.Helper()
					select {
					case <-ch:
					case <-fail:
						t.Fatalf("never saw %s", what)
					}
				}
				cancel(errors.New("client connection dropped"))
				if tc.inFlight {
					wait(entered, "the dropped call's release written")
				} else if a := recv(t, dropped); a.Allowed {
					t.Fatal("dropped call was allowed")
				}
				// Two identical re-sends: one takes the request over, the
				// other (a second live call) gets a request of its own.
				heldOn := make(chan approval.ID, 2)
				var resends []<-chan Admission
				for range 2 {
					c := writeCall("/own-lease")
					c.OnHold = func(r approval.Request) { heldOn <- r.ID }
					resends = append(resends, admitAsync(t.Context(), g, c))
				}
				wait(hs.looked, "a re-send look at the request")
				close(open)
				if tc.inFlight {
					if a := recv(t, dropped); a.Allowed {
						t.Fatal("dropped call was allowed")
					}
				}
				var ids []approval.ID
				for range 2 {
					select {
					case id := <-heldOn:
						ids = append(ids, id)
					case <-fail:
						t.Fatalf("re-sends held on %v, want two: a re-send still waits for the lease of its own instance, which the dropped call released (or could not)", ids)
					}
				}
				if (ids[0] == r.ID) == (ids[1] == r.ID) {
					t.Fatalf("re-sends held on %v, want exactly one on %s", ids, r.ID)
				}
				if got, err := db.GetRequest(t.Context(), r.ID); err != nil || got.HeldBy != g.instance || got.LeaseLapsed(time.Now()) {
					t.Fatalf("request %s held by %q until %v (%v), want by %s", r.ID, got.HeldBy, got.LeaseUntil, err, g.instance)
				}
				for _, id := range ids {
					if _, err := g.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
						t.Fatal(err)
					}
				}
				for _, ch := range resends {
					a := recv(t, ch)
					if !a.Allowed {
						t.Fatalf("re-send after approval: %+v", a)
					}
					a.Finish(t.Context(), approval.OutcomeOK)
				}
				if ids := g.leases.ids(); len(ids) != 0 {
					t.Fatalf("lease marks left: %v", ids)
				}
			})
		})
	}
}
