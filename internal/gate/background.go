package gate

import "sync"

// A background is a group of the gate's background writers (dispatch
// outcomes the store could not take at once, releases of leases) that Run
// waits for before it returns, after which serve closes the store. None
// begins once Run has begun to wait (stop): one begun then was not waited
// for and wrote after Run returned, its Go racing the Wait (attack25's
// releases, fixes26's outcome writers).
type background struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// start runs begin under the group's lock, unless the group is stopped,
// and reports whether it ran. begin starts the group's goroutines with
// wg.Go (or none, when it finds nothing to do).
func (b *background) start(begin func(wg *sync.WaitGroup)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	begin(&b.wg)
	return true
}

// stop makes every later start refuse; Wait then waits for all that began.
func (b *background) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
}

// Wait waits for the goroutines started so far.
func (b *background) Wait() { b.wg.Wait() }
