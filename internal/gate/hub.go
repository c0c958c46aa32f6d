package gate

import (
	"sync"

	"toolgate/internal/approval"
)

// A hub wakes waiters when a request may have changed. The store is the
// truth: a woken waiter re-reads it, except when the wake carries the
// request as the waker has just written it (wakeDecided) and it is no
// longer pending; the waiter then acts on that row without reading it
// again (docs/performance.md, "Approving them all"). That is safe because
// everything a decided row leads to is a conditional write that re-checks
// the stored row: the consume is a compare-and-set on the approved state
// (a row that moved since, revoked, invalidated or consumed, fails it and
// nothing runs), and a denial's answer is recorded only if still due.
// Subscribe before reading the store, so that no wake-up between the read
// and the wait is lost.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*wakeup]struct{} // guarded by mu; key is the request id
	// deciding counts the decisions of this process being written, by
	// request id (see decide); guarded by mu.
	deciding map[string]int
}

// A wakeup is one subscription: C is closed on the next wake-up. After C
// is closed, decided is the request the waker wrote, or nil when the wake
// carried no row (read the store).
type wakeup struct {
	C       chan struct{}
	decided *approval.Request // set before C is closed, read only after
}

func newHub() *hub {
	return &hub{subs: make(map[string]map[*wakeup]struct{}), deciding: make(map[string]int)}
}

// subscribe returns a subscription closed on the next wake-up of id (or of
// all), and a func that drops it.
func (h *hub) subscribe(id string) (*wakeup, func()) {
	w := &wakeup{C: make(chan struct{})}
	h.mu.Lock()
	m := h.subs[id]
	if m == nil {
		m = make(map[*wakeup]struct{})
		h.subs[id] = m
	}
	m[w] = struct{}{}
	h.mu.Unlock()
	return w, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if m, ok := h.subs[id]; ok {
			if _, ok := m[w]; ok {
				delete(m, w)
				if len(m) == 0 {
					delete(h.subs, id)
				}
			}
		}
	}
}

// wake closes every subscription of id; its waiters re-read the store.
// While a decision of this process on id is being written (decide), the
// wake-up is left to that decision's, which always follows: the store's
// watcher sees the decision's own commit (a Postgres NOTIFY) and would
// otherwise often wake the waiter first, making it read the row the
// decision is about to hand it.
func (h *hub) wake(id string) {
	h.mu.Lock()
	busy := h.deciding[id] > 0
	h.mu.Unlock()
	if !busy {
		h.wakeDecided(id, nil)
	}
}

// decide marks a decision on id as being written and returns the func
// that ends the mark and wakes id's waiters: with the request as written
// (wakeDecided) when r is not nil and no longer pending, else plainly.
// The func must be called exactly once, whatever the write's outcome.
func (h *hub) decide(id string) (done func(r *approval.Request)) {
	h.mu.Lock()
	h.deciding[id]++
	h.mu.Unlock()
	return func(r *approval.Request) {
		h.mu.Lock()
		if h.deciding[id]--; h.deciding[id] <= 0 {
			delete(h.deciding, id)
		}
		h.mu.Unlock()
		if r != nil && r.State == approval.StatePending {
			r = nil
		}
		h.wakeDecided(id, r)
	}
}

// wakeDecided closes every subscription of r's id handing them r, the
// request as the caller's committed write left it (see hub); r nil is
// wake. The waiters share r and must not modify it.
func (h *hub) wakeDecided(id string, r *approval.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs[id] {
		w.decided = r
		close(w.C)
	}
	delete(h.subs, id)
}

// wakeAll closes every subscription.
func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for w := range m {
			close(w.C)
		}
	}
	clear(h.subs)
}
