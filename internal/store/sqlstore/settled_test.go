package sqlstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestSettledStates: Settled vouches only for a watch whose last poll
// succeeded within settledStale intervals; the generation moves with a
// poll that saw a commit or failed, not with one that saw nothing; a store
// without the SQLite watch's state (Postgres) never vouches.
func TestSettledStates(t *testing.T) {
	if _, ok := (&DB{}).Settled(); ok {
		t.Fatal("a DB without the watch's state (Postgres) vouches")
	}
	s := &settledState{base: time.Now().Add(-time.Hour), every: 250 * time.Millisecond}
	db := &DB{settled: s}
	if _, ok := db.Settled(); ok {
		t.Fatal("vouches before any poll")
	}
	s.okAt.Store(1) // a successful poll an hour ago
	if _, ok := db.Settled(); ok {
		t.Fatal("vouches an hour after the last successful poll: a stopped or stuck watch sees no commit")
	}
	s.polled(false, nil)
	g0, ok := db.Settled()
	if !ok {
		t.Fatal("does not vouch right after a successful poll")
	}
	s.polled(false, nil)
	if g, _ := db.Settled(); g != g0 {
		t.Fatalf("generation %d → %d after a poll that saw no commit", g0, g)
	}
	s.polled(true, nil)
	g1, _ := db.Settled()
	if g1 == g0 {
		t.Fatal("the generation did not move after a poll that saw a commit")
	}
	s.polled(false, errors.New("disk I/O error"))
	if g, _ := db.Settled(); g == g1 {
		t.Fatal("the generation did not move after a failed poll")
	}
}

// TestSettledFollowsTheWatch: with the SQLite watch running, Settled
// vouches once it polled, and its generation has moved by the time the
// watch reports another connection's commit.
func TestSettledFollowsTheWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.db")
	// An interval of a second: Settled vouches for 4 of them after a
	// successful poll, time enough for the first reading's feed and
	// callback under the race detector on a loaded machine.
	a := openTest(t, Config{Driver: DriverSQLite, Path: path, WatchInterval: time.Second})
	b := openTest(t, sqliteConfig(path))
	if _, ok := a.Settled(); ok {
		t.Fatal("vouches before the watch runs")
	}
	first := make(chan struct{}, 1)
	touched := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.WatchLogTouched(ctx, func(id approval.ID) {
			if id == "" {
				select {
				case first <- struct{}{}:
				default:
				}
			}
		}, func() {}, func() {
			select {
			case touched <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatalf("no %s", what)
		}
	}
	wait(first, "first reading")
	g0, ok := a.Settled()
	if !ok {
		t.Fatal("does not vouch once the watch has read")
	}
	if err := b.CreateRequest(ctx, pendingRequest(testID(1))); err != nil {
		t.Fatal(err)
	}
	wait(touched, "commit reported")
	if g, _ := a.Settled(); g == g0 {
		t.Fatalf("generation %d unchanged after another connection's commit was reported", g)
	}
}
