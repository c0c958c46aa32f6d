package gate

import (
	"context"
	"sync"
	"time"

	"toolgate/internal/approval"

	"go.opentelemetry.io/otel/trace"
)

// Held calls waited for without a goroutine (issue 13, docs/performance.md
// "heldwait"). WaitHold parks one goroutine per held call in waitFor for
// the whole hold (≈ 4 KiB of stack each at 10,000 held calls). A call
// waited for with WaitHoldFunc keeps none: it is an asyncHold, reached
// only through its events,
//
//   - a wake-up of its request (a hub subscription made by subscribeFunc,
//     whose callback runs under the hub's lock),
//   - its deadline (one runtime timer, time.AfterFunc: the runtime's own
//     timer heap, driven by no goroutine of the gate),
//   - a read retry while the store cannot be read (another AfterFunc, set
//     only then),
//   - the end of its context (context.AfterFunc: the caller cancelled,
//     its connection went away, or the gateway is closing),
//
// each of which records itself and, unless one runs already, starts a
// short-lived goroutine (run) that does what waitFor's loop does for
// that event: take a decided request from the wake-up, or end the
// subscription, subscribe again and read the store (subscribing before
// reading, so that a wake-up between the two is not lost: it either
// precedes the read, which sees its change, or fires the new
// subscription, which runs another step). Events that arrive while a step
// runs are taken by the same goroutine before it ends, so steps of one
// call never run at once and none is dropped. When the wait is over the
// same goroutine settles it as WaitHold does after waitFor (endHold,
// afterHold, endAdmit) and hands the answer to the caller's done.
//
// A call with keep-alives (Call.KeepAlive: SDK-path calls that carry a
// progress token) is waited for on a goroutine of its own, as WaitHold:
// the gateway's parked 2026-07-28 calls, the one caller, have none.

// Events of an asyncHold, a set.
const (
	evStart    uint8 = 1 << iota // the wait's first read (no read made ahead)
	evWake                       // a subscription's wake-up (asyncHold.woken)
	evDeadline                   // the deadline's timer
	evRetry                      // the retry's timer (the store could not be read)
	evCancel                     // the call's context ended
)

// An asyncHold is a held call waited for without a goroutine (see above).
type asyncHold struct {
	g    *Gate
	ctx  context.Context //nolint:containedctx // the hold's context (WaitHold's hctx), for endHold and afterHold
	wctx context.Context //nolint:containedctx // ctx with the wait's span: what the reads run under
	h    *heldCall
	w    *holdWait
	done func(*Admission)
	// admitEnd: finish ends the admission's span (endAdmit), as WaitHold.
	admitEnd bool

	stopCtx func() bool // ends the watch on wctx

	// got and err are what the wait ended on (waitFor's results); owned
	// by the step that ends it.
	got *approval.Request
	err error

	mu sync.Mutex
	// ev are the events not yet taken by a step; woken the subscription
	// whose wake-up was the last evWake. running is set while a step's
	// goroutine runs, and stays set once the wait ended. Guarded by mu.
	ev      uint8
	woken   *wakeup
	running bool
}

// WaitHoldFunc is WaitHold without a goroutine waiting: it returns at
// once, and done is called exactly once, with the answer WaitHold would
// have returned, on a goroutine of the gate's that ends when done
// returns (done may block; it writes the answer). Until then the call
// costs its asyncHold, a hub subscription and two runtime timers (see
// above). hctx is the context AdmitOrHold returned; its end (cancel,
// caller gone, shutdown) ends the wait as it ends WaitHold's.
func (g *Gate) WaitHoldFunc(hctx context.Context, hc HeldCall, done func(*Admission)) {
	h := hc.h
	if h.c.KeepAlive != nil {
		// Keep-alives come from the gate's beat, a channel: this call
		// waits on a goroutine (see above).
		go func() { done(g.WaitHold(hctx, hc)) }()
		return
	}
	g.holdEvents(hctx, h, true, done)
}

