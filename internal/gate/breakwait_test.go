package gate

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"

	"go.uber.org/goleak"
)

// Attacks on the held wait (branch breakwait): the wait on events
// (heldasync.go) and the wait on a goroutine (waitFor).

// steppedClock is the gate's clock (Options.Now) stepped back by back
// from the real one: an NTP correction of the wall clock while calls are
// held.
type steppedClock struct{ back atomic.Int64 }

func (c *steppedClock) now() time.Time {
	return time.Now().Add(-time.Duration(c.back.Load())) //nolint:forbidigo // the clock under test
}

// A wall clock stepped back while a call is held does not leave the call
// held past its MaxHold until its request expires: the deadline's timer
// fires when the clock said the deadline was due, the read finds it not
// yet due by the gate's clock, and the wait sets its timer again for the
// rest. Without that (the deadline's timer fired once, nothing else due)
// the call waits for its request's expiry (an hour here) and its caller
// gets no max-hold answer. Both waits: on events and on a goroutine.
func TestHeldDeadlineSurvivesAClockStepBack(t *testing.T) {
	for _, events := range []bool{true, false} {
		t.Run(fmt.Sprintf("events=%v", events), func(t *testing.T) {
			if !events && heldEventsInTests {
				t.Skip("Admit waits on events here (TOOLGATE_HELD_EVENTS=1)")
			}
			clk := &steppedClock{}
			pol := &swappable{}
			pol.p.Store(testPolicy(time.Hour))
			g := New(sqlitetest.Open(t), pol, &Options{Now: clk.now})
			c := writeCall("/stepped")
			c.MaxHold = 300 * time.Millisecond
			var ch <-chan *Admission
			if events {
				_, ch = holdOnEvents(t, t.Context(), g, c, nil)
			} else {
				ach := make(chan *Admission, 1)
				go func() { a := g.Admit(t.Context(), c); ach <- &a }()
				ch = ach
				waitSelecting(t, "(*Gate).waitFor")
			}
			clk.back.Store(int64(200 * time.Millisecond))
			a := recvHeld(t, ch)
			if a.Allowed || !a.Pending {
				t.Fatalf("answer %+v, want the max-hold pending answer", a)
			}
		})
	}
}

