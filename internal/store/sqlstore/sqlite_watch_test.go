package sqlstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestWatchSQLiteSeesOtherProcess uses two *DB on one file, as two
// processes: A's watcher calls changed("") once it is watching, then
// changed(id) for each request B changes, read from the change feed. A
// commit that writes no event (a lease renewal) reports nothing.
func TestWatchSQLiteSeesOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.db")
	a := openTest(t, Config{Driver: DriverSQLite, Path: path, WatchInterval: 5 * time.Millisecond})
	b := openTest(t, sqliteConfig(path))

	calls := make(chan approval.ID, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Watch(ctx, func(id approval.ID) {
			select {
			case calls <- id:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()

	waitCall := func(what string, want approval.ID) {
		t.Helper()
		select {
		case id := <-calls:
			if id != want {
				t.Errorf("changed(%q) %s, want changed(%q)", id, what, want)
			}
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatalf("no changed() call %s", what)
		}
	}
	waitCall("after the first reading", "")

	// A creation wakes nobody (nobody waits on a request that did not
	// exist), nor a lease renewal (no event): the first call is the
	// approval's.
	steps := []struct {
		name string
		do   func(context.Context) error
	}{
		{"create, renew a lease (no event) and approve through B", func(ctx context.Context) error {
			if err := b.CreateRequest(ctx, pendingRequest(testID(1))); err != nil {
				return err
			}
			if _, err := b.RenewLeases(ctx, "gw-b", []approval.ID{testID(1)}, t0.Add(time.Hour)); err != nil {
				return err
			}
			_, err := b.UpdateRequest(ctx, testID(1), "bob", func(r *approval.Request) error {
				return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
			})
			return err
		}},
		{"consume through B", func(ctx context.Context) error {
			_, err := b.UpdateRequest(ctx, testID(1), "gw-b", func(r *approval.Request) error {
				return r.Consume(r.Binding(), "", t0.Add(2*time.Minute))
			})
			return err
		}},
	}
	for _, s := range steps {
		// Nothing else commits, so the next call is caused by this step.
		if err := s.do(t.Context()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		waitCall("after "+s.name, testID(1))
	}

	cancel()
	<-done // Watch returns when its context is done
}

// TestWatchSQLiteStopsOnClose checks that Close ends Watch even though its
// context is still live.
func TestWatchSQLiteStopsOnClose(t *testing.T) {
	db, err := Open(t.Context(), Config{Driver: DriverSQLite, Path: filepath.Join(t.TempDir(), "toolgate.db"), WatchInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	called := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.Watch(t.Context(), func(approval.ID) {
			select {
			case called <- struct{}{}:
			default:
			}
		})
	}()
	select {
	case <-called:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("Watch never called changed")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("Watch still running after Close")
	}
}

// TestWatchLogSQLiteReportsCreations: WatchLog's appended() fires for a
// request created by another process (the notification outbox announces
// new requests), though changed(id) does not (no holder waits on a
// creation).
func TestWatchLogSQLiteReportsCreations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.db")
	a := openTest(t, Config{Driver: DriverSQLite, Path: path, WatchInterval: 5 * time.Millisecond})
	b := openTest(t, sqliteConfig(path))

	var (
		appended = make(chan struct{}, 1)
		changed  = make(chan approval.ID, 16)
	)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.WatchLog(ctx, func(id approval.ID) { changed <- id }, func() {
			select {
			case appended <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()
	select {
	case id := <-changed:
		if id != "" {
			t.Fatalf("first changed(%q), want changed(\"\")", id)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("WatchLog never found its place")
	}
	if err := b.CreateRequest(t.Context(), pendingRequest(testID(1))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-appended:
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("no appended() call after another process created a request")
	}
	select {
	case id := <-changed:
		t.Errorf("changed(%q) after a creation, want no call", id)
	default:
	}
}
