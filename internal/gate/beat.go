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
	waiters int
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
	return uint8(best), b.chanOf(best) //nolint:gosec // best < beatSlots ≤ 255
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

// fire closes the current slot's channel and moves on to the next slot.
func (b *beat) fire() {
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
}
