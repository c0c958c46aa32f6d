package sqlstore

import (
	"context"
	"sync"
)

// A touchWorker runs the SQLite watch's touched callback on a goroutine of
// its own, so that the watch keeps polling data_version (and reporting
// changed(id), the wake-ups of decisions made elsewhere) while a touched
// runs: the gate's Touched reads the leases of every waited take-over in
// one batch, ≈ 30 ms with 10,000 waits, and every poll that saw a commit
// asks for one (docs/performance.md, branch list28).
//
// At most one touched runs at a time, and kicks coalesce: a kick while
// one runs leaves one more to run after it, however many polls kicked
// meanwhile. That keeps WatchLogTouched's promise: a touched begins after
// the poll that saw a commit (kick is called after that poll), so its
// read sees the commit; a kick during a touched whose read may have begun
// before the commit is followed by one more touched that begins after it.
type touchWorker struct {
	kicks chan struct{} // capacity 1: the one touched still to run
	wg    sync.WaitGroup
}

// startTouchWorker starts the worker calling touched until ctx is done;
// stop waits for it. touched is called from the worker's goroutine only,
// one call at a time.
func startTouchWorker(ctx context.Context, touched func()) *touchWorker {
	t := &touchWorker{kicks: make(chan struct{}, 1)}
	t.wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.kicks:
				if ctx.Err() != nil {
					return
				}
				touched()
			}
		}
	})
	return t
}

// kick asks for one touched after this call; it never blocks.
func (t *touchWorker) kick() {
	select {
	case t.kicks <- struct{}{}:
	default: // one is already due; it begins after this call
	}
}

// wait waits until the worker returned (its ctx is done and the touched
// in flight, if any, returned).
func (t *touchWorker) wait() { t.wg.Wait() }