// holdEvents holds h's call on its request as holdOn does, without a
// goroutine (see above), and calls done with the answer after afterHold
// (and endAdmit when admitEnd is set, as WaitHold). h's call has no
// keep-alives.
func (g *Gate) holdEvents(hctx context.Context, h *heldCall, admitEnd bool, done func(*Admission)) {
	wctx, w := g.startWait(hctx, h)
	a := &asyncHold{g: g, ctx: hctx, wctx: wctx, h: h, w: w, done: done, admitEnd: admitEnd}
	st := w.st
	st.onRetry = a.onRetry
	// No step runs before the wait is set up: events that come meanwhile
	// are only recorded (kick). a.mu is not held here, so that the hub's
	// lock is never taken under it (a wake-up takes a.mu under the hub's).
	a.running = true
	var ev uint8
	var woken *wakeup
	if st.ahead {
		// Subscribed and read already, on the admitting goroutine: the
		// subscription now calls back, or was woken meanwhile.
		st.ahead = false
		if !g.hub.notifyFunc(st.woke, a.onWake) {
			ev, woken = evWake, st.woke
		}
	} else {
		ev = evStart
	}
	st.timer = time.AfterFunc(st.deadline.Sub(g.now()), a.onDeadline) // set again by readHeld if due early (heldRead.due)
	a.stopCtx = context.AfterFunc(wctx, a.onCancel)
	a.mu.Lock()
	a.ev |= ev
	if woken != nil && a.woken == nil {
		a.woken = woken
	}
	start := a.ev != 0
	a.running = start
	a.mu.Unlock()
	if start {
		go a.run()
	}
}

func (a *asyncHold) onWake(w *wakeup) { a.kick(evWake, w) }
func (a *asyncHold) onDeadline()      { a.kick(evDeadline, nil) }
func (a *asyncHold) onRetry()         { a.kick(evRetry, nil) }
func (a *asyncHold) onCancel()        { a.kick(evCancel, nil) }

// kick records the event ev (w: the subscription woken, for evWake) and
// starts a step unless one runs (or the wait ended).
func (a *asyncHold) kick(ev uint8, w *wakeup) {
	a.mu.Lock()
	a.ev |= ev
	if w != nil {
		a.woken = w
	}
	start := !a.running
	a.running = true
	a.mu.Unlock()
	if start {
		go a.run()
	}
}

// run takes the events recorded and steps the wait until none is left,
// or settles it once it is over.
func (a *asyncHold) run() {
	for {
		a.mu.Lock()
		ev, woken := a.ev, a.woken
		a.ev, a.woken = 0, nil
		if ev == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		if a.step(ev, woken) {
			a.finish()
			return
		}
	}
}

// step does what waitFor does for the events ev (woken: the subscription
// of the last wake-up, if any) and reports whether the wait is over
// (a.got, a.err set).
func (a *asyncHold) step(ev uint8, woken *wakeup) bool {
	st := a.w.st
	if ev&evCancel != 0 || a.wctx.Err() != nil {
		if st.unsub != nil { // nil before the first read's subscription
			st.unsub()
		}
		a.got, a.err = new(approval.Request), context.Cause(a.wctx)
		return true
	}
	current := woken != nil && woken == st.woke
	if current && st.takeDecided(woken) {
		st.unsub()
		a.got, a.err = st.result(), nil
		return true
	}
	if !current && ev&(evStart|evDeadline|evRetry) == 0 {
		// Only the wake-up of a subscription ended since: the read made
		// after it began sees its change.
		return false
	}
	// Read again (a wake-up without a row, the deadline: a decision may
	// have landed at it, the retry), subscribed first.
	if ev&evDeadline != 0 {
		st.due = true
	}
	if st.unsub != nil {
		st.unsub()
	}
	st.woke, st.unsub = a.g.hub.subscribeFunc(string(st.id), a.onWake)
	if done, err := a.g.readHeld(a.wctx, st); done {
		st.unsub()
		a.got, a.err = st.result(), err
		return true
	}
	return false
}

// finish settles the wait as WaitHold does after waitFor and hands the
// answer to done.
func (a *asyncHold) finish() {
	g, h := a.g, a.h
	a.w.st.timer.Stop()
	a.stopCtx()
	a.w.st.stop()
	adm := g.endHold(a.ctx, h, a.w, a.got, a.err)
	g.afterHold(a.ctx, h, adm)
	if a.admitEnd {
		g.endAdmit(trace.SpanFromContext(a.ctx), adm)
	}
	a.done(adm)
}

// heldEventsInTests makes Admit wait for held calls on the gate's events
// (holdEvents) instead of on its goroutine; set only by the gate's tests
// (TestMain, TOOLGATE_HELD_EVENTS=1).
var heldEventsInTests bool
