package gctune

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecide(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	tests := []struct {
		name      string
		env       map[string]string
		cgroupMax int64
		want      Settings
	}{
		{
			name: "nothing set: no memory limit",
			want: Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "none"},
		},
		{
			name:      "a cgroup sets the limit to three quarters of it",
			cgroupMax: 256 << 20,
			want:      Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimit: 192 << 20, MemoryLimitSource: "default"},
		},
		{
			name:      "a large cgroup",
			cgroupMax: 8 << 30,
			want:      Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimit: 6 << 30, MemoryLimitSource: "default"},
		},
		{
			name: "GOGC wins",
			env:  map[string]string{"GOGC": "100"},
			want: Settings{GCPercentSource: "env", MemoryLimitSource: "none"},
		},
		{
			name:      "GOMEMLIMIT wins",
			env:       map[string]string{"GOMEMLIMIT": "2GiB"},
			cgroupMax: 256 << 20,
			want:      Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "env"},
		},
		{
			name: "both set",
			env:  map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"},
			want: Settings{GCPercentSource: "env", MemoryLimitSource: "env"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Decide(env(tt.env), tt.cgroupMax)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadCgroupMax(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]int64{"max\n": 0, "268435456\n": 268435456, "garbage": 0, "0\n": 0} {
		p := filepath.Join(dir, "memory.max")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := readCgroupMax(p); got != want {
			t.Errorf("readCgroupMax(%q) = %d, want %d", content, got, want)
		}
	}
	if got := readCgroupMax(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("missing file: %d", got)
	}
}

func TestMemoryCeiling(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name                    string
		envSet                  bool
		runtimeLimit, cgroupMax int64
		want                    int64
	}{
		{name: "neither", runtimeLimit: math.MaxInt64, want: 0},
		{name: "cgroup", runtimeLimit: 768 * mib, cgroupMax: 1024 * mib, want: 1024 * mib}, // Apply's 3/4 is not a ceiling
		{name: "env", envSet: true, runtimeLimit: 256 * mib, want: 256 * mib},
		{name: "env off", envSet: true, runtimeLimit: math.MaxInt64, cgroupMax: 512 * mib, want: 512 * mib},
		{name: "env under cgroup", envSet: true, runtimeLimit: 256 * mib, cgroupMax: 512 * mib, want: 256 * mib},
		{name: "env over cgroup", envSet: true, runtimeLimit: 2048 * mib, cgroupMax: 512 * mib, want: 512 * mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memoryCeiling(tt.envSet, tt.runtimeLimit, tt.cgroupMax); got != tt.want {
				t.Errorf("memoryCeiling = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestApply checks that the defaults reach the runtime when the
// environment sets neither variable.
func TestApply(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	oldPercent := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})
	s := Apply(os.Getenv)
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("GC percent after Apply = %d, want %d", got, DefaultGCPercent)
	}
	got := debug.SetMemoryLimit(-1)
	switch s.MemoryLimitSource {
	case "default":
		if got != s.MemoryLimit || got <= 0 {
			t.Errorf("memory limit after Apply = %d, settings %+v", got, s)
		}
	case "none":
		if got != math.MaxInt64 {
			t.Errorf("memory limit after Apply = %d, want none (settings %+v)", got, s)
		}
	default:
		t.Errorf("memory limit source %q with GOMEMLIMIT unset", s.MemoryLimitSource)
	}
}

func TestPercentFor(t *testing.T) {
	for live, want := range map[uint64]int{
		0:         400, // before the first collection
		1 << 20:   400,
		16 << 20:  400,
		32 << 20:  200,
		40 << 20:  140, // the goal stays at HeldGoal (96 MiB) past 32 MiB live
		48 << 20:  100,
		60 << 20:  60,
		63 << 20:  52,
		64 << 20:  50,
		72 << 20:  33, // the goal stays at HeldGoal until 1.5 × live − HeldTrim is more
		74 << 20:  29,
		76 << 20:  28, // 1.5 × live − HeldTrim: 98 MiB
		96 << 20:  33, // 128 MiB
		512 << 20: 46, // towards half of Go's default
	} {
		if got := PercentFor(live); got != want {
			t.Errorf("PercentFor(%d MiB) = %d, want %d", live>>20, got, want)
		}
	}
}

// TestPercentForLargeHeaps: past HeldGoal − Headroom (32 MiB) of live heap
// the goal (live × (1 + GOGC/100)) is HeldGoal (within the percent's
// rounding down, under 1 MiB) until 1.5× the live heap less HeldTrim is
// more, from about 74.7 MiB of live heap on (heldpeak3: 10,000 held calls,
// about 50 MiB live, ended their burst with up to live + 64 MiB of heap;
// rss26: with ≈ 60 MiB held and 10–13 MiB of batch work in flight, at
// 1.5× live); it never decreases as the live heap grows (within that
// rounding) and, from 48 MiB of live heap on, is never above what Go's
// GOGC=100 would allow (twice the live heap).
func TestPercentForLargeHeaps(t *testing.T) {
	const mb = 1 << 20
	goal := func(live uint64) uint64 { return live + live*uint64(PercentFor(live))/100 } //nolint:gosec // PercentFor is within 28..400
	prev := goal(HeldGoal - Headroom)
	if prev != HeldGoal {
		t.Errorf("goal at %d MiB live: %d MiB, want %d", (HeldGoal-Headroom)/mb, prev/mb, HeldGoal/mb)
	}
	for live := uint64(HeldGoal-Headroom) + mb/4; live <= 1<<30; live += mb / 4 {
		g := goal(live)
		if g+mb < prev {
			t.Errorf("goal at %.2f MiB live is %.2f MiB, down from %.2f MiB", float64(live)/mb, float64(g)/mb, float64(prev)/mb)
		}
		if live >= HeldGoal/2 && g > 2*live {
			t.Errorf("goal at %.2f MiB live is %.2f MiB, above twice the live heap", float64(live)/mb, float64(g)/mb)
		}
		trimmed := live + live/2 - HeldTrim // 1.5× live less HeldTrim
		if trimmed <= HeldGoal && (g > HeldGoal || g+mb < HeldGoal) {
			t.Errorf("goal at %.2f MiB live is %.2f MiB, want HeldGoal (%d MiB)", float64(live)/mb, float64(g)/mb, HeldGoal/mb)
		}
		if trimmed > HeldGoal && (g > trimmed || g+live/100 < trimmed) { // GOGC's whole percent: within 1 % of live
			t.Errorf("goal at %.2f MiB live is %.2f MiB, want 1.5× live − HeldTrim (%.2f MiB)", float64(live)/mb, float64(g)/mb, float64(trimmed)/mb)
		}
		prev = g
	}
}

// fakeRuntime records what tune did to the runtime.
type fakeRuntime struct {
	mu       sync.Mutex
	percents []int
	limits   []int64
	releases []time.Time
}

func (f *fakeRuntime) SetMemoryLimit(l int64) {
	f.mu.Lock()
	f.limits = append(f.limits, l)
	f.mu.Unlock()
}

func (f *fakeRuntime) SetGCPercent(p int) {
	f.mu.Lock()
	f.percents = append(f.percents, p)
	f.mu.Unlock()
}
func (f *fakeRuntime) FreeOSMemory() {
	f.mu.Lock()
	f.releases = append(f.releases, time.Now())
	f.mu.Unlock()
}

// runTune runs tune on rt with stats() as the runtime's stats, looking
// every second however fast the process allocates, calls steps with a
// function that moves the fake clock by one second, and returns once tune
// has returned.
func runTune(t *testing.T, s Settings, stats func() Stats, rt *fakeRuntime, steps func(tick func())) {
	t.Helper()
	runTuneEvery(t, s, Intervals{Slow: time.Second, Fast: time.Second}, stats, rt, steps)
}

// runTuneEvery is runTune with tune's intervals given.
func runTuneEvery(t *testing.T, s Settings, iv Intervals, stats func() Stats, rt *fakeRuntime, steps func(tick func())) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tune(ctx, s, iv, nil, func() (Stats, bool) { return stats(), true }, rt)
	}()
	steps(func() {
		time.Sleep(time.Second)
		synctest.Wait()
	})
	cancel()
	<-done
}

