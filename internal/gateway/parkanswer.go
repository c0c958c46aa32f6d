package gateway

import (
	"time"
)

// Answering parked calls a bounded number at a time (issue 13: the peak
// while 10,000 held calls are approved). A parked call waited for without
// a goroutine (gate.Gate.WaitHoldFunc) is answered, once decided, on the
// gate's goroutine that ended its wait (heldDone): the call runs on its
// upstream, its outcome is recorded, its answer written. Approvals can
// come faster than calls run (32 approvers on SQLite: hundreds a second,
// the upstream and the outcome writes slower), and each decided call had
// a goroutine of its own until it was answered: 12,699 goroutines, 108 MB
// of stacks and 295 MB of heap in use at approve-all's peak (536.7 MB RSS)
// with 10,000 held calls on SQLite (docs/performance.md, "peak33"). The
// decided calls now wait in a parkQueue that keeps only their *leanHold,
// and at most parkAnswerers goroutines answer them in the order they were
// decided; the gate's goroutine ends as soon as the call is queued.

// parkAnswerers bounds how many decided parked calls are answered (run on
// their upstream, recorded, written) at once while their answers are
// quick: as many as the admissions (admitSlotsMax), more than the store's
// group commit and an upstream's pipe take at once, and few enough that
// their stacks and buffers stay small (128 × ≈ 40 KB). An answer that has
// run for parkAnswerStall (a long tool, a client reading slowly) no longer
// counts against it (parkQueue.stall), so a decided call waits at most
// about two stalls behind such answers, up to 4 × parkAnswerers answers in
// flight (stallMost), and past that one more each stall in which none ends.
const parkAnswerers = admitSlotsMax

// parkAnswerStall is answerQ's stall: how long an answer runs before it
// stops holding back the decided calls that wait (see parkAnswerers).
const parkAnswerStall = time.Second

// newAnswerQueue is the gateway's answerQ.
func newAnswerQueue() *parkQueue {
	q := newParkQueue(parkAnswerers, (*leanHold).answerQueued)
	q.stall = parkAnswerStall
	return q
}

// answerQueued answers the decided parked call l (heldDone) on one of the
// gateway's answering goroutines (answerQ). What the client sends on the
// connection after the answer (a kept-alive 2025-era session's next
// request) is served on net/http's connection goroutine of a server of
// the gateway's own (httpFront.serveRest, which returns once it
// handed the connection over): an answering goroutine that served it
// would stay with the connection until the client closed it (all 128 did
// at 640 of 10,000 answers, and answering stopped).
func (l *leanHold) answerQueued() {
	defer l.f.g.wg.Done()
	l.answerParked()
}