// waitSelecting waits until a goroutine with fn on its stack waits in a
// select (a wait on a goroutine, parked).
func waitSelecting(t *testing.T, fn string) {
	t.Helper()
	for range 2000 {
		buf := make([]byte, 1<<20)
		for _, gr := range bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n")) {
			if bytes.Contains(gr, []byte(fn)) && bytes.Contains(gr, []byte("[select")) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no goroutine waits in %s", fn)
}

// A burst of decisions at once, half made in this process (the wake-up
// carries the row) and half on another instance (this one learns of them
// only from the store's watch: a wake-up without a row), approvals and
// denials mixed: every call held on events is answered exactly once, an
// approved one allowed and consumed once, a denied one refused and never
// run. A lost wake-up leaves a call unanswered; a step run twice answers
// it twice.
func TestEventWaitBurstOfDecisions(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 60
	}
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		g := New(db, pol, &Options{Instance: "here", MaxPendingPerPrincipal: 10000})
		other := New(db, pol, &Options{Instance: "there"})
		watch(t, db, g)
		ids := make([]approval.ID, n)
		chans := make([]<-chan *Admission, n)
		for i := range n {
			ids[i], chans[i] = holdOnEvents(t, t.Context(), g, writeCall(fmt.Sprintf("/burst-%d", i)), nil)
		}
		start := make(chan struct{})
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i, id := range ids {
			by, verdict := g, approval.VerdictApprove
			if i%2 == 1 {
				by = other
			}
			if i%3 == 2 {
				verdict = approval.VerdictDeny
			}
			wg.Go(func() {
				<-start
				_, err := by.Review(context.Background(), id, alice, verdict, "burst", "")
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for i, ch := range chans {
			a := recvHeld(t, ch)
			want := i%3 != 2
			if a.Allowed != want || a.ApprovalID != ids[i] {
				t.Fatalf("call %d: answer %+v, want allowed=%v", i, a, want)
			}
			if a.Allowed {
				a.Finish(t.Context(), approval.OutcomeOK)
			}
		}
		waitNoSteps(t)
		for i, ch := range chans {
			if len(ch) != 0 {
				t.Fatalf("call %d answered twice", i)
			}
			r, err := db.GetRequest(t.Context(), ids[i])
			want := approval.StateConsumed
			if i%3 == 2 {
				want = approval.StateDenied
			}
			if err != nil || r.State != want {
				t.Fatalf("call %d: request %s (%v), want %s", i, r.State, err, want)
			}
		}
	})
}

// A decision made on another instance while this one cannot read the
// store: the wake-up (as the watch gives it, without a row) finds no row, the
// wait reads again on its backoff (a runtime timer, no goroutine) and
// answers nothing while the store stays down; once it is back the call
// runs on the recorded approval, once. Without the retry's callback
// (heldRead.onRetry) the retry timer's channel has no reader and the call
// stays held until its expiry.
func TestEventWaitReadsAgainAfterAStoreOutage(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		fs := newFaulty(db)
		g := New(fs, pol, &Options{Instance: "here"})
		other := New(db, pol, &Options{Instance: "there"})
		watch(t, db, g)
		id, ch := holdOnEvents(t, t.Context(), g, writeCall("/outage"), nil)
		fs.down.Store(true)
		if _, err := other.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		// The wake-up the watch gives (a NOTIFY on Postgres, the feed on
		// SQLite), given here too: in a busy suite the watch's connection
		// can take longer than this test waits (its safety poll is 5 s).
		g.Wake(id)
		// The wake's read and two retries failed: waited on the reads
		// themselves (a clock-bounded poll flaked under -race at load 16–26).
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		if !fs.waitCount(ctx, "GetRequest", 3) {
			t.Fatalf("the held call never read its request again (%d reads)", fs.count("GetRequest"))
		}
		if len(ch) != 0 {
			t.Fatalf("answered while the store was down: %+v", <-ch)
		}
		fs.down.Store(false)
		a := recvHeld(t, ch)
		if !a.Allowed || a.ApprovalID != id {
			t.Fatalf("answer %+v, want the approved call allowed", a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		waitNoSteps(t)
		if len(ch) != 0 {
			t.Fatal("answered twice")
		}
		if r, err := db.GetRequest(t.Context(), id); err != nil || r.State != approval.StateConsumed {
			t.Fatalf("request %s (%v), want consumed", r.State, err)
		}
	})
}

// Many calls held on events share one deadline (MaxHold up to the same
// instant), and as it comes their callers cancel and approvals land:
// each call is answered exactly once; a call allowed is allowed only on a
// recorded approval; nothing of the waits is left (subscriptions, offers,
// steps).
func TestEventWaitSharedDeadlineCancelAndDecision(t *testing.T) {
	const n = 100
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Hour))
	g := New(db, pol, &Options{MaxPendingPerPrincipal: 10000})
	ids := make([]approval.ID, n)
	chans := make([]<-chan *Admission, n)
	cancels := make([]context.CancelFunc, n)
	due := time.Now().Add(3 * time.Second) //nolint:forbidigo // the shared deadline
	for i := range n {
		ctx, cancel := context.WithCancel(t.Context())
		cancels[i] = cancel
		ids[i], chans[i] = holdOnEvents(t, ctx, g, writeCall(fmt.Sprintf("/shared-%d", i)), func(c *Call) {
			c.MaxHold = max(time.Until(due), time.Nanosecond) // already past if set up late
		})
	}
	t.Logf("set up %v before the deadline", time.Until(due))
	time.Sleep(time.Until(due) - 50*time.Millisecond) // not a timed assertion: the race with the deadline is the point
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if i%3 == 0 {
				cancels[i]()
			}
			_, _ = g.Review(context.Background(), ids[i], alice, approval.VerdictApprove, "race", "")
			if i%3 == 1 {
				cancels[i]()
			}
		})
	}
	wg.Wait()
	kinds := map[string]int{}
	for i, ch := range chans {
		a := recvHeld(t, ch)
		kinds[fmt.Sprintf("allowed=%v pending=%v", a.Allowed, a.Pending)]++
		if a.ApprovalID != ids[i] {
			t.Fatalf("call %d: answer %+v for another approval", i, a)
		}
		r, err := db.GetRequest(t.Context(), ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if a.Allowed != (r.State == approval.StateConsumed) {
			// Allowed only on a consume; a consume (here only for this
			// call, maybe in the decision's transaction) runs the call.
			t.Fatalf("call %d: allowed=%v on a request %s", i, a.Allowed, r.State)
		}
		if a.Allowed {
			a.Finish(t.Context(), approval.OutcomeOK)
		}
	}
	t.Logf("answers: %v", kinds)
	for _, c := range cancels {
		c()
	}
	waitNoSteps(t)
	for i, ch := range chans {
		if len(ch) != 0 {
			t.Fatalf("call %d answered twice", i)
		}
	}
	g.hub.mu.Lock()
	subs, offered := len(g.hub.subs), len(g.hub.held)
	g.hub.mu.Unlock()
	if subs != 0 || offered != 0 {
		t.Fatalf("%d subscriptions, %d offers left, want none", subs, offered)
	}
}