// TestTune follows a live heap that grows and shrinks: GOGC is set each
// time PercentFor moves, and only then.
func TestTune(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Uint64
		live.Store(4 << 20)
		rt := &fakeRuntime{}
		runTune(t, Settings{GCPercent: 400, GCPercentSource: "default"},
			func() Stats { return Stats{Live: live.Load()} }, rt,
			func(tick func()) {
				for _, l := range []uint64{
					4 << 20,   // 400 already
					32 << 20,  // 200
					32 << 20,  // unchanged
					256 << 20, // 43: 1.5 × live − HeldTrim
					2 << 20,   // 400 again
				} {
					live.Store(l)
					tick()
				}
			})
		if want := []int{200, 43, 400}; !slices.Equal(rt.percents, want) {
			t.Errorf("GOGC set to %v, want %v", rt.percents, want)
		}
		if len(rt.releases) != 0 {
			t.Errorf("released %d times with no free heap", len(rt.releases))
		}
	})
}

func TestShouldRelease(t *testing.T) {
	const mb = 1 << 20
	sec := time.Second
	tests := []struct {
		name         string
		free, allocd uint64
		elapsed      time.Duration
		since        time.Duration
		want         bool
	}{
		{"a burst's free heap, quiet, never released", 400 * mb, 1 * mb, sec, -1, true},
		{"quiet, last release long ago", 400 * mb, 1 * mb, sec, ReleaseEvery, true},
		{"too little free heap", ReleaseAbove, 0, sec, -1, false},
		{"the tens of MB a burst leaves free", 40 * mb, 0, sec, -1, true},
		{"busy: the free heap lasts 60 s", 600 * mb, 10 * mb, sec, -1, false},
		{"just quiet enough: it lasts a little more", 600 * mb, 10*mb - 1, sec, -1, true},
		{"the rate counts, not the bytes", 600 * mb, 19 * mb, 2 * sec, -1, true},
		{"released recently", 400 * mb, 0, sec, ReleaseEvery - time.Millisecond, false},
		{"no time passed", 400 * mb, 0, 0, -1, false},
		{"many GB per second do not overflow", 400 * mb, 1 << 62, sec, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShouldRelease(tt.free, tt.allocd, tt.elapsed, tt.since); got != tt.want {
				t.Errorf("ShouldRelease(%d MiB free, %d MiB allocated in %v, %v) = %v, want %v",
					tt.free/mb, tt.allocd/mb, tt.elapsed, tt.since, got, tt.want)
			}
		})
	}
}

