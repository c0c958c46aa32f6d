package gate

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// beatWaiter waits on b as a held call does (join, then next after each
// beat) until ctx ends, and sends the (bubble's) time of each beat to at.
func beatWaiter(ctx context.Context, b *beat, at chan<- time.Time) {
	slot, ch := b.join()
	defer b.leave(slot)
	for {
		select {
		case <-ch:
			at <- time.Now()
			ch = b.next(slot)
		case <-ctx.Done():
			return
		}
	}
}

// The beat spreads waiters that join at once over the interval: 640 held
// calls that join in the same instant are woken in 64 groups of ten, one
// step apart, not all at once (docs/performance.md, "The
// keep-alive beat under 10,000 held calls"); each still gets exactly one
// beat in every interval.
func TestBeatSpreadsWaitersOverTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 15 * time.Second
		const n = 640
		b := newBeat(interval)
		ctx, cancel := context.WithCancel(t.Context())
		at := make(chan time.Time, 4*n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { beatWaiter(ctx, b, at) })
		}
		start := time.Now()
		time.Sleep(3*interval + b.step/2) // not at the instant of a beat
		synctest.Wait()
		cancel()
		wg.Wait()
		close(at)
		perInstant := map[time.Duration]int{}
		perInterval := map[int]int{}
		for a := range at {
			d := a.Sub(start)
			perInstant[d]++
			perInterval[int((d-1)/interval)]++
		}
		// 64 slots: 192 instants of ten waiters each; never one burst of
		// all 640, nor of more than 20.
		if len(perInstant) != 3*beatSlots || beatSlots < 32 {
			t.Errorf("the beats came at %d instants in three intervals, want %d (every slot once an interval), at least 96", len(perInstant), 3*beatSlots)
		}
		for d, k := range perInstant {
			if k != n/beatSlots || k > 20 {
				t.Errorf("%d waiters woken at +%v, want %d (spread evenly over the slots), at most 20", k, d, n/beatSlots)
			}
		}
		for i := range 3 {
			if perInterval[i] != n {
				t.Errorf("interval %d: %d beats, want %d (one per waiter)", i, perInterval[i], n)
			}
		}
	})
}

// Whenever a waiter joins, and however many come and go, it gets a beat
// at most an interval after joining and after each beat: the keep-alive
// guarantee (a client's timeout resets on progress, notes
// protocol-2026.md). Waiters join at odd offsets of the steps while
// others leave.
func TestBeatEveryIntervalForEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Second
		b := newBeat(interval)
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 377 * time.Millisecond) // joins spread over 7.5 intervals
				// lives 1–5 intervals and a bit, never ending at the instant of a beat
				life := time.Duration(1+i%5)*interval + time.Duration(i)*91*time.Millisecond + 50*time.Millisecond
				ctx, cancel := context.WithTimeout(t.Context(), life)
				defer cancel()
				at := make(chan time.Time, 16)
				joined := time.Now()
				beatWaiter(ctx, b, at)
				close(at)
				last, beats := joined, 0
				for a := range at {
					if gap := a.Sub(last); gap > interval || (gap <= 0 && beats > 0) {
						t.Errorf("waiter %d: a beat %v after the last one (or its join), want within (0, %v]", i, gap, interval)
					}
					last = a
					beats++
				}
				if end := time.Now(); end.Sub(last) > interval {
					t.Errorf("waiter %d: no beat in the %v before it left", i, end.Sub(last))
				}
				if beats == 0 {
					t.Errorf("waiter %d: no beat at all", i)
				}
			})
		}
		wg.Wait()
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.waiters != 0 || b.timer != nil {
			t.Errorf("after every waiter left: %d waiters, timer %v; want none (the clock stops)", b.waiters, b.timer)
		}
	})
}

// A newly joined waiter takes the least busy slot, and of those the one
// whose beat is furthest off.
func TestBeatJoinTakesTheLeastBusySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBeat(time.Duration(beatSlots) * time.Second)
		first, _ := b.join()
		if int(first) != beatSlots-1 {
			t.Errorf("first waiter in slot %d, want %d (the last to fire)", first, beatSlots-1)
		}
		time.Sleep(time.Second + time.Millisecond) // slot 0 fired; slot 1 is next
		synctest.Wait()
		second, _ := b.join()
		if second != 0 {
			t.Errorf("second waiter in slot %d, want 0 (empty, and now the last to fire)", second)
		}
		b.leave(first)
		third, _ := b.join()
		if third != first {
			t.Errorf("third waiter in slot %d, want %d (empty again, the furthest off after slot 0)", third, first)
		}
		b.leave(second)
		b.leave(third)
	})
}

// Intervals shorter than beatSlots milliseconds get fewer slots, never a
// step of zero.
func TestBeatShortInterval(t *testing.T) {
	for _, iv := range []time.Duration{time.Nanosecond, 5 * time.Millisecond, time.Second} {
		b := newBeat(iv)
		if b.step <= 0 || time.Duration(len(b.slots))*b.step > iv {
			t.Errorf("interval %v: %d slots of %v", iv, len(b.slots), b.step)
		}
	}
}

// A step that fires late does not push the later ones back: they stay
// on the schedule of the first (each step due a step after the last one
// was due, not after its callback ran), so on a loaded machine, where
// each callback runs a little late, 64 steps do not stretch the interval
// by 64 times that lateness.
func TestBeatLateStepKeepsTheSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBeat(time.Duration(beatSlots) * time.Second) // steps of 1 s
		start := time.Now()
		slot, _ := b.join()
		b.mu.Lock()
		b.timer.Stop() // the first step's callback is late: run by hand below
		b.mu.Unlock()
		time.Sleep(1300 * time.Millisecond)
		b.fire() // 300 ms late
		time.Sleep(2*time.Second + time.Millisecond - time.Since(start))
		synctest.Wait()
		b.mu.Lock()
		cur, due := b.cur, b.due.Sub(start)
		b.mu.Unlock()
		if cur != 2 || due != 3*time.Second {
			t.Errorf("at +2.001 s: %d steps fired, the next due at +%v; want 2, +3s (the second step on time)", cur, due)
		}
		b.leave(slot)
	})
}
