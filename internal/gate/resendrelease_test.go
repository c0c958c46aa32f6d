package gate

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// releaseHook is a store whose next request write can be held back
// (block: the write waits until it is closed; entered is closed then) or
// failed (fail), and which reports when the write after that returned
// (looked).
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

// pauseAtLog is a log handler that holds back the first record with
// message msg until resume is closed, reached being closed then; it
// drops every record.
type pauseAtLog struct {
	msg             string
	reached, resume chan struct{}
	once            *sync.Once
}

func newPauseAtLog(msg string) *pauseAtLog {
	return &pauseAtLog{msg: msg, reached: make(chan struct{}), resume: make(chan struct{}), once: new(sync.Once)}
}

func (*pauseAtLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *pauseAtLog) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h *pauseAtLog) WithGroup(string) slog.Handler          { return h }
func (h *pauseAtLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() {
			close(h.reached)
			<-h.resume
		})
	}
	return nil
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

// admitHeld admits c on g under ctx and returns its admission's channel
// once c's wait for a decision started (its first keep-alive is sent
// then): a call cancelled after that is abandoned by its wait, not during
// its creation. It fails t if c is answered instead.
func admitHeld(ctx context.Context, t *testing.T, g *Gate, c Call) <-chan Admission {
	t.Helper()
	waiting := make(chan struct{})
	var once sync.Once
	c.KeepAlive = func(context.Context, string) { once.Do(func() { close(waiting) }) }
	ch := admitAsync(ctx, g, c)
	select {
	case <-waiting:
	case a := <-ch:
		t.Fatalf("not held: %+v", a)
	}
	return ch
}

// resendHeldOn admits an identical call of path on g and fails t unless
// it is held on want (it took that request over) before fail fires. It
// returns the re-send's admission channel.
func resendHeldOn(t *testing.T, g *Gate, path string, want approval.ID, fail <-chan time.Time) <-chan Admission {
	t.Helper()
	resend := writeCall(path)
	heldOn := make(chan approval.ID, 1)
	resend.OnHold = func(r approval.Request) { heldOn <- r.ID }
	ch := admitAsync(t.Context(), g, resend)
	select {
	case id := <-heldOn:
		if id != want {
			t.Fatalf("re-send held on %s, want the abandoned %s", id, want)
		}
	case <-fail:
		t.Fatalf("the re-send never took %s over", want)
	}
	return ch
}

// TestDroppedHoldLeavesTheResendsLeaseMark (closing22): the lease marks of
// an abandoned hold were dropped twice, once when its lease was released
// (releaseHold) and once more after its wait (afterHold). An identical
// re-send that took the request over between the two lost its mark to the
// second drop: its lease was no longer renewed while it still waited, and
// a second re-send could take the request over too (two live identical
// calls on one approval). Each hold now drops only the mark it made. The
// dropped call is held back between the two at its log line "caller gone
// while held". On both stores.
func TestDroppedHoldLeavesTheResendsLeaseMark(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		pause := newPauseAtLog("caller gone while held; approval stays open for an identical re-send")
		g := New(db, pol, &Options{Lease: time.Hour, Logger: slog.New(pause)})
		watch(t, db, g)
		fail := untilNearDeadline(t)
		ctx, cancel := context.WithCancelCause(t.Context())
		dropped := admitHeld(ctx, t, g, writeCall("/dropped-twice"))
		r := waitPending(t, db, 1)[0]
		cancel(errors.New("client connection dropped")) // not an explicit cancel: the request stays pending
		select {
		case <-pause.reached: // its lease released, its wait not over
		case <-fail:
			t.Fatal("the dropped call never released its lease")
		}

		took := resendHeldOn(t, g, "/dropped-twice", r.ID, fail)
		close(pause.resume)
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
				dropped := admitHeld(ctx, t, g, writeCall("/own-lease"))
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
