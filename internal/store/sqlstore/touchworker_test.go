package sqlstore

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestWatchPollsWhileTouchedRuns (list28): a touched that takes long (the
// gate's batched read of 10,000 waited leases, ≈ 30 ms) does not hold up
// the watch: while one is blocked, a decision committed by another process
// is still reported as changed(id) (the wake-up of the call waiting on
// it). The commits seen meanwhile ask for one more touched after the
// blocked one returns, never two at once.
func TestWatchPollsWhileTouchedRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.db")
	a := openTest(t, Config{Driver: DriverSQLite, Path: path, WatchInterval: 5 * time.Millisecond})
	b := openTest(t, sqliteConfig(path))

	var (
		changed  = make(chan approval.ID, 64)
		entered  = make(chan int, 64) // the number of each touched call, as it begins
		release  = make(chan struct{})
		calls    atomic.Int32
		inFlight atomic.Int32
		overlap  atomic.Bool
	)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.WatchLogTouched(ctx, func(id approval.ID) { changed <- id }, func() {}, func() {
			if inFlight.Add(1) > 1 {
				overlap.Store(true)
			}
			defer inFlight.Add(-1)
			n := int(calls.Add(1))
			entered <- n
			if n == 1 {
				<-release // the first touched blocks until the test lets it go
			}
		})
	}()
	stopped := false
	defer func() {
		if !stopped {
			close(release)
		}
		cancel()
		<-done
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatalf("no touched %s", what)
		}
	}
	waitChanged := func(want approval.ID, what string) {
		t.Helper()
		for {
			select {
			case id := <-changed:
				if id == want {
					return
				}
			case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
				t.Fatalf("no changed(%q) %s: the watch did not poll while touched ran", want, what)
			}
		}
	}
	waitChanged("", "after the first reading")

	// Another process creates a request: the poll that sees it asks for
	// a touched, which blocks.
	if err := b.CreateRequest(t.Context(), pendingRequest(testID(1))); err != nil {
		t.Fatal(err)
	}
	wait("after another process's commit")

	// While it is blocked, another process decides: the watch still
	// reports it.
	if _, err := b.UpdateRequest(t.Context(), testID(1), "bob", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	waitChanged(testID(1), "while a touched was blocked")
	if got := inFlight.Load(); got != 1 {
		t.Fatalf("%d touched in flight when the decision was reported, want the blocked one", got)
	}

	// The decision's commit was seen while the first touched ran: one
	// more follows it (its read begins after the commit).
	close(release)
	stopped = true
	wait("after the blocked one returned, for the commit seen meanwhile")
	if overlap.Load() {
		t.Error("two touched ran at once")
	}
}
