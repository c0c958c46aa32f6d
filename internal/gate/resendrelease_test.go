package gate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// releaseHook is a store whose next request write can be held back
// before it runs (block: the write waits until it is closed; entered is
// closed then) or after it committed (after: the write returns once it is
// closed; entered is closed when it committed), or failed (fail), and
// which reports when the write after that one returned (looked, when
// armed).
type releaseHook struct {
	store.Store
	mu      sync.Mutex
	block   chan struct{} // the next write waits for it to close before it runs
	after   chan struct{} // the next write returns once it is closed, after it committed
	entered chan struct{} // closed when the write held back by block or after got there
	fail    error         // the next write fails with it
	looked  chan struct{} // closed when the write after the held back one returned
	armed   bool          // looked is armed: the next write that returns closes it
}

func (s *releaseHook) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	s.mu.Lock()
	block, after, entered, fail := s.block, s.after, s.entered, s.fail
	s.block, s.after, s.entered, s.fail = nil, nil, nil, nil
	looked, armed := s.looked, s.armed && block == nil && after == nil && fail == nil
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
	if after != nil {
		close(entered)
		<-after
	}
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

// heldWaiting returns c with a keep-alive that closes the channel it
// returns as c's wait starts (the first keep-alive is sent then): a call
// cancelled after that is abandoned by its wait, not during its creation.
func heldWaiting(c Call) (Call, <-chan struct{}) {
	waiting := make(chan struct{})
	var once sync.Once
	c.KeepAlive = func(context.Context, string) { once.Do(func() { close(waiting) }) }
	return c, waiting
}

// TestDroppedHoldLeavesTheResendsLeaseMark (closing22): the lease marks of
// an abandoned hold were dropped twice, once when its lease was released
// (releaseHold) and once more after its wait (afterHold). An identical
// re-send that took the request over between the two lost its mark to the
// second drop: its lease was no longer renewed while it still waited, and
// a second re-send could take the request over too (two live identical
// calls on one approval). Each hold now drops only the mark it made. On
// both stores.
func TestDroppedHoldLeavesTheResendsLeaseMark(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		hs := &releaseHook{Store: db}
		g := New(hs, pol, &Options{Lease: time.Hour})
		watch(t, db, g)
		fail := untilNearDeadline(t)
		wait := func(ch <-chan struct{}, what string) {
			t.Helper()
			select {
			case <-ch:
			case <-fail:
				t.Fatalf("never saw %s", what)
			}
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		first, waiting := heldWaiting(writeCall("/dropped-twice"))
		dropped := admitAsync(ctx, g, first)
		select {
		case <-waiting:
		case a := <-dropped:
			t.Fatalf("not held: %+v", a)
		}
		r := waitPending(t, db, 1)[0]
		// The dropped call's release is written, then held back before
		// its hold ends.
		released, resume := make(chan struct{}), make(chan struct{})
		hs.mu.Lock()
		hs.after, hs.entered = resume, released
		hs.mu.Unlock()
		cancel(errors.New("client connection dropped")) // not an explicit cancel: the request stays pending
		wait(released, "the dropped call's release written")

		resend := writeCall("/dropped-twice")
		heldOn := make(chan approval.ID, 1)
		resend.OnHold = func(r approval.Request) { heldOn <- r.ID }
		took := admitAsync(t.Context(), g, resend)
		select {
		case id := <-heldOn:
			if id != r.ID {
				t.Fatalf("re-send held on %s, want the released %s", id, r.ID)
			}
		case <-fail:
			t.Fatal("the re-send never took the released request over")
		}
		close(resume)
		if a := recv(t, dropped); a.Allowed {
			t.Fatal("dropped call was allowed")
		}
		if !slices.Contains(g.leases.ids(), r.ID) {
			t.Fatalf("request %s, held by the re-send, is no longer renewed once the dropped call ended (lease marks %v): the dropped call dropped the re-send's mark", r.ID, g.leases.ids())
		}
		if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a := recv(t, took)
		if !a.Allowed || a.ApprovalID != r.ID {
			t.Fatalf("re-send after approval: %+v, want allowed on %s", a, r.ID)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		if ids := g.leases.ids(); len(ids) != 0 {
			t.Fatalf("lease marks left: %v", ids)
		}
	})
}