// TestTuneReleasesAfterTheBurst: while a burst allocates fast, the free
// heap stays; once the process is quiet it is released, at most once per
// ReleaseEvery, and a release is not repeated while nothing new is free.
func TestTuneReleasesAfterTheBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const mb = 1 << 20
		var (
			mu sync.Mutex
			st = Stats{Live: 200 * mb}
		)
		set := func(free, allocPerTick uint64) {
			mu.Lock()
			st.Free = free
			st.Allocs += allocPerTick
			mu.Unlock()
		}
		start := time.Now()
		rt := &fakeRuntime{}
		releases := func() int { rt.mu.Lock(); defer rt.mu.Unlock(); return len(rt.releases) }
		runTune(t, Settings{GCPercent: 400, GCPercentSource: "default"},
			func() Stats { mu.Lock(); defer mu.Unlock(); return st }, rt,
			func(tick func()) {
				for range 5 { // the burst: 80 MB/s allocated, 400 MB free
					set(400*mb, 80*mb)
					tick()
				}
				if n := releases(); n != 0 {
					t.Errorf("released %d times during the burst", n)
				}
				set(400*mb, 1*mb) // quiet
				tick()
				if n := releases(); n != 1 {
					t.Fatalf("released %d times after the burst, want 1", n)
				}
				set(10*mb, 1*mb) // what the release left free
				for range 20 {
					tick()
				}
				set(300*mb, 80*mb) // a second burst, 21 s after the first release
				tick()
				set(300*mb, 1*mb) // quiet, but only 22 s after the first release
				tick()
				if n := releases(); n != 1 {
					t.Fatalf("released %d times within %v", n, ReleaseEvery)
				}
				for range int(ReleaseEvery/time.Second) - 23 { // until ReleaseEvery has passed
					set(300*mb, 1*mb)
					tick()
				}
				set(300*mb, 80*mb)
				tick()
				set(300*mb, 1*mb) // quiet again: released
				tick()
			})
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if len(rt.releases) != 2 {
			t.Fatalf("releases at %v, want 2", rt.releases)
		}
		if got := rt.releases[0].Sub(start); got != 6*time.Second {
			t.Errorf("first release after %v, want 6s (the first quiet look)", got)
		}
		if got := rt.releases[1].Sub(rt.releases[0]); got < ReleaseEvery {
			t.Errorf("second release %v after the first, want at least %v", got, ReleaseEvery)
		}
	})
}

// TestTuneReleasesAtMostEveryReleaseEvery: free heap that stays above the
// bound (the release could not return it) is not released again on every
// look.
func TestTuneReleasesAtMostEveryReleaseEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRuntime{}
		runTune(t, Settings{GCPercent: 400, GCPercentSource: "default"},
			func() Stats { return Stats{Live: 200 << 20, Free: 400 << 20} }, rt,
			func(tick func()) {
				for range int(ReleaseEvery/time.Second) + 5 {
					tick()
				}
			})
		// A look every second; the first has no allocation rate yet:
		// releases at 2 s and ReleaseEvery later.
		if len(rt.releases) != 2 {
			t.Errorf("%d releases in %v, want 2 (one per %v)", len(rt.releases), ReleaseEvery+5*time.Second, ReleaseEvery)
		}
	})
}

