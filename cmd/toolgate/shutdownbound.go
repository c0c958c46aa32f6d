package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// shutdownBound is how long serve may take to stop after SIGINT or SIGTERM
// before the process exits anyway, with status 1: the listeners' and
// sessions' grace (3 s, gateway.Options.ShutdownGrace and
// httpserve.DefaultShutdownTimeout), the upstreams' stop (stdin closed,
// then SIGTERM, then SIGKILL: 2 × the 1 s TerminateGrace), recording the
// last dispatch outcomes (5 s each at most) and the audit trail's last
// flush, with room to spare. Each part is bounded on its own, but not all
// of them are: a store that stopped answering (connections open, nothing
// relayed) kept the process past its "stopped" line for good, in the
// store's Close (branch ops38, TestSIGTERMBoundedWithFrozenStore).
const shutdownBound = 15 * time.Second

// shutdownWatch follows serve's shutdown for the log line of a shutdown
// that overran shutdownBound: the step it was at and what was still in
// flight. The zero value is ready; it is safe for concurrent use.
type shutdownWatch struct {
	mu     sync.Mutex
	step   string       // guarded by mu
	what   func() []any // guarded by mu; attributes of what is still in flight
	undoes []func()     // guarded by mu; run before the bound's exit
}

// at records the step the shutdown is at.
func (w *shutdownWatch) at(step string) {
	w.mu.Lock()
	w.step = step
	w.mu.Unlock()
}

// inFlight sets the function that describes, as log attributes, what
// would be cut off (calls in flight, approvals in dispatch).
func (w *shutdownWatch) inFlight(fn func() []any) {
	w.mu.Lock()
	w.what = fn
	w.mu.Unlock()
}

// beforeExit registers fn to run before the bound's exit: an undo that
// must not be skipped even when the process exits mid-shutdown, such as
// giving serve --stdio's stdout pipe back blocking (gateway.StdioOutput's
// done; ends40). fn must be safe to call again, from any goroutine, and
// while its owner still runs, and must not block.
func (w *shutdownWatch) beforeExit(fn func()) {
	w.mu.Lock()
	w.undoes = append(w.undoes, fn)
	w.mu.Unlock()
}

// arm starts, once signalled ends, a timer of bound that logs what the
// shutdown was doing and what it cut off, then calls exit(1). exit nil
// arms nothing (in-process tests, which must not exit). The returned stop
// disarms it (serve returned).
func (w *shutdownWatch) arm(signalled context.Context, bound time.Duration, log *slog.Logger, exit func(int)) (stop func()) {
	if exit == nil {
		return func() {}
	}
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	stopAfter := context.AfterFunc(signalled, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		timer = time.AfterFunc(bound, func() { w.overran(bound, log, exit) })
	})
	return func() {
		stopAfter()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	}
}

// overran logs that the shutdown overran bound, naming its step and what
// it cuts off, runs what beforeExit registered, and calls exit(1).
func (w *shutdownWatch) overran(bound time.Duration, log *slog.Logger, exit func(int)) {
	w.mu.Lock()
	step, what, undoes := w.step, w.what, slices.Clone(w.undoes)
	w.mu.Unlock()
	attrs := []any{"bound", bound, "step", step}
	if what != nil {
		attrs = append(attrs, what()...)
	}
	attrs = append(attrs, "note", "an approval cut off in dispatch stays consumed without an outcome until a live sweeper (another instance's, or this one's next start) records it unknown once its lease lapses")
	log.Error("shutdown did not finish within its bound; exiting now, cutting off what was still running", attrs...)
	for _, undo := range undoes {
		undo()
	}
	exit(1)
}
