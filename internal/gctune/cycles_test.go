package gctune

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestGCCycles: the hook signals after a collection, and again after the
// next (each cleanup arms the next sentinel).
func TestGCCycles(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := GCCycles(ctx)
	for i := range 3 {
		runtime.GC()
		select {
		case <-ch:
		case <-t.Context().Done():
			t.Fatalf("no signal after collection %d", i+1)
		}
	}
}

// TestTuneLooksEarlyWhenTheLiveHeapJumps: after a quiet look set the quiet
// limit, a collection that finds the live heap JumpAbove or more above the
// last look's makes tune look at once, without waiting for its timer: GOGC
// and the limit follow the new live heap. A collection with the live heap
// grown less, or before any look, changes nothing.
func TestTuneLooksEarlyWhenTheLiveHeapJumps(t *testing.T) {
	const mb = 1 << 20
	synctest.Test(t, func(t *testing.T) {
		var (
			mu sync.Mutex
			st = Stats{Live: 20 * mb, Total: 60 * mb, Objects: 30 * mb}
		)
		stats := func() (Stats, bool) {
			mu.Lock()
			defer mu.Unlock()
			st.Allocs += 512 << 10 // quiet: under QuietBelow per second
			return st, true
		}
		grow := func(live, allocated uint64) {
			mu.Lock()
			defer mu.Unlock()
			st.Live, st.Allocs = live, st.Allocs+allocated
		}
		cycles := make(chan struct{}, 1)
		signal := func() { // as GCCycles: never waits for tune
			select {
			case cycles <- struct{}{}:
			default:
			}
		}
		rt := &fakeRuntime{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			tune(ctx, Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "none"},
				Intervals{Slow: time.Second, Fast: 200 * time.Millisecond}, cycles, stats, rt)
		}()
		limits := func() []int64 { rt.mu.Lock(); defer rt.mu.Unlock(); return slices.Clone(rt.limits) }
		start := time.Now()

		signal() // before any look: nothing to compare with
		synctest.Wait()
		if l := limits(); len(l) != 0 {
			t.Fatalf("limits %v set before the first look", l)
		}
		for range 2 { // the first look (no rate yet), then the quiet one
			time.Sleep(time.Second)
			synctest.Wait()
		}
		mu.Lock()
		quiet := QuietLimitFor(st, 0)
		mu.Unlock()
		if l := limits(); len(l) != 2 || l[1] != quiet {
			t.Fatalf("limits %v, want the quiet limit %d last", l, quiet)
		}

		grow(20*mb+JumpAbove, 8*mb) // grew, but not by more than JumpAbove
		signal()
		synctest.Wait()
		if l := limits(); len(l) != 2 {
			t.Fatalf("limits %v: a collection after a small growth looked", l)
		}

		grow(276*mb, 256*mb) // the jump
		signal()
		synctest.Wait()
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("%v passed: want the early look at once", d)
		}
		mu.Lock()
		want := LimitFor(st, PercentFor(st.Live), 0)
		mu.Unlock()
		l := limits()
		if len(l) != 3 || l[2] != want || want <= int64(276*mb) {
			t.Errorf("limits %v after the jump, want %d (GOGC's goal at 276 MiB live) last", l, want)
		}
		rt.mu.Lock()
		if p := rt.percents; len(p) == 0 || p[len(p)-1] != PercentFor(276*mb) {
			t.Errorf("GOGC set to %v, want %d last", p, PercentFor(276*mb))
		}
		rt.mu.Unlock()
		cancel()
		<-done
	})
}

// signalRuntime is goRuntime that reports each limit it sets.
type signalRuntime struct {
	goRuntime
	limits chan int64
}

func (r signalRuntime) SetMemoryLimit(bytes int64) {
	r.goRuntime.SetMemoryLimit(bytes)
	r.limits <- bytes
}

// TestTuneFollowsALiveHeapJump runs tune on the real runtime: after its
// quiet look, a live heap that jumps by 256 MiB at once
// (BenchmarkLiveHeapJump's) takes a bounded number of collections when
// tune looks at each collection. Without the early look the quiet limit
// stayed until the next timed look and the jump took 19–27 collections
// (Go's default: 6).
//
// tune's cycles channel is the test's: after each collection the
// allocating loop hands it to tune and waits until tune has handled it,
// so the count is tune's decision alone. Fed by GCCycles directly (as
// serve does), the count also held how long the runtime's cleanup
// goroutine and tune waited for a core while the loop kept allocating:
// 15 collections in 1 run of 30 under -race on a loaded 2-core machine.
// GCCycles itself is TestGCCycles'.
func TestTuneFollowsALiveHeapJump(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 256 MiB")
	}
	oldPercent := debug.SetGCPercent(DefaultGCPercent)
	oldLimit := debug.SetMemoryLimit(math.MaxInt64)
	var keep [][]byte
	defer func() {
		keep = nil
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
		runtime.GC()
	}()
	runtime.GC()
	ctx, cancel := context.WithCancel(t.Context())
	rt := signalRuntime{limits: make(chan int64, 64)}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// The runtime's stats, but an allocation rate of 0 until the quiet
	// limit is set, so that the second look is quiet whatever else the
	// process does (the race detector, a test before). From the jump on,
	// the real rate: a timed look in the middle of a slow jump (TuneFast
	// after an early look; a loaded machine) saw a rate of 0, set the
	// quiet limit again and took 18 collections.
	read := newStatsReader()
	var jumping atomic.Bool
	quietRead := func() (Stats, bool) {
		st, ok := read()
		if !jumping.Load() {
			st.Allocs = 0
		}
		return st, ok
	}
	// Unbuffered: a send is received only while tune waits in its select,
	// i.e. once it has handled the one before.
	cycles := make(chan struct{})
	wg.Go(func() {
		tune(ctx, Settings{GCPercent: DefaultGCPercent, GCPercentSource: "default", MemoryLimitSource: "none"},
			Intervals{Slow: TuneEvery, Fast: TuneFast}, cycles, quietRead, rt)
	})
	// handled tells tune of a collection and returns once tune has looked
	// at it: the second send waits for the end of the first's iteration
	// (a second look at the same live heap is no jump: it changes nothing).
	handled := func() {
		for range 2 {
			select {
			case cycles <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}
	// The first look sets GOGC's limit (GOGC 400: at least 16 MiB of
	// heap goal above the live heap), the second, quiet, the quiet one
	// (about 16 MiB lower: set).
	var quiet int64
	for range 2 {
		quiet = <-rt.limits
	}
	jumping.Store(true)
	_, n0 := gcCPU()
	seen := n0
	for range 256 * 16 {
		keep = append(keep, make([]byte, 64<<10))
		if _, n := gcCPU(); n != seen {
			seen = n
			handled()
		}
	}
	_, n1 := gcCPU()
	runtime.KeepAlive(keep)
	t.Logf("quiet limit %d MiB, %d collections in the jump, limit at its end %d MiB", quiet>>20, n1-n0, debug.SetMemoryLimit(-1)>>20)
	if n1-n0 > 14 {
		t.Errorf("%d collections for a 256 MiB jump of the live heap, want at most 14 (Go's default: 6)", n1-n0)
	}
}