// TestTuneLeavesGOGCFromTheEnvironment: a GOGC the operator set is never
// changed, and tune never forces a collection to release memory.
func TestTuneLeavesGOGCFromTheEnvironment(t *testing.T) {
	rt := &fakeRuntime{}
	tune(t.Context(), Settings{GCPercentSource: "env"}, Intervals{Slow: time.Second, Fast: time.Second}, nil,
		func() (Stats, bool) { t.Error("read the runtime's stats"); return Stats{}, false }, rt)
	if len(rt.percents)+len(rt.releases)+len(rt.limits) != 0 {
		t.Errorf("changed the runtime: %+v", rt)
	}
}

// TestStatsReader reads the runtime's metrics: every one Tune needs
// exists in this Go (a missing one would make Tune return at once).
func TestStatsReader(t *testing.T) {
	keep := make([]byte, 1<<20)
	runtime.GC()
	st, ok := newStatsReader()()
	runtime.KeepAlive(keep)
	if !ok {
		t.Fatal("a runtime metric Tune reads is missing")
	}
	if st.Live < 1<<20 || st.Allocs < st.Live {
		t.Errorf("stats %+v: want at least the 1 MiB kept live, and allocations at least the live heap", st)
	}
}

func TestLimitFor(t *testing.T) {
	const mb = 1 << 20
	// 100 MiB live, 2 MiB of stacks, 1 MiB of globals; the runtime mapped
	// 400 MiB, of which 100 released, 150 free and 120 objects: 30 MiB
	// other memory.
	st := Stats{Live: 100 * mb, Stacks: 2 * mb, Globals: 1 * mb, Total: 400 * mb, Released: 100 * mb, Free: 150 * mb, Objects: 120 * mb}
	goal := uint64(100*mb + 103*mb) // GOGC=100
	want := int64(goal + goal/32 + 30*mb + LimitSlack)
	tests := []struct {
		name    string
		st      Stats
		percent int
		ceiling int64
		want    int64
	}{
		{"GOGC's goal, the pacer's headroom, the other memory and the slack", st, 100, 0, want},
		{"a higher GOGC, a higher goal", st, 200, 0, int64(100*mb+206*mb+(100*mb+206*mb)/32+30*mb) + LimitSlack},
		{"the collector's current goal when higher", func() Stats { s := st; s.Goal = 300 * mb; return s }(), 100, 0, int64(300*mb+300*mb/32+30*mb) + LimitSlack},
		{"capped by a cgroup's limit", st, 100, 200 * mb, 200 * mb},
		{"a cgroup's limit above it changes nothing", st, 100, 1 << 40, want},
		{"no collection yet: no limit", Stats{Total: 10 * mb}, 400, 0, math.MaxInt64},
		{"no collection yet, in a cgroup: its limit", Stats{Total: 10 * mb}, 400, 200 * mb, 200 * mb},
		{"other memory never negative", Stats{Live: 10 * mb, Total: 20 * mb, Objects: 30 * mb}, 100, 0, int64(20*mb+20*mb/32) + LimitSlack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LimitFor(tt.st, tt.percent, tt.ceiling); got != tt.want {
				t.Errorf("LimitFor = %.1f MiB, want %.1f MiB", float64(got)/mb, float64(tt.want)/mb)
			}
		})
	}
}

