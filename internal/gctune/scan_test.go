package gctune

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// runtimeGoal is the heap goal the Go runtime derives from GOGC: the live
// heap plus (live heap + scanned stacks + globals) × GOGC/100.
func runtimeGoal(st Stats, percent int) uint64 {
	return st.Live + (st.Live+st.Stacks+st.Globals)*uint64(max(percent, 0))/100 //nolint:gosec // percent ≥ 0
}

func TestPercentForScan(t *testing.T) {
	const mb = 1 << 20
	tests := []struct {
		live, scan uint64
		want       int
	}{
		{0, 56 * mb, 400},       // before the first collection
		{4 * mb, 1 * mb, 400},   // a small heap: the cap, as without stacks
		{40 * mb, 0, 140},       // PercentFor's
		{40 * mb, 56 * mb, 58},  // a burst's stacks: 40 + 96 × 0.58 ≈ HeldGoal
		{48 * mb, 56 * mb, 46},  // 48 + 104 × 0.46 ≈ HeldGoal
		{63 * mb, 145 * mb, 25}, // the floor: 16 by the goal
		{76 * mb, 4 * mb, 27},   // 1.5 × live − HeldTrim, 98 MiB: 76 + 80 × 0.27
		{512 * mb, 8 * mb, 46},  // towards half of Go's default
		{100 * mb, 1 << 40, 25}, // never below the floor
		{32 * mb, 0, 200},       // PercentFor's
		{16 * mb, 100 * mb, 55}, // 64 MiB of headroom over 116 MiB scanned
	}
	for _, tt := range tests {
		if got := PercentForScan(tt.live, tt.scan); got != tt.want {
			t.Errorf("PercentForScan(%d MiB live, %d MiB scanned) = %d, want %d", tt.live/mb, tt.scan/mb, got, tt.want)
		}
	}
	for live := uint64(mb); live <= 1<<30; live += mb {
		if PercentForScan(live, 0) != PercentFor(live) {
			t.Fatalf("PercentForScan(%d MiB, 0) = %d, PercentFor = %d", live/mb, PercentForScan(live, 0), PercentFor(live))
		}
		for _, scan := range []uint64{mb, 16 * mb, 64 * mb, 256 * mb} {
			p := PercentForScan(live, scan)
			g := runtimeGoal(Stats{Live: live, Stacks: scan}, p)
			if p > MinScanPercent && p < DefaultGCPercent && (g > GoalFor(live) || g+(live+scan)/100 < GoalFor(live)) {
				t.Errorf("%d MiB live, %d MiB scanned: GOGC %d, the runtime's goal %d MiB, want GoalFor %d MiB (within GOGC's whole percent)",
					live/mb, scan/mb, p, g/mb, GoalFor(live)/mb)
			}
		}
	}
}

// TestTuneKeepsTheGoalFlatThroughABurst: while a burst of admissions has
// thousands of connections in flight, their goroutine stacks (which the
// runtime counts in its heap goal, × GOGC/100) grow and shrink with the
// live heap; the GOGC tune sets keeps the runtime's goal at GoalFor the
// live heap (HeldGoal from 32 to ≈ 75 MiB live) instead of letting the
// stacks raise it, down to the floor MinScanPercent.
func TestTuneKeepsTheGoalFlatThroughABurst(t *testing.T) {
	const mb = 1 << 20
	burst := []Stats{ // the 5,000-call burst of gc28's base run (gctrace), then one of 10,000
		{Live: 17 * mb, Stacks: 8 * mb},
		{Live: 49 * mb, Stacks: 20 * mb},
		{Live: 48 * mb, Stacks: 23 * mb},
		{Live: 38 * mb, Stacks: 56 * mb},
		{Live: 27 * mb, Stacks: 3 * mb},
		{Live: 44 * mb, Stacks: 1 * mb},
		{Live: 63 * mb, Stacks: 145 * mb},
	}
	synctest.Test(t, func(t *testing.T) {
		var at atomic.Int64 // the burst's step tune reads
		rt := &fakeRuntime{}
		var goals []uint64
		runTune(t, Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "none"},
			func() Stats { return burst[at.Load()] }, rt,
			func(tick func()) {
				for i := range burst {
					at.Store(int64(i))
					tick()
					rt.mu.Lock()
					goals = append(goals, runtimeGoal(burst[i], rt.percents[len(rt.percents)-1]))
					rt.mu.Unlock()
				}
			})
		for i, g := range goals {
			st := burst[i]
			want := GoalFor(st.Live)
			p := 100 * (want - st.Live) / (st.Live + st.Stacks)
			if p < MinScanPercent {
				want = runtimeGoal(st, MinScanPercent) // the floor
			}
			if g > want || g+(st.Live+st.Stacks)/100 < want {
				t.Errorf("%d MiB live, %d MiB of stacks: the runtime's goal %.1f MiB, want %.1f MiB", st.Live/mb, st.Stacks/mb, float64(g)/mb, float64(want)/mb)
			}
		}
	})
}
