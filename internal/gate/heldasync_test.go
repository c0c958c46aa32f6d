package gate

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"

	"go.uber.org/goleak"
)

// Tests of the wait without a goroutine (heldasync.go), called through
// AdmitOrHold and WaitHoldFunc as the gateway's parked calls call it.

// readHook is a store whose next GetRequest runs a hook: before (the
// read then sees what the hook did) or after the read (the read returns
// what was stored before it).
type readHook struct {
	store.Store
	mu            sync.Mutex
	before, after func(id approval.ID)
}

func (s *readHook) arm(before, after func(id approval.ID)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before, s.after = before, after
}

func (s *readHook) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	s.mu.Lock()
	before, after := s.before, s.after
	s.before, s.after = nil, nil
	s.mu.Unlock()
	if before != nil {
		before(id)
	}
	r, err := s.Store.GetRequest(ctx, id)
	if after != nil {
		after(id)
	}
	return r, err
}

// holdOnEvents admits c on g, which must hold it, and waits for it with
// WaitHoldFunc; answers arrive on the channel returned (buffered: a
// second answer would be seen). prep, if set, changes the lent call
// before the wait starts.
func holdOnEvents(t *testing.T, ctx context.Context, g *Gate, c Call, prep func(*Call)) (approval.ID, <-chan *Admission) {
	t.Helper()
	cp := new(Call)
	*cp = c
	adm := new(Admission)
	hctx, held := g.AdmitOrHold(ctx, cp, adm)
	if !held {
		t.Fatalf("call not held: %+v", adm)
	}
	hold := adm.TakeHold()
	if prep != nil {
		prep(cp)
	}
	ch := make(chan *Admission, 4)
	g.WaitHoldFunc(hctx, hold, func(a *Admission) { ch <- a })
	return hold.h.r.id, ch
}

func recvHeld(t *testing.T, ch <-chan *Admission) *Admission {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("the held call was never answered")
		return nil
	}
}

// waitNoSteps waits until no goroutine runs a step of a wait without a
// goroutine (asyncHold.run), so that an answer still to come would have
// come.
func waitNoSteps(t *testing.T) {
	t.Helper()
	for range 2000 {
		buf := make([]byte, 1<<20)
		if !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*asyncHold).run")) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("a step of a held call's wait never ended")
}

// A wake-up that arrives while a step reads the store (after it ended its
// old subscription and made a new one) is not lost: here the approval
// lands during the read, which returns the row as it was before (pending);
// the wake-up of the new subscription runs another step, which takes the
// decision. A step that ran once per start (run without its loop), or a
// subscription made after the read, would leave the call held until its
// expiry.
func TestEventWaitKeepsAWakeDuringItsRead(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		hs := &readHook{Store: db}
		g := New(hs, pol, &Options{})
		id, ch := holdOnEvents(t, t.Context(), g, writeCall("/wake-in-read"), nil)
		reviewed := make(chan error, 1)
		hs.arm(nil, func(id approval.ID) {
			_, err := g.Review(context.Background(), id, alice, approval.VerdictApprove, "ok", "")
			reviewed <- err
		})
		g.Wake(id) // a wake-up without a row: the step reads the store
		if err := <-reviewed; err != nil {
			t.Fatal(err)
		}
		a := recvHeld(t, ch)
		if !a.Allowed || a.ApprovalID != id {
			t.Fatalf("answer %+v, want the approved call allowed", a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
	})
}

// A deadline (MaxHold) and a decision arriving together decide the call
// once: the deadline's step is reading the store when the approval
// lands and wakes the call; the read sees the approval and the call runs
// on it, and the wake-up that came meanwhile starts no second step that
// would answer it again. With a step started per event (kick without its
// running check) the call is answered twice.
func TestEventWaitDeadlineAndDecisionDecideOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		hs := &readHook{Store: db}
		g := New(hs, pol, &Options{})
		entered, release := make(chan approval.ID, 1), make(chan struct{})
		// The deadline is due as soon as the wait starts: its step reads,
		// and its read waits for release.
		id, ch := holdOnEvents(t, t.Context(), g, writeCall("/together"), func(c *Call) {
			c.MaxHold = time.Nanosecond
			hs.arm(func(id approval.ID) {
				entered <- id
				<-release
			}, nil)
		})
		if got := <-entered; got != id {
			t.Fatalf("read %s, want %s", got, id)
		}
		if _, err := g.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		close(release)
		a := recvHeld(t, ch)
		if !a.Allowed || a.ApprovalID != id {
			t.Fatalf("answer %+v, want the approved call allowed", a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		waitNoSteps(t)
		if n := len(ch); n != 0 {
			t.Fatalf("%d more answers to one held call, want none", n)
		}
		if r, err := db.GetRequest(t.Context(), id); err != nil || r.State != approval.StateConsumed {
			t.Fatalf("request %s (%v), want consumed once", r.State, err)
		}
	})
}

