package procs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is Follow's set, recording each number of Ps it is given.
type recorder struct {
	mu  sync.Mutex
	got []int
}

func (r *recorder) set(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, n)
}

func (r *recorder) sets() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.got...)
}

// expect waits d (in the bubble) and for Follow to act, then checks the
// numbers set so far.
func (r *recorder) expect(t *testing.T, d time.Duration, what string, want ...int) {
	t.Helper()
	time.Sleep(d)
	synctest.Wait()
	if s := r.sets(); !slices.Equal(s, want) {
		t.Fatalf("%s: set %v, want %v", what, s, want)
	}
}

// TestFollow: one P after Calm quiet looks; with the process's CPU
// measured, sixteen calls in flight under Crowded stay on one P (the
// calls in flight do not count there), one call between the bars stays
// too, but two or more calls in flight over Crowded set the default back
// (approve-all's share of a CPU; the rule of branch procs46 stayed on one
// P), and so does any look over Busy; one P again after Calm quiet looks,
// and the default set back when Follow ends on one P.
func TestFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		l := &Load{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		var cpu atomic.Int64 // the process's CPU time, ns
		go func() {
			Follow(ctx, l, 2, r.set, func() (time.Duration, error) { return time.Duration(cpu.Load()), nil })
			close(done)
		}()
		// share uses f of a CPU over the next look.
		share := func(f float64) { cpu.Add(int64(f * float64(Every))) }

		l.Begin() // one call at a time: calm
		r.expect(t, Every*(Calm-1)+Every/2, "before Calm quiet looks")
		r.expect(t, Every, "after Calm quiet looks", 1)
		// One call using more than Crowded and less than Busy: calm.
		share(0.6)
		r.expect(t, Every, "one call between the bars", 1)
		// Sixteen calls in flight using under Crowded: still calm.
		for range 15 {
			l.Begin()
		}
		for range 3 {
			share(0.3)
			r.expect(t, Every, "sixteen calls under Crowded", 1)
		}
		// Two or more calls in flight over Crowded: busy.
		share(0.5)
		r.expect(t, Every, "sixteen calls over Crowded", 1, 2)
		for range 15 {
			l.End()
		}
		r.expect(t, Every*(Calm-1), "before Calm quiet looks again", 1, 2)
		r.expect(t, Every, "calm again", 1, 2, 1)
		// One call, most of a CPU used since the last look: busy.
		share(0.9)
		r.expect(t, Every, "one call over Busy", 1, 2, 1, 2)
		r.expect(t, Every*Calm, "calm once more", 1, 2, 1, 2, 1)
		cancel()
		<-done
		if s := r.sets(); !slices.Equal(s, []int{1, 2, 1, 2, 1, 2}) {
			t.Fatalf("after Follow: set %v, want [1 2 1 2 1 2] (the default back)", s)
		}
	})
}

// TestFollowBurst: how long after a burst (sixteen calls that start at
// once from one P, then using u of a CPU) Follow sets the default. The
// first look after the burst measures the share over its whole interval,
// the quiet part before the burst included: with the burst at f·Every
// after a look, the first look is busy when u·(1−f) is over Crowded, else
// the second is, (2−f)·Every after the burst when u is over Crowded.
func TestFollowBurst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f, u  float64 // the burst's offset in its look (of Every), its share of a CPU
		looks int     // the look after the burst that sets the default; 0: none
	}{
		{"early, over Crowded", 0.2, 0.6, 1},
		{"late, over Crowded", 0.5, 0.6, 2},
		{"late, most of a CPU", 0.7, 0.9, 2},
		{"early, over Busy", 0.1, 0.9, 1},
		{"under Crowded", 0.1, 0.35, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &recorder{}
				l := &Load{}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				start := time.Now()
				var burst atomic.Int64 // the burst's start, ns after start; 0: none yet
				go func() {
					Follow(ctx, l, 2, r.set, func() (time.Duration, error) {
						b := burst.Load()
						if b == 0 {
							return 0, nil
						}
						return time.Duration(tc.u * float64(time.Since(start)-time.Duration(b))), nil
					})
					close(done)
				}()
				r.expect(t, Every*Calm+Every/2, "idle", 1)
				// Half an Every past a look; move to f·Every past one.
				time.Sleep(Every/2 + time.Duration(tc.f*float64(Every)))
				burst.Store(int64(time.Since(start)))
				for range 16 {
					l.Begin()
				}
				want := []int{1}
				for look := 1; look <= 3; look++ {
					if look == tc.looks {
						want = append(want, 2)
					}
					d := Every
					if look == 1 {
						d = time.Duration((1 - tc.f) * float64(Every))
					}
					r.expect(t, d, fmt.Sprintf("look %d after the burst", look), want...)
				}
				cancel()
				<-done
			})
		})
	}
}

