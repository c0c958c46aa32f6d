package execpages

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// collectingProcess is a quietProcess whose heap WhenQuiet collects
// (Activity.Collect, counted; each collection also costs collectCPU of
// CPU and completes a collection cycle) and whose collections it watches
// (Activity.Collections, which the test also advances, as the runtime's
// forced collections do).
type collectingProcess struct {
	quietProcess
	collects   atomic.Int64
	cycles     atomic.Uint64
	collectCPU time.Duration
	order      atomic.Int64 // releases made before the last collection
}

func (p *collectingProcess) start(t *testing.T, first time.Duration) {
	t.Helper()
	act := p.activity()
	act.Collect = func() {
		p.collects.Add(1)
		p.cycles.Add(1)
		p.cpu.Add(int64(p.collectCPU))
		p.order.Store(p.releases.Load())
	}
	act.Collections = p.cycles.Load
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		WhenQuiet(ctx, first, act, func() { p.releases.Add(1) })
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// collectsAfter sleeps d, waits for WhenQuiet to settle, and checks the
// collections and releases so far.
func (p *collectingProcess) collectsAfter(t *testing.T, d time.Duration, collects, releases int64, why string) {
	t.Helper()
	time.Sleep(d)
	synctest.Wait()
	if c, r := p.collects.Load(), p.releases.Load(); c != collects || r != releases {
		t.Fatalf("%s: %d collections and %d releases, want %d and %d", why, c, r, collects, releases)
	}
}

// TestWhenQuietCollectsBeforeTheRelease: after calls, the heap is collected
// once, CollectBefore before the quiet release (so that the stacks the
// collection shrank have grown back, and their tables' pages are mapped,
// before the release takes them), not earlier; a process idle since
// start-up is not collected; the collection's own CPU, however large, does
// not make the process busy.
func TestWhenQuietCollectsBeforeTheRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &collectingProcess{collectCPU: 100 * time.Duration(QuietCPU*float64(QuietLook))}
		p.start(t, StartupTail)
		p.collectsAfter(t, StartupTail, 0, 1, "at the start-up's tail")
		p.collectsAfter(t, 10*QuietAfter, 0, 1, "idle since start-up")

		p.seen.Add(1) // one call
		p.collectsAfter(t, QuietLook, 0, 1, "at the look that saw the call")
		p.collectsAfter(t, QuietAfter-CollectBefore-QuietLook, 0, 1, "CollectBefore less one look before the release")
		p.collectsAfter(t, QuietLook, 1, 1, "CollectBefore before the release")
		p.collectsAfter(t, CollectBefore-QuietLook, 1, 1, "one look before the release")
		p.collectsAfter(t, QuietLook, 1, 2, "QuietAfter after the call's look")
		if got := p.order.Load(); got != 1 {
			t.Fatalf("the collection came after %d releases, want 1 (before the quiet release)", got)
		}

		// Calls every look: no collection while they come.
		for range 10 * QuietAfter / QuietLook {
			p.seen.Add(1)
			p.collectsAfter(t, QuietLook, 1, 2, "while calls come")
		}
		p.collectsAfter(t, QuietAfter, 2, 3, "QuietAfter after the last call")
	})
}

// TestWhenQuietReleasesAfterACollection: once quiet, a collection (the
// runtime forces one every two minutes in a process that has collected)
// maps the stack tables back; WhenQuiet releases again CollectBefore after
// the look that saw it, once per collection; a later collection within
// that wait moves the release on; without collections, nothing.
func TestWhenQuietReleasesAfterACollection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &collectingProcess{}
		p.start(t, StartupTail)
		p.collectsAfter(t, StartupTail, 0, 1, "at the start-up's tail")

		p.cycles.Add(1) // the runtime's collection
		p.collectsAfter(t, QuietLook, 0, 1, "at the look that saw the collection")
		p.collectsAfter(t, CollectBefore-QuietLook, 0, 1, "CollectBefore less one look after it")
		p.collectsAfter(t, QuietLook, 0, 2, "CollectBefore after the look that saw it")
		p.collectsAfter(t, 10*QuietAfter, 0, 2, "quiet, no collection since")

		p.cycles.Add(1)
		p.collectsAfter(t, 2*QuietLook, 0, 2, "two looks after a collection")
		p.cycles.Add(1) // another before the release
		p.collectsAfter(t, CollectBefore, 0, 2, "CollectBefore after the first, less than after the second")
		p.collectsAfter(t, QuietLook, 0, 3, "CollectBefore after the second")
		p.collectsAfter(t, 10*QuietAfter, 0, 3, "quiet again")
	})
}