// The caller's cancellation while a decision made here holds the call
// (hub.claim: its transaction may be consuming the request for it) waits
// for that decision, then answers once: here the decision consumed
// nothing (released unused), so the call is cancelled and its request
// with it. Without the watch on the call's context (context.AfterFunc in
// holdEvents) the cancellation is never noticed and the call stays held.
func TestEventWaitCancelWhileADecisionHoldsIt(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		g := New(db, pol, &Options{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		id, ch := holdOnEvents(t, ctx, g, writeCall("/cancel-claimed"), nil)
		release := claimOffer(t, g, id)
		cancel()
		// The cancel's step waits in endHold for the decision's claim.
		for i := 0; ; i++ {
			buf := make([]byte, 1<<20)
			if bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*Gate).endHold")) {
				break
			}
			if i == 2000 {
				t.Fatal("the cancellation was never acted on")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if n := len(ch); n != 0 {
			t.Fatal("answered while a decision held the call")
		}
		release()
		a := recvHeld(t, ch)
		if a.Allowed || a.ApprovalID != id {
			t.Fatalf("answer %+v, want the cancelled call refused", a)
		}
		waitNoSteps(t)
		if n := len(ch); n != 0 {
			t.Fatalf("%d more answers to one held call, want none", n)
		}
		if r, err := db.GetRequest(t.Context(), id); err != nil || r.State != approval.StateCancelled {
			t.Fatalf("request %s (%v), want cancelled", r.State, err)
		}
	})
}

// Shutdown drains the waits without goroutines: the gate stopping and
// the callers' contexts ending (the gateway's Close) answer every held
// call once, and nothing of them is left: no subscription, no offer, no
// lease, no goroutine. A step that ended without its subscription's
// unsubscribe would leave the hub's list behind.
func TestEventWaitShutdownDrains(t *testing.T) {
	db := sqlitetest.Open(t)
	ignore := goleak.IgnoreCurrent()
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Hour))
	g := New(db, pol, &Options{})
	ctx, cancel := context.WithCancel(t.Context())
	const n = 20
	chans := make([]<-chan *Admission, 0, n)
	for i := range n {
		_, ch := holdOnEvents(t, ctx, g, writeCall(fmt.Sprintf("/drain-%d", i)), nil)
		chans = append(chans, ch)
	}
	g.Stop()
	cancel()
	for _, ch := range chans {
		if a := recvHeld(t, ch); a.Allowed {
			t.Fatalf("a call allowed at shutdown: %+v", a)
		}
	}
	waitNoSteps(t)
	for _, ch := range chans {
		if len(ch) != 0 {
			t.Fatal("a held call answered twice at shutdown")
		}
	}
	g.hub.mu.Lock()
	subs, offered := len(g.hub.subs), len(g.hub.held)
	g.hub.mu.Unlock()
	if subs != 0 || offered != 0 {
		t.Fatalf("after shutdown: %d subscriptions, %d offers left, want none", subs, offered)
	}
	if ids := g.leases.ids(); len(ids) != 0 {
		t.Fatalf("after shutdown: %d leases held, want none", len(ids))
	}
	rs, _, err := db.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
	if err != nil || len(rs) != n {
		t.Fatalf("%d requests pending after shutdown (%v), want %d (left for an identical re-send)", len(rs), err, n)
	}
	goleak.VerifyNone(t, ignore)
}

// A decision that lands between the admission's read ahead and the start
// of the wait (its subscription already woken, with the decided row) is
// taken when the wait starts: the call runs on it at once. A wait that
// only asked the woken subscription to call back (notifyFunc's false
// ignored) would never hear of it.
func TestEventWaitTakesADecisionBeforeItStarts(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		g := New(db, pol, &Options{})
		id, ch := holdOnEvents(t, t.Context(), g, writeCall("/early"), func(c *Call) {
			rs := waitPending(t, db, 1)
			if _, err := g.Review(t.Context(), rs[0].ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
				t.Fatal(err)
			}
		})
		a := recvHeld(t, ch)
		if !a.Allowed || a.ApprovalID != id {
			t.Fatalf("answer %+v, want the approved call allowed", a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
	})
}
