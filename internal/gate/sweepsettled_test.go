package gate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/store/sqlstore/sqlitetest"
)

// settleDue is downDue that counts its pending counts.
type settleDue struct {
	downDue
	counts atomic.Int64
}

func (c *settleDue) CountPending(ctx context.Context, by string) (int, error) {
	c.counts.Add(1)
	return c.downDue.CountPending(ctx, by)
}

// TestIdleSweeperCountsOnlyWhenUnsettled (idle27): an idle watched sweeper
// with Options.Settled skips its pending count while the store's
// generation is current and unchanged since its last count that
// succeeded; it counts again at the next interval when the generation
// moves (a commit, or a failed poll of the watch), every interval while
// the generation is not current or the count fails, and a failing count
// still reaches the store's health.
func TestIdleSweeperCountsOnlyWhenUnsettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		cs := &settleDue{downDue: downDue{DB: db}}
		var gen atomic.Uint64
		var current atomic.Bool
		current.Store(true)
		x := New(cs, pol, &Options{Watched: true, Instance: "x",
			Settled: func() (uint64, bool) { return gen.Load(), current.Load() }})
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		wg.Go(func() { _ = x.Run(ctx) })

		counts := func(what string, wait time.Duration) int64 {
			t.Helper()
			before := cs.counts.Load()
			time.Sleep(wait)
			synctest.Wait()
			return cs.counts.Load() - before
		}
		counts("start", 3*time.Second) // the first sweep and its count
		if n := counts("settled", 10*time.Second); n != 0 {
			t.Fatalf("10 idle intervals with the generation settled: %d pending counts, want 0", n)
		}
		gen.Add(1) // a commit the watch saw
		if n := counts("after a commit", 1500*time.Millisecond); n != 1 {
			t.Fatalf("the interval after the generation moved: %d pending counts, want 1", n)
		}
		if n := counts("settled again", 10*time.Second); n != 0 {
			t.Fatalf("settled again: %d pending counts in 10 intervals, want 0", n)
		}
		current.Store(false) // the watch stopped or is stuck
		if n := counts("not current", 10*time.Second); n < 9 {
			t.Fatalf("the generation not current: %d pending counts in 10 intervals, want one each", n)
		}
		current.Store(true)
		cs.down.Store(true)
		gen.Add(1) // the watch's failed poll
		if n := counts("store down", 10*time.Second); n < 9 {
			t.Fatalf("the store down: %d pending counts in 10 intervals, want one each (a failed count proves nothing)", n)
		}
		if x.health.steadyFor(0, x.now()) {
			t.Fatal("the failing counts did not reach the store's health")
		}
		cs.down.Store(false)
		counts("back", 1500*time.Millisecond)
		if n := counts("back, settled", 10*time.Second); n != 0 {
			t.Fatalf("the store back and settled: %d pending counts in 10 intervals, want 0", n)
		}
	})
}