// Shutdown with many calls held on events while approvals land: the
// gate stopping and the callers' contexts ending (the gateway's Close)
// answer every call once, a call is allowed iff its request was consumed
// (a decision that consumed it for the call runs it: its record is
// there), and no goroutine or subscription is left.
func TestEventWaitShutdownAmidApprovals(t *testing.T) {
	n := 1000
	if testing.Short() || raceEnabled {
		n = 300
	}
	db := sqlitetest.Open(t)
	ignore := goleak.IgnoreCurrent()
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Hour))
	g := New(db, pol, &Options{MaxPendingPerPrincipal: 10000})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ids := make([]approval.ID, n)
	chans := make([]<-chan *Admission, n)
	for i := range n {
		ids[i], chans[i] = holdOnEvents(t, ctx, g, writeCall(fmt.Sprintf("/stop-%d", i)), nil)
	}
	var (
		wg       sync.WaitGroup
		reviewed atomic.Int64
		half     = make(chan struct{})
	)
	wg.Go(func() {
		// Stop once a third of the approvals are in: the rest race it.
		<-half
		g.Stop()
		cancel()
	})
	for i := range n {
		wg.Go(func() {
			_, _ = g.Review(context.Background(), ids[i], alice, approval.VerdictApprove, "stop", "")
			if reviewed.Add(1) == int64(n/3) {
				close(half)
			}
		})
	}
	wg.Wait()
	kinds := map[bool]int{}
	for i, ch := range chans {
		a := recvHeld(t, ch)
		kinds[a.Allowed]++
		r, err := db.GetRequest(t.Context(), ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if a.Allowed != (r.State == approval.StateConsumed) {
			t.Fatalf("call %d: allowed=%v on a request %s", i, a.Allowed, r.State)
		}
		if a.Allowed {
			a.Finish(context.Background(), approval.OutcomeOK)
		}
	}
	t.Logf("allowed: %v", kinds)
	waitNoSteps(t)
	for i, ch := range chans {
		if len(ch) != 0 {
			t.Fatalf("call %d answered twice", i)
		}
	}
	g.hub.mu.Lock()
	subs, offered := len(g.hub.subs), len(g.hub.held)
	g.hub.mu.Unlock()
	if subs != 0 || offered != 0 {
		t.Fatalf("after shutdown: %d subscriptions, %d offers left, want none", subs, offered)
	}
	goleak.VerifyNone(t, ignore)
}
