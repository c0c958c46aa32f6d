package gateway

import (
	"context"
	"time"
)

// A lean call's two watches — the POST's end, which cancels the call
// (ErrClientGone, after DropGrace), and the POST's heartbeats — matter
// only while the call waits. An allowed call dispatched raw to a stdio
// session arms them once its line is written to the child (in
// rawCalls.sendBounded, through the call's origin), so neither the
// context.AfterFunc on net/http's request context nor the heartbeat's
// timer is on the path between the agent's request and the line (issue
// 13: at one call in flight every µs there is the call's). Every other
// way arms them before it can wait: a held call its POST-end watch
// before it is held (serveLean; its heartbeats are the hold's), a
// per-agent session before it is opened and an HTTP upstream before its
// POST (callRawProgress), the SDK's path before the call
// (dispatchLean); a refusal never waits and arms nothing. A client that
// went away before they were armed is seen at once: context.AfterFunc on
// a context that ended runs its func then.

// A leanWatch arms a lean call's watches once (arm).
type leanWatch struct {
	// end is the POST's context (http.Request.Context), which ends with
	// it: kept, as origin.ctx is, because the watch is armed later on
	// the call's way down, where only the call's own context is passed.
	end    context.Context         //nolint:containedctx // see above
	cancel context.CancelCauseFunc // the call's own context's
	grace  time.Duration           // HTTPOptions.DropGrace
	hb     *heartbeatWriter        // the POST's heartbeats

	armed bool
	stop  func() bool // the POST-end watch's, once armed (leanCleanups.stop)
}

// arm arms w's watches unless they are armed already. Only the call's
// own goroutine calls it.
func (w *leanWatch) arm() {
	if w == nil || w.armed {
		return
	}
	w.armed = true
	w.watchEnd()
	w.hb.arm()
}

// watchEnd arms the watch on the POST's end alone (a held call's
// heartbeats are its hold's: leanHold.wait), unless it is armed already
// (before an agent session's policy read: serveLean).
func (w *leanWatch) watchEnd() {
	if w.stop != nil {
		return
	}
	cancel, grace := w.cancel, w.grace
	w.stop = context.AfterFunc(w.end, func() {
		time.AfterFunc(grace, func() { cancel(ErrClientGone) })
	})
}

// armWatch arms the watches of the lean call o serves, if any (see
// leanWatch); o may be nil.
func (o *origin) armWatch() {
	if o != nil {
		o.watch.arm()
	}
}
