package gctune

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestBurstEnded(t *testing.T) {
	const mb = 1 << 20
	tests := []struct {
		peak, stacks uint64
		want         bool
	}{
		{56 * mb, 3 * mb, true},   // gc28's base run: 56 MB of stacks, then 3
		{49 * mb, 0, true},        // and its second run
		{49 * mb, 19 * mb, false}, // still in flight
		{16 * mb, 2 * mb, true},   // the least peak
		{15 * mb, 0, false},       // a proxy's stacks: no burst
		{0, 0, false},
		{145 * mb, 4 * mb, true}, // 10,000
		{145 * mb, 19 * mb, false},
	}
	for _, tt := range tests {
		if got := BurstEnded(tt.peak, tt.stacks); got != tt.want {
			t.Errorf("BurstEnded(%d MiB peak, %d MiB now) = %v, want %v", tt.peak/mb, tt.stacks/mb, got, tt.want)
		}
	}
}

// TestBurstWatch: one end per burst, on the stacks of gc28's runs
// (gctrace, MB): the 10,000 burst's stacks fall from 157 MB through 17
// (the end: an eighth) to 0, which is not a second burst.
func TestBurstWatch(t *testing.T) {
	const mb = 1 << 20
	var w burstWatch
	var ends []int
	for i, s := range []uint64{
		0, 3, 7, 54, 62, 104, 149, 157, 150, 104, 100, 81, 65, 52, 46, 34, 27, 22, 17, 13, 4, 0, 0, // 10,000 (the end at 17)
		8, 20, 56, 19, 3, 2, // 5,000 (the end at 3)
		9, 4, 1, 0, // a proxy's stacks
		18, 0, // 18 MiB above the low of 0
	} {
		if w.see(s * mb) {
			ends = append(ends, i)
		}
	}
	if want := []int{18, 27, 34}; !slices.Equal(ends, want) {
		t.Errorf("burst ends at looks %v, want %v", ends, want)
	}
}

// TestTuneReleasesAtTheBurstsEnd: while a burst of admissions has
// thousands of connections in flight their stacks peak (tens of MB); when
// the collection after the burst finds them gone, tune looks at once (not
// at its next timed look) and returns the free heap to the OS
// (FreeOSMemory), though the process still allocates too fast for the
// quiet release; once per burst, not again while the stacks stay low, and
// again after the next burst, however soon (not bound by ReleaseEvery).
func TestTuneReleasesAtTheBurstsEnd(t *testing.T) {
	const mb = 1 << 20
	synctest.Test(t, func(t *testing.T) {
		var (
			mu sync.Mutex
			st = Stats{Live: 20 * mb, Free: 60 * mb, Total: 200 * mb, Objects: 100 * mb}
		)
		stats := func() (Stats, bool) {
			mu.Lock()
			defer mu.Unlock()
			st.Allocs += 64 * mb // busy: 64 MiB per look, never quiet
			return st, true
		}
		set := func(stacks uint64) {
			mu.Lock()
			st.Stacks = stacks
			mu.Unlock()
		}
		cycles := make(chan struct{}, 1)
		collected := func() { // as GCCycles, then let tune look
			select {
			case cycles <- struct{}{}:
			default:
			}
			synctest.Wait()
		}
		rt := &fakeRuntime{}
		releases := func() int { rt.mu.Lock(); defer rt.mu.Unlock(); return len(rt.releases) }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			tune(ctx, Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "none"},
				Intervals{Slow: time.Second, Fast: time.Second}, cycles, stats, rt)
		}()
		time.Sleep(time.Second) // the first look
		synctest.Wait()

		for _, stacks := range []uint64{8 * mb, 20 * mb, 56 * mb, 19 * mb} { // the burst
			set(stacks)
			collected()
		}
		if n := releases(); n != 0 {
			t.Fatalf("%d releases during the burst", n)
		}
		set(3 * mb) // its end
		collected()
		if n := releases(); n != 1 {
			t.Fatalf("%d releases at the burst's end, want 1 (at once, not at the next timed look)", n)
		}
		mu.Lock()
		quiet := QuietLimitFor(st, 0)
		mu.Unlock()
		rt.mu.Lock()
		if l := rt.limits; len(l) > 0 && l[len(l)-1] == quiet {
			t.Errorf("the burst's end (no time since the last look) set the quiet limit %d", quiet)
		}
		rt.mu.Unlock()
		set(2 * mb)
		collected()
		time.Sleep(time.Second) // a timed look
		synctest.Wait()
		if n := releases(); n != 1 {
			t.Fatalf("%d releases after the burst's end, want still 1", n)
		}
		for _, stacks := range []uint64{40 * mb, 1 * mb} { // the next burst, minutes later
			set(stacks)
			collected()
		}
		if n := releases(); n != 2 {
			t.Fatalf("%d releases after the second burst, want 2", n)
		}
		mu.Lock()
		st.Free = ReleaseAbove
		mu.Unlock()
		for _, stacks := range []uint64{40 * mb, 1 * mb} { // a burst that left nothing free
			set(stacks)
			collected()
		}
		if n := releases(); n != 2 {
			t.Fatalf("%d releases after a burst with %d MiB free, want still 2", n, ReleaseAbove/mb)
		}
		cancel()
		<-done
	})
}