// TestTuneSetsTheLimit: while the process allocates (8 MiB/s here) the
// soft limit follows LimitFor as the heap grows and shrinks (set only
// when it moved by more than limitStep), is capped by a cgroup's, and is
// never set under GOMEMLIMIT.
func TestTuneSetsTheLimit(t *testing.T) {
	const mb = 1 << 20
	lives := []uint64{0, 8 * mb, 8 * mb, 200 * mb, 200*mb + 256<<10, 20 * mb}
	run := func(t *testing.T, s Settings) *fakeRuntime {
		t.Helper()
		rt := &fakeRuntime{}
		synctest.Test(t, func(t *testing.T) {
			var live, allocs atomic.Uint64
			runTune(t, s, func() Stats {
				return Stats{Live: live.Load(), Total: 50 * mb, Objects: 20 * mb, Allocs: allocs.Add(8 * mb)}
			}, rt,
				func(tick func()) {
					for _, l := range lives {
						live.Store(l)
						tick()
					}
				})
		})
		return rt
	}
	limit := func(live uint64, percent int, ceiling int64) int64 {
		return LimitFor(Stats{Live: live, Total: 50 * mb, Objects: 20 * mb}, percent, ceiling)
	}
	t.Run("no limit of the environment's or a cgroup's", func(t *testing.T) {
		rt := run(t, Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "none"})
		want := []int64{math.MaxInt64, limit(8*mb, 400, 0), limit(200*mb, PercentFor(200*mb), 0), limit(20*mb, 320, 0)}
		if !slices.Equal(rt.limits, want) {
			t.Errorf("limits %v, want %v", rt.limits, want)
		}
	})
	t.Run("under a cgroup's limit", func(t *testing.T) {
		rt := run(t, Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "default", MemoryLimit: 300 * mb})
		// Apply set 300 MiB: nothing to set before the first collection.
		want := []int64{limit(8*mb, 400, 0), 300 * mb, limit(20*mb, 320, 0)}
		if !slices.Equal(rt.limits, want) {
			t.Errorf("limits %v, want %v", rt.limits, want)
		}
	})
	t.Run("GOMEMLIMIT set", func(t *testing.T) {
		rt := run(t, Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "env"})
		if len(rt.limits) != 0 {
			t.Errorf("limits %v set under GOMEMLIMIT", rt.limits)
		}
		if len(rt.percents) == 0 {
			t.Error("GOGC not followed under GOMEMLIMIT")
		}
	})
}

// TestTuneLooksFastWhileAllocating: while the process allocates FastAbove
// per second or more, tune looks every Fast; otherwise every Slow.
func TestTuneLooksFastWhileAllocating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex
			rate   uint64 // bytes per second
			allocs uint64
			last   = time.Now()
			looks  []time.Time
		)
		stats := func() Stats {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			allocs += uint64(float64(rate) * now.Sub(last).Seconds())
			last = now
			looks = append(looks, now)
			return Stats{Live: 100 << 20, Allocs: allocs}
		}
		setRate := func(r uint64) {
			mu.Lock()
			defer mu.Unlock()
			allocs += uint64(float64(rate) * time.Since(last).Seconds())
			last, rate = time.Now(), r
		}
		count := func() int { mu.Lock(); defer mu.Unlock(); return len(looks) }
		rt := &fakeRuntime{}
		runTuneEvery(t, Settings{GCPercent: 400, GCPercentSource: "default"}, Intervals{Slow: time.Second, Fast: 200 * time.Millisecond},
			stats, rt, func(tick func()) {
				for range 3 { // idle: one look a second
					tick()
				}
				if n := count(); n != 3 {
					t.Errorf("%d looks in 3 idle seconds, want 3", n)
				}
				setRate(FastAbove * 4) // a burst
				for range 3 {
					tick()
				}
				// The first look of the burst sees its rate (1 s), then 5
				// a second.
				if n := count(); n != 3+1+5+5 {
					t.Errorf("%d looks after 3 s of a burst, want %d", n, 3+1+5+5)
				}
				setRate(FastAbove / 4) // quiet again
				for range 3 {
					tick()
				}
				if n := count(); n != 14+1+2 {
					t.Errorf("%d looks after 3 quiet seconds, want %d", n, 14+1+2)
				}
			})
	})
}

// TestTuneSetsTheQuietLimit: while the process allocates under QuietBelow
// per second the limit is QuietLimitFor's (the live heap, not GOGC's
// goal); once it allocates more, LimitFor's again.
func TestTuneSetsTheQuietLimit(t *testing.T) {
	const mb = 1 << 20
	synctest.Test(t, func(t *testing.T) {
		var perLook atomic.Uint64
		var allocs uint64
		st := Stats{Live: 100 * mb, Total: 200 * mb, Objects: 120 * mb}
		rt := &fakeRuntime{}
		runTune(t, Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "none"},
			func() Stats { allocs += perLook.Load(); s := st; s.Allocs = allocs; return s }, rt,
			func(tick func()) {
				perLook.Store(8 * mb) // busy: GOGC's goal
				tick()
				tick()
				perLook.Store(QuietBelow / 2) // quiet
				tick()
				tick()
				perLook.Store(8 * mb) // busy again
				tick()
			})
		normal, quiet := LimitFor(st, PercentFor(st.Live), 0), QuietLimitFor(st, 0) // GOGC 34 at 100 MiB live
		// GOGC 34 at 100 MiB live: 34 MiB of headroom
		if quiet >= normal-30*mb {
			t.Fatalf("quiet limit %d MiB, normal %d MiB: want the quiet one about GOGC's headroom lower", quiet/mb, normal/mb)
		}
		if want := []int64{normal, quiet, normal}; !slices.Equal(rt.limits, want) {
			t.Errorf("limits %v, want %v", rt.limits, want)
		}
	})
}