// TestFollowCPUFails: a look whose CPU reading fails is busy (the
// default Ps back from one P, and kept however long the readings fail and
// the process is idle), and so is the first look after one, which has no
// reading to measure from; one P again after Calm quiet looks once the
// readings come back. Where a failed reading read as zero CPU, the
// process looked idle and stayed on one P at any load.
func TestFollowCPUFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		l := &Load{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		var fail atomic.Bool
		errRead := errors.New("getrusage: no reading")
		const used = time.Hour // the CPU so far: constant, an idle process
		go func() {
			Follow(ctx, l, 2, r.set, func() (time.Duration, error) {
				if fail.Load() {
					return 0, errRead
				}
				return used, nil
			})
			close(done)
		}()

		r.expect(t, Every*Calm+Every/2, "idle", 1)
		fail.Store(true)
		r.expect(t, Every, "a failed reading", 1, 2)
		r.expect(t, Every*2*Calm, "readings failing, the process idle", 1, 2)
		fail.Store(false)
		r.expect(t, Every, "the first reading back (nothing to measure from)", 1, 2)
		r.expect(t, Every*(Calm-1), "before Calm quiet looks after it", 1, 2)
		r.expect(t, Every, "Calm quiet looks after it", 1, 2, 1)
		cancel()
		<-done
	})
}

// TestFollowCPUFailsAtStart: with no first reading, the first look is busy
// however little the process uses; one P after Calm quiet looks after it.
func TestFollowCPUFailsAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		var reads atomic.Int64
		go func() {
			Follow(ctx, &Load{}, 2, r.set, func() (time.Duration, error) {
				if reads.Add(1) == 1 {
					return 0, errors.New("getrusage: no reading")
				}
				return time.Hour, nil
			})
			close(done)
		}()
		r.expect(t, Every*Calm+Every/2, "Calm looks after the first, busy one")
		r.expect(t, Every, "Calm quiet looks", 1)
		cancel()
		<-done
	})
}

// TestFollowNoCPU: with the process's CPU not measured (cpu nil), the
// calls in flight stand in for it: one P after Calm looks with at most
// one call, the default back at the first look that saw two (even ones
// that ended before it), and nothing more when Follow ends on the default.
func TestFollowNoCPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		l := &Load{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			Follow(ctx, l, 2, r.set, nil)
			close(done)
		}()

		l.Begin() // one call at a time: calm
		r.expect(t, Every*(Calm-1)+Every/2, "before Calm calm looks")
		r.expect(t, Every, "after Calm calm looks", 1)
		l.Begin() // a second call in flight, over before the next look
		l.End()
		r.expect(t, Every, "after a look that saw two calls", 1, 2)
		l.End()
		r.expect(t, Every*Calm, "calm again", 1, 2, 1)
		l.Begin()
		l.Begin()
		r.expect(t, Every, "two calls in flight", 1, 2, 1, 2)
		cancel()
		<-done
		if s := r.sets(); !slices.Equal(s, []int{1, 2, 1, 2}) {
			t.Fatalf("after Follow: set %v, want [1 2 1 2] (the default was in effect)", s)
		}
	})
}

// TestFollowDefaultOne: with one P as the default Follow changes nothing.
func TestFollowDefaultOne(t *testing.T) {
	Follow(t.Context(), &Load{}, 1, func(int) { t.Fatal("set called") }, nil)
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
