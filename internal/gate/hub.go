package gate

import "sync"

// A hub wakes waiters when a request may have changed. It carries no data:
// the store is the truth, and a woken waiter re-reads it. Subscribe before
// reading the store, so that no wake-up between the read and the wait is lost.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{} // guarded by mu; key is the request id
}

func newHub() *hub { return &hub{subs: make(map[string]map[chan struct{}]struct{})} }

// subscribe returns a channel closed on the next wake-up of id (or of all),
// and a func that drops the subscription.
func (h *hub) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	m := h.subs[id]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		h.subs[id] = m
	}
	m[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if m, ok := h.subs[id]; ok {
			if _, ok := m[ch]; ok {
				delete(m, ch)
				if len(m) == 0 {
					delete(h.subs, id)
				}
			}
		}
	}
}

// wake closes every subscription of id.
func (h *hub) wake(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[id] {
		close(ch)
	}
	delete(h.subs, id)
}

// wakeAll closes every subscription.
func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for ch := range m {
			close(ch)
		}
	}
	clear(h.subs)
}
