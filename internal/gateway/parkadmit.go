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
	// stall, when set, is how long calls may wait while none of the
	// running ones ends before one more goroutine starts past max (and
	// again each stall after that): answerQ's, whose calls run tools of
	// any length, and a tool may itself wait for another queued call's
	// answer (an upstream calling back through the gateway). 0: none.
	stall time.Duration

	mu      sync.Mutex
	waiting []*leanHold // in arrival order; guarded by mu
	running int         // admitting goroutines; guarded by mu
	ended   uint64      // calls run to their end; guarded by mu
	watch   bool        // a stall timer is set; guarded by mu
}

func newParkQueue(max int, admit func(*leanHold)) *parkQueue {
	return &parkQueue{admit: admit, max: max}
}

// add queues l for admission, starting an admitting goroutine if fewer
// than max run. The goroutine ends when no call waits. The gateway's
// WaitGroup already counts l (parkStarts), so Close waits for its answer.
func (q *parkQueue) add(l *leanHold) {
	q.mu.Lock()
	if q.running < q.max {
		q.running++
		q.mu.Unlock()
		go q.run(l)
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

// unstall runs when calls have waited stall since ended calls had ended:
// if none ended since, one more goroutine starts on the first waiting
// call (past max: the running ones are stuck, in long tools or waiting
// for a queued call). While calls wait it looks again each stall.
func (q *parkQueue) unstall(ended uint64) {
	q.mu.Lock()
	if len(q.waiting) == 0 {
		q.watch = false
		q.mu.Unlock()
		return
	}
	var l *leanHold
	if q.ended == ended {
		l = q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		q.running++
	}
	now := q.ended
	time.AfterFunc(q.stall, func() { q.unstall(now) })
	q.mu.Unlock()
	if l != nil {
		go q.run(l)
	}
}

// run admits l, then the calls waiting, until none waits.
func (q *parkQueue) run(l *leanHold) {
	for l != nil {
		q.admit(l)
		l = q.next()
	}
}

// next takes the first waiting call, or, when none waits, ends the
// caller's turn as an admitting goroutine (nil).
func (q *parkQueue) next() *leanHold {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended++
	if len(q.waiting) == 0 {
		q.running--
		q.waiting = nil // a burst's backing array goes with it
		return nil
	}
	l := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
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
