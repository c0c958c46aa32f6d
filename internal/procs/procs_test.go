package procs

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestFollow: one P after Calm quiet looks, the default back at the first
// look that saw two calls in flight (even ones that ended before it) or
// the process busy, and nothing more when Follow ends on the default.
func TestFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu  sync.Mutex
			got []int
		)
		set := func(n int) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, n)
		}
		sets := func() []int {
			mu.Lock()
			defer mu.Unlock()
			return append([]int(nil), got...)
		}
		l := &Load{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		var cpu atomic.Int64 // the process's CPU time, ns
		go func() {
			Follow(ctx, l, 2, set, func() time.Duration { return time.Duration(cpu.Load()) }, nil)
			close(done)
		}()

		l.Begin() // one call at a time: calm
		time.Sleep(Every*(Calm-1) + Every/2)
		synctest.Wait()
		if s := sets(); len(s) != 0 {
			t.Fatalf("set %v before %d calm looks", s, Calm)
		}
		time.Sleep(Every)
		synctest.Wait()
		if s := sets(); len(s) != 1 || s[0] != 1 {
			t.Fatalf("after %d calm looks: set %v, want [1]", Calm, s)
		}
		l.Begin() // a second call in flight, over before the next look
		l.End()
		time.Sleep(Every)
		synctest.Wait()
		if s := sets(); len(s) != 2 || s[1] != 2 {
			t.Fatalf("after a look that saw two calls: set %v, want [1 2]", s)
		}
		l.End()
		time.Sleep(Every * Calm)
		synctest.Wait()
		if s := sets(); len(s) != 3 || s[2] != 1 {
			t.Fatalf("calm again: set %v, want [1 2 1]", s)
		}
		// One call in flight, but the process used most of a CPU since
		// the last look (work the front does not count).
		cpu.Add(int64(Every * 9 / 10))
		time.Sleep(Every)
		synctest.Wait()
		if s := sets(); len(s) != 4 || s[3] != 2 {
			t.Fatalf("after a busy look: set %v, want [1 2 1 2]", s)
		}
		cancel()
		<-done
		if s := sets(); len(s) != 4 {
			t.Fatalf("after Follow: set %v, want [1 2 1 2] (the default was in effect)", s)
		}
	})
}

// TestFollowQueued: on one P, a look whose goroutines waited Queued or
// more on average sets the default even when the process used less than
// Busy of a CPU (its one thread shared the machine's cores), one just
// under leaves one P, and the default stays while the queue does.
func TestFollowQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu  sync.Mutex
			got []int
		)
		set := func(n int) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, n)
		}
		sets := func() []int {
			mu.Lock()
			defer mu.Unlock()
			return append([]int(nil), got...)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		var cpu, wait atomic.Int64 // ns so far
		go func() {
			Follow(ctx, &Load{}, 2, set,
				func() time.Duration { return time.Duration(cpu.Load()) },
				func() time.Duration { return time.Duration(wait.Load()) })
			close(done)
		}()
		look := func() { // one look's worth of time, the goroutine then at rest
			time.Sleep(Every)
			synctest.Wait()
		}
		time.Sleep(Every*Calm + Every/2)
		synctest.Wait()
		if s := sets(); len(s) != 1 || s[0] != 1 {
			t.Fatalf("after %d calm looks: set %v, want [1]", Calm, s)
		}
		// Half a CPU used, goroutines waiting just under Queued: one P stays.
		cpu.Add(int64(Every / 2))
		wait.Add(int64(Queued*Every) - int64(time.Millisecond))
		look()
		if s := sets(); len(s) != 1 {
			t.Fatalf("a look just under Queued: set %v, want [1]", s)
		}
		// The same CPU, Queued goroutines waiting on average: the default.
		cpu.Add(int64(Every / 2))
		wait.Add(int64(2 * Queued * Every))
		look()
		if s := sets(); len(s) != 2 || s[1] != 2 {
			t.Fatalf("a look over Queued: set %v, want [1 2]", s)
		}
		// The queue stays (each look just over Queued): no change for
		// longer than Calm looks.
		for range 2 * Calm {
			wait.Add(int64(Queued*Every) + int64(time.Millisecond))
			look()
		}
		if s := sets(); len(s) != 2 {
			t.Fatalf("while the queue stays: set %v, want [1 2]", s)
		}
		cancel()
		<-done
	})
}

// TestSchedWait: goroutines that queue for one P read as waiting, many
// times the CPU they spin for (each waits behind the others' turns); a
// process at rest adds next to nothing; a look does not allocate.
func TestSchedWait(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	wait := SchedWait()
	if n := testing.AllocsPerRun(10, func() { wait() }); n != 0 {
		t.Errorf("a look allocates %v times, want 0", n)
	}
	before := wait()
	time.Sleep(50 * time.Millisecond)
	if rest := wait() - before; rest > 5*time.Millisecond {
		t.Errorf("at rest: %v waited, want under 5ms", rest)
	}
	const goroutines, turns = 64, 20
	var wg sync.WaitGroup
	var spun atomic.Int64 // ns of spinning, all goroutines
	before = wait()
	for range goroutines {
		wg.Go(func() {
			for range turns {
				start := time.Now()
				for time.Since(start) < 100*time.Microsecond {
				}
				spun.Add(int64(time.Since(start)))
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	// Each yield queues behind the other 63 goroutines' turns: ≈ 63× the
	// spinning in all; at least the spinning itself, sampled or not.
	if got, min := wait()-before, time.Duration(spun.Load()); got < min {
		t.Errorf("%d goroutines queued on one P: %v waited, want at least %v (their spinning)", goroutines, got, min)
	}
}

// TestHistSum: values at their bucket's lower bound; the underflow bucket
// (from -Inf) and a bucket from 0 add nothing.
func TestHistSum(t *testing.T) {
	h := &metrics.Float64Histogram{
		Counts:  []uint64{5, 7, 2, 3, 1},
		Buckets: []float64{math.Inf(-1), 0, 0.001, 0.004, 1, math.Inf(1)},
	}
	// 2×1ms + 3×4ms + 1×1s
	if got, want := histSum(h), 2*time.Millisecond+12*time.Millisecond+time.Second; got != want {
		t.Errorf("histSum = %v, want %v", got, want)
	}
}

// TestFollowDefaultOne: with one P as the default Follow changes nothing.
func TestFollowDefaultOne(t *testing.T) {
	Follow(t.Context(), &Load{}, 1, func(int) { t.Fatal("set called") }, nil, nil)
}

// TestSeen: Seen counts each Begin and Saw, not End; Saw leaves the calls
// in flight alone; a nil Load sees nothing.
func TestSeen(t *testing.T) {
	l := &Load{}
	l.Begin()
	l.End()
	l.Saw()
	l.Begin()
	if got := l.Seen(); got != 3 {
		t.Fatalf("Seen = %d, want 3", got)
	}
	if now, most := l.InFlight(); now != 1 || most != 1 {
		t.Fatalf("InFlight = %d, %d, want 1, 1", now, most)
	}
	var none *Load
	none.Saw()
	if none.Seen() != 0 {
		t.Fatal("a nil Load saw something")
	}
}
