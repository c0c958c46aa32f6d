package gate

import (
	"sync"
	"time"
)

// beatSlots is how many phases a beat spreads its waiters over: the
// interval is cut into this many steps and each waiter is woken at one
// step of each interval, so that 10,000 held calls with keep-alives write
// theirs in 64 bursts of about 160 spread over the interval instead of
// one burst of 10,000 (docs/performance.md, "The keep-alive beat under
// 10,000 held calls").
const beatSlots = 64

// A beat is one clock for every held call's keep-alives: instead of a
// ticker per held call, waiters wait on the channel of their slot's next
// beat. The interval is cut into slots; one timer fires at every step and
// closes the current slot's channel, so each slot's channel is closed
// once every interval, the slots one step apart. A waiter joins the slot
// with the fewest waiters (of those, the one whose beat is furthest off),
// so waiters that join at once are spread over the interval. Its first
// beat comes within an interval of joining (early when the slot's phase
// is near); keep-alives only need to come at least every interval.
type beat struct {
	interval time.Duration
	step     time.Duration // interval / len(slots): never more than interval in all

	mu      sync.Mutex
	slots   []beatSlot  // guarded by mu (the slice itself is fixed)
	cur     int         // guarded by mu: the slot the timer closes next
	waiters int         // guarded by mu
	timer   *time.Timer // guarded by mu: nil while nobody waits
	// due is when the timer should fire (guarded by mu): each step is
	// set from the last one's due time, not from when its callback ran,
	// so that the callbacks' lateness (tens of milliseconds on a loaded
	// machine, 64 times an interval) does not stretch the interval.
	due time.Time
}

// beatSlot is one phase of a beat.
type beatSlot struct {
	ch      chan struct{} // closed at the slot's next beat; nil until asked for
	waiters int           // channel and callback waiters

	// fmu guards fns and is held while the slot's beat calls them
	// (fire), so that leaveFunc returns only once its function is not
	// running and will not run again.
	fmu sync.Mutex
	fns []*beatFunc
}

// A beatFunc is a waiter that the beat calls back (joinFunc) instead of
// waking it through a channel: a held call waited for without a
// goroutine (asyncHold) keeps one instead of a goroutine parked on the
// slot's channel.
type beatFunc struct {
	fn   func()
	slot uint8
	idx  int // in its slot's fns; guarded by the slot's fmu
}

func newBeat(interval time.Duration) *beat {
	// At most one slot per millisecond of the interval (tests use short
	// ones), at least one.
	n := int(min(max(interval/time.Millisecond, 1), beatSlots))
	return &beat{interval: interval, step: interval / time.Duration(n), slots: make([]beatSlot, n)}
}

// join registers a waiter and returns its slot and the channel of the
// slot's next beat. Call next with the slot after each beat for the
// following one, and leave with it when done.
func (b *beat) join() (slot uint8, ch <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	best := b.take()
	return uint8(best), b.chanOf(best) //nolint:gosec // best < beatSlots ≤ 255
}

// joinFunc registers fn as a waiter called back at its slot's every beat,
// from the beat's own goroutine: fn must be short, must not block or
// panic, and must not call the beat. Its first call comes about an
// interval after joining at the latest, as a channel waiter's first beat
// (a beat of its slot between take and its entry in fns passes it by);
// leaveFunc ends it.
func (b *beat) joinFunc(fn func()) *beatFunc {
	b.mu.Lock()
	s := b.take()
	b.mu.Unlock()
	f := &beatFunc{fn: fn, slot: uint8(s)} //nolint:gosec // s < beatSlots ≤ 255
	sl := &b.slots[s]
	sl.fmu.Lock()
	f.idx = len(sl.fns)
	sl.fns = append(sl.fns, f)
	sl.fmu.Unlock()
	return f
}

// leaveFunc unregisters f; once it returns f's function is not running
// and is not called again. It must not be called from f's function.
func (b *beat) leaveFunc(f *beatFunc) {
	sl := &b.slots[f.slot]
	sl.fmu.Lock()
	last := len(sl.fns) - 1
	sl.fns[f.idx] = sl.fns[last]
	sl.fns[f.idx].idx = f.idx
	sl.fns[last] = nil
	sl.fns = sl.fns[:last]
	if len(sl.fns) == 0 {
		sl.fns = nil // a slot emptied after a burst keeps no array
	}
	sl.fmu.Unlock()
	b.leave(f.slot)
}

// take counts a new waiter in the slot with the fewest waiters (of those,
// the one whose beat is furthest off), starting the clock if it was
// stopped, and returns the slot. b.mu must be held.
func (b *beat) take() int {
	// The slot that fires last (the one before cur) is looked at first, so
	// that of slots with as many waiters the furthest off wins.
	n := len(b.slots)
	best := (b.cur + n - 1) % n
	for k := 1; k < n; k++ {
		s := (b.cur + n - 1 - k) % n
		if b.slots[s].waiters < b.slots[best].waiters {
			best = s
		}
	}
	b.slots[best].waiters++
	b.waiters++
	if b.timer == nil {
		b.due = time.Now().Add(b.step) //nolint:forbidigo // the runtime timer's own (monotonic) clock, never persisted: see fire
		b.timer = time.AfterFunc(b.step, b.fire)
	}
	return best
}

// next returns the channel of slot's beat after the one that fired.
func (b *beat) next(slot uint8) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.chanOf(int(slot))
}

// chanOf returns slot s's channel, made if needed. b.mu must be held.
func (b *beat) chanOf(s int) chan struct{} {
	if b.slots[s].ch == nil {
		b.slots[s].ch = make(chan struct{})
	}
	return b.slots[s].ch
}

// leave unregisters a waiter of slot; the clock stops when nobody waits.
func (b *beat) leave(slot uint8) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slots[slot].waiters--
	b.waiters--
	if b.waiters == 0 && b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
}

// fire closes the current slot's channel, moves on to the next slot, and
// then calls the slot's callback waiters back (joinFunc), in no
// particular order.
func (b *beat) fire() {
	s := b.advance()
	s.fmu.Lock()
	defer s.fmu.Unlock()
	for _, f := range s.fns {
		f.fn()
	}
}

// advance is fire's part under b.mu: the channel closed, the clock moved on.
// It returns the slot that beat.
func (b *beat) advance() *beatSlot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &b.slots[b.cur]
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	b.cur = (b.cur + 1) % len(b.slots)
	if b.waiters > 0 && b.timer != nil {
		// The next step is due a step after this one was; when the
		// callbacks fell behind it comes at once, catching up, but never
		// from more than an interval back (a stopped process).
		now := time.Now() //nolint:forbidigo // as in join: due is the timer's schedule, not the gate's time
		b.due = b.due.Add(b.step)
		if floor := now.Add(-b.interval); b.due.Before(floor) {
			b.due = floor
		}
		b.timer.Reset(max(b.due.Sub(now), 0))
	}
	return s
}
