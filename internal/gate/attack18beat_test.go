package gate

import (
	"testing"
	"testing/synctest"
	"time"
)

// attack18: the phased beat's edges. Each of these holds on 14ab23b; they
// are kept as regression tests of the guarantees a held call relies on.

// A timer callback that was already running when the last waiter left
// (Stop could not stop it) and runs after a new waiter joined (a stale
// fire) neither stretches the new waiter's first beat past an interval
// nor leaves two timers running: each later slot still fires once an
// interval, and the clock stops when the waiter leaves.
func TestBeatStaleFireAfterLeaveAndJoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 64 * time.Second // steps of 1 s
		b := newBeat(interval)
		first, _ := b.join()
		b.leave(first) // the clock stops...
		joined := time.Now()
		slot, ch := b.join() // ...and starts again for a new waiter
		b.fire()             // the old timer's callback, late
		var beats []time.Duration
		for len(beats) < 3 {
			<-ch
			beats = append(beats, time.Since(joined))
			ch = b.next(slot)
		}
		if beats[0] > interval {
			t.Errorf("first beat %v after joining, want at most %v", beats[0], interval)
		}
		for i := 1; i < len(beats); i++ {
			if gap := beats[i] - beats[i-1]; gap != interval {
				t.Errorf("beat %d: %v after the one before, want %v (one timer, on schedule)", i, gap, interval)
			}
		}
		b.leave(slot)
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.timer != nil || b.waiters != 0 {
			t.Errorf("after the last waiter left: timer %v, %d waiters; want none", b.timer, b.waiters)
		}
	})
}

// A waiter that leaves and joins again at once, just after its slot
// fired, gets its next beat within an interval of joining again, never
// a beat on the channel it had before it left.
func TestBeatLeaveAndRejoinAfterItsSlotFired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 64 * time.Second
		b := newBeat(interval)
		other, _ := b.join() // keeps the clock running
		slot, ch := b.join()
		<-ch // its slot fired
		b.leave(slot)
		rejoined := time.Now()
		slot, ch = b.join()
		select {
		case <-ch:
			t.Fatal("the rejoined waiter's channel was already closed")
		default:
		}
		<-ch
		if d := time.Since(rejoined); d <= 0 || d > interval {
			t.Errorf("first beat after rejoining %v later, want within (0, %v]", d, interval)
		}
		b.leave(slot)
		b.leave(other)
	})
}

// With nobody waiting, no timer runs: an idle gate costs no wake-ups,
// however many waiters came and went, and a step that was due while
// nobody waited does not fire at the next join.
func TestBeatIdleHasNoTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBeat(15 * time.Second)
		for range 100 {
			s, _ := b.join()
			b.leave(s)
		}
		b.mu.Lock()
		idle := b.timer == nil
		b.mu.Unlock()
		if !idle {
			t.Fatal("a timer runs with nobody waiting")
		}
		time.Sleep(time.Hour) // idle: nothing fires
		synctest.Wait()
		joined := time.Now()
		slot, ch := b.join()
		<-ch
		if d := time.Since(joined); d < b.step {
			t.Errorf("first beat %v after joining an idle beat, want at least a step (%v): no catching up on idle time", d, b.step)
		}
		b.leave(slot)
	})
}
