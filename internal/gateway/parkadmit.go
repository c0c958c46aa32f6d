package gateway

import (
	"context"
	"sync"
	"time"

	"toolgate/internal/gate"
)

// Admitting parked calls a bounded number at a time (issue 13: the peak
// while 10,000 held calls arrive). A parked call's admission (the gate's
// grant and identical-call reads, the store's creation: deep frames in
// pgx or database/sql) used to run on a goroutine of its own, started as
// soon as the call was parked: in a burst of thousands, thousands of them
// waited at once for the store's connections, each with the stack it had
// grown for those frames, which the runtime shrinks only at a collection
// (docs/performance.md, "held30"). The parked calls now wait in a queue
// that keeps only their *leanHold, and at most parkAdmitters goroutines
// (started when calls wait, ended when none does) admit them in arrival
// order. A call whose client went away while it waited (its context
// ended: the drop watch, a notifications/cancelled, a session DELETE,
// the gateway's Close) is answered without being admitted: nothing is
// created for it in the store.

// parkAdmitters bounds how many parked calls are admitted at once: more
// than the store takes at once (Postgres: a pool of 16 by default, three
// acquires per admission; SQLite: group commits of up to 64 writes), so
// the store is kept busy, and few enough that their stacks stay small
// against the held calls' (128 × 32 KiB is 4 MiB).
const parkAdmitters = admitSlotsMax

// A parkQueue runs admit on parked calls, at most max at a time, in the
// order they were added: their admissions (parkQ), or their answers once
// decided (answerQ, parkanswer.go). The zero value is not usable: see
// newParkQueue.
type parkQueue struct {
	admit func(*leanHold) // runs one call's admission (or answer: answerQ)
	max   int
	// stall, when set, bounds how long a running call holds back the
	// waiting ones (answerQ's, whose calls run tools of any length and
	// write answers to clients of any speed; a tool may itself wait for
	// another queued call's answer: an upstream calling back through the
	// gateway). A call that has run for stall or longer no longer counts
	// against max: each stall while calls wait, goroutines start for them
	// until max calls run that started less than stall ago (fewer by the
	// calls that ended in that stall: running calls that turn over are
	// not stuck), as long as at most stallMost run in all; past that, one
	// more starts each stall in which no running call ended. 0: none (max
	// is a hard bound).
	stall time.Duration

	mu      sync.Mutex
	waiting []*leanHold             // in arrival order; guarded by mu
	ended   uint64                  // calls run to their end; guarded by mu
	watch   bool                    // a stall timer is set; guarded by mu
	slots   map[*queueSlot]struct{} // the running goroutines (how many: len); guarded by mu
}

// A queueSlot is one of a parkQueue's running goroutines: started is
// when its current call started (guarded by the queue's mu).
type queueSlot struct {
	started time.Time
}

// stallMost is how many goroutines a parkQueue with bound max runs at
// most by the age rule (see parkQueue.stall): 4 × max. Under a burst of
// decided calls each slowed by a shared resource (SQLite's one writer, a
// loaded machine) every running call may be older than the stall; the
// ceiling keeps such a burst's goroutines, their stacks and buffers,
// bounded (10,000 decided at once were 537 MB when each had one:
// docs/performance.md, "peak33").
func stallMost(max int) int { return 4 * max }

func newParkQueue(max int, admit func(*leanHold)) *parkQueue {
	return &parkQueue{admit: admit, max: max, slots: make(map[*queueSlot]struct{})}
}

// add queues l for admission, starting an admitting goroutine if fewer
// than max run. The goroutine ends when no call waits. The gateway's
// WaitGroup already counts l (parkStarts), so Close waits for its answer.
func (q *parkQueue) add(l *leanHold) {
	q.mu.Lock()
	if len(q.slots) < q.max {
		s := q.startSlot(time.Now())
		q.mu.Unlock()
		go q.run(s, l)
		return
	}
	q.waiting = append(q.waiting, l)
	if q.stall > 0 && !q.watch {
		q.watch = true
		ended := q.ended
		time.AfterFunc(q.stall, func() { q.unstall(ended) })
	}
	q.mu.Unlock()
}

// startSlot counts one more running goroutine, its call started at now;
// q.mu is held.
func (q *parkQueue) startSlot(now time.Time) *queueSlot {
	s := &queueSlot{started: now}
	q.slots[s] = struct{}{}
	return s
}

// unstall runs each stall while calls wait (ended: how many calls had
// ended a stall ago). Running calls that started a stall ago or earlier
// are stalled (long tools, slow clients, a call waiting for a queued
// call's answer): goroutines start on the first waiting calls until max
// calls run that started since, less as many as ended since (up to max:
// then the calls turn over, slowed, not stuck), up to stallMost in all;
// if none can start that way and no call ended since, one more starts
// anyway.
func (q *parkQueue) unstall(ended uint64) {
	q.mu.Lock()
	if len(q.waiting) == 0 {
		q.watch = false
		q.mu.Unlock()
		return
	}
	now := time.Now()
	fresh := 0
	for s := range q.slots {
		if now.Sub(s.started) < q.stall {
			fresh++
		}
	}
	// Calls that ended in the last stall: as many as max means the
	// running calls turn over (slowed by a shared resource, not stuck),
	// and more goroutines would only add to the contention.
	turned := q.max
	if d := q.ended - ended; d < uint64(turned) { //nolint:gosec // max is a positive bound (newParkQueue's callers)
		turned = int(d) //nolint:gosec // less than max
	}
	n := min(q.max-fresh, q.max-turned, stallMost(q.max)-len(q.slots))
	if n <= 0 && q.ended == ended {
		n = 1
	}
	n = min(max(n, 0), len(q.waiting))
	type start struct {
		s *queueSlot
		l *leanHold
	}
	starts := make([]start, n)
	for i := range starts {
		starts[i] = start{q.startSlot(now), q.waiting[i]}
		q.waiting[i] = nil
	}
	q.waiting = q.waiting[n:]
	done := q.ended
	time.AfterFunc(q.stall, func() { q.unstall(done) })
	q.mu.Unlock()
	for _, st := range starts {
		go q.run(st.s, st.l)
	}
}

// run admits l, then the calls waiting, until none waits; s is its slot.
func (q *parkQueue) run(s *queueSlot, l *leanHold) {
	for l != nil {
		q.admit(l)
		l = q.next(s)
	}
}

// next takes the first waiting call for slot s, or, when none waits, ends
// the caller's turn as an admitting goroutine (nil).
func (q *parkQueue) next(s *queueSlot) *leanHold {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended++
	if len(q.waiting) == 0 {
		delete(q.slots, s)
		q.waiting = nil // a burst's backing array goes with it
		return nil
	}
	l := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	if q.stall > 0 {
		s.started = time.Now()
	}
	return l
}

// admitQueued admits the parked call l on an admitting goroutine of the
// gateway's parkQueue (admitParked), unless its context ended while it
// waited: then it is answered with that refusal (no admission, nothing
// stored) on a goroutine of its own, as a call decided at once is, so
// that an admitting goroutine never waits for a client. The refusal is
// counted and audited as any refused call is (Gateway.unadmitted):
// unrecorded, an agent could probe under a full queue which calls need
// approval and leave no trace (attack31).
func (l *leanHold) admitQueued() {
	if err := l.ctx.Err(); err != nil {
		l.adm = new(gate.Admission)
		l.f.g.unadmitted(l.ctx, l.call, l.adm, context.Cause(l.ctx))
		go l.waitParked()
		return
	}
	l.admitParked()
}
