package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestWatchSeesOtherProcess uses two *DB on one file, as two processes: a
// commit through B wakes A's watcher.
func TestWatchSeesOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.db")
	a, b := openTest(t, path), openTest(t, path)

	calls := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Watch(ctx, 5*time.Millisecond, func() {
			select {
			case calls <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()

	waitCall := func(what string) {
		t.Helper()
		select {
		case <-calls:
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatalf("no changed() call %s", what)
		}
	}
	waitCall("after the first reading")

	steps := []struct {
		name string
		do   func(context.Context) error
	}{
		{"create through B", func(ctx context.Context) error {
			return b.CreateRequest(ctx, pendingRequest("01900000-0000-7000-8000-000000000001"))
		}},
		{"approve through B", func(ctx context.Context) error {
			_, err := b.UpdateRequest(ctx, "01900000-0000-7000-8000-000000000001", "bob", func(r *approval.Request) error {
				return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
			})
			return err
		}},
	}
	for _, s := range steps {
		// Nothing else commits, so the next call is caused by this step.
		if err := s.do(t.Context()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		waitCall(s.name)
	}

	cancel()
	<-done // Watch returns when its context is done
}
