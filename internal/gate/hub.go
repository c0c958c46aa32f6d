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
}

// A wakeup is one subscription: C is closed on the next wake-up. After C
// is closed, decided is the request the waker wrote, or nil when the wake
// carried no row (read the store).
type wakeup struct {
	C       chan struct{}
	decided *approval.Request // set before C is closed, read only after
}

func newHub() *hub { return &hub{subs: make(map[string]map[*wakeup]struct{})} }

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
func (h *hub) wake(id string) { h.wakeDecided(id, nil) }

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
