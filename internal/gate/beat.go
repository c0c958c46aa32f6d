package gate

import (
	"sync"
	"time"
)

// A beat is one clock for every held call's keep-alives: instead of a
// ticker per held call, waiters wait on the channel of the current beat,
// which is closed every interval while anyone waits. Waiters that started
// mid-interval get their first keep-alive early; keep-alives only need to
// come at least every interval.
type beat struct {
	interval time.Duration

	mu      sync.Mutex
	ch      chan struct{} // guarded by mu: closed at the next beat
	waiters int           // guarded by mu
	timer   *time.Timer   // guarded by mu: nil while nobody waits
}

func newBeat(interval time.Duration) *beat { return &beat{interval: interval} }

// join registers a waiter and returns the channel of the next beat. Call
// next after each beat for the following one, and leave when done.
func (b *beat) join() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiters++
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(b.interval, b.fire)
	}
	return b.ch
}

// next returns the channel of the beat after the one that fired.
func (b *beat) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// leave unregisters a waiter; the clock stops when nobody waits.
func (b *beat) leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiters--
	if b.waiters == 0 && b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
}

func (b *beat) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	if b.waiters > 0 && b.timer != nil {
		b.timer.Reset(b.interval)
	}
}
