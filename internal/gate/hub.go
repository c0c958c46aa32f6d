package gate

import (
	"context"
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
// (a row that moved since, revoked, invalidated or consumed by anyone but
// this call's own earlier consume (its consume token), fails it and
// nothing runs), and a denial's answer is recorded only if still due.
// Subscribe before reading the store, so that no wake-up between the read
// and the wait is lost.
type hub struct {
	mu sync.Mutex
	// subs are the subscriptions of each request id, linked through
	// their next and prev (one allocation per subscription: a map per id
	// cost every held call about 130 B more); guarded by mu.
	subs map[string]*wakeup
	// deciding counts the decisions of this process being written, by
	// request id (see decide); guarded by mu.
	deciding map[string]int
	// held are the calls held in this process that a decision made here
	// may consume in its own transaction (see offer), by request id;
	// guarded by mu.
	held map[string]*heldConsume
	// offered, when set (by tests, before the hub is used), is called
	// under mu with the id of each call offered (see offer).
	offered func(id string)
}

// A heldConsume is a call held in this process, offered to the decisions
// made here on its request (hub.offer): a decision that approves it may
// consume it in the decision's own transaction, one write instead of two
// (docs/performance.md, "Approving them all"). claim is set by the
// decision that took it (hub.claim), guarded by hub.mu.
type heldConsume struct {
	gone func() error // the held call's context's Err: a decision does not consume for a caller gone
	// c is the held call, the hold's own (heldCall.c), read-only: not a
	// copy per offer.
	c     *Call
	claim *consumeClaim
}

// A consumeClaim is one decision's claim on a held call. The decision
// sets r and used, then closes done: used reports that its transaction
// consumed the request for the held call (or invalidated it at the
// consume's check) and r is the request as committed; otherwise nothing
// was consumed and the held call acts as if it had never been claimed.
type consumeClaim struct {
	done chan struct{}
	r    approval.Request
	k    *consumeCheck
	used bool
}

// A wakeup is one subscription: C is closed on the next wake-up, or, for
// a subscription of a held call waited for without a goroutine
// (subscribeFunc, heldasync.go), fn is called with it instead. After C is
// closed (fn called), decided is the request the waker wrote, or nil when
// the wake carried no row (read the store).
type wakeup struct {
	C       chan struct{}     // nil when fn is set
	fn      func(w *wakeup)   // called under hub.mu: must not block or take it
	decided *approval.Request // set before C is closed (fn called), read only after
	// id, next, prev and listed are its place in hub.subs; guarded by
	// hub.mu.
	id         string
	next, prev *wakeup
	listed     bool
}

func newHub() *hub {
	return &hub{subs: make(map[string]*wakeup), deciding: make(map[string]int), held: make(map[string]*heldConsume)}
}

// subscribe returns a subscription closed on the next wake-up of id (or of
// all), and a func that drops it.
func (h *hub) subscribe(id string) (*wakeup, func()) {
	return h.subscribeTo(&wakeup{C: make(chan struct{}), id: id, listed: true})
}

// subscribeFunc is subscribe for a waiter without a goroutine: fn is
// called with the subscription, under the hub's lock, on the next
// wake-up of id (or of all), instead of a channel being closed.
func (h *hub) subscribeFunc(id string, fn func(*wakeup)) (*wakeup, func()) {
	return h.subscribeTo(&wakeup{fn: fn, id: id, listed: true})
}

// notifyFunc makes the subscription w, made by subscribe and not yet
// woken, call fn on its wake-up instead of closing its channel (a held
// call handed from readAhead's subscription to a wait without a
// goroutine). It reports false, changing nothing, when w was woken
// already: its channel is closed and decided, if any, may be read.
func (h *hub) notifyFunc(w *wakeup, fn func(*wakeup)) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !w.listed {
		return false
	}
	w.fn = fn
	return true
}

func (h *hub) subscribeTo(w *wakeup) (*wakeup, func()) {
	id := w.id
	h.mu.Lock()
	if head := h.subs[id]; head != nil {
		w.next, head.prev = head, w
	}
	h.subs[id] = w
	h.mu.Unlock()
	return w, func() { h.unsubscribe(w) }
}

// unsubscribe drops w from its id's subscriptions, unless a wake-up took
// it already.
func (h *hub) unsubscribe(w *wakeup) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !w.listed {
		return
	}
	switch {
	case w.prev != nil:
		w.prev.next = w.next
	case w.next != nil:
		h.subs[w.id] = w.next
	default:
		delete(h.subs, w.id)
	}
	if w.next != nil {
		w.next.prev = w.prev
	}
	w.next, w.prev, w.listed = nil, nil, false
}

// wakeList closes the subscriptions from w on (one id's list), handing
// them r; mu is held.
func wakeList(w *wakeup, r *approval.Request) {
	for w != nil {
		next := w.next
		w.decided = r
		w.next, w.prev, w.listed = nil, nil, false
		if w.fn != nil {
			w.fn(w)
		} else {
			close(w.C)
		}
		w = next
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
	wakeList(h.subs[id], r)
	delete(h.subs, id)
}

// wakeAll closes every subscription.
func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.subs {
		wakeList(w, nil)
	}
	clear(h.subs)
}

// offer registers the call c, held on request id in this process while
// ctx lasts, for a decision made here to consume (claim). withdraw ends the offer; it
// returns the claim of a decision that took the call (nil when none did),
// whose done the caller must wait for: the decision may be consuming the
// request for c. At most one call is offered per request (its holder); a
// second offer of id replaces none and is never claimed.
func (h *hub) offer(ctx context.Context, id string, c *Call) (withdraw func() *consumeClaim) {
	hc := &heldConsume{gone: ctx.Err, c: c}
	h.mu.Lock()
	if _, taken := h.held[id]; taken {
		h.mu.Unlock()
		return func() *consumeClaim { return nil }
	}
	h.held[id] = hc
	if h.offered != nil {
		h.offered(id)
	}
	h.mu.Unlock()
	return func() *consumeClaim {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.held[id] == hc {
			delete(h.held, id)
		}
		return hc.claim
	}
}

// claim takes the call offered on id for one decision, with the Err of
// the call's context (non-nil once the caller is gone), or returns nil
// (none offered, or another decision holds it). The decision must call
// release exactly once, after its transaction, with the request as
// committed and whether that transaction consumed it for the call.
func (h *hub) claim(id string) (gone func() error, c *Call, cl *consumeClaim, release func(r approval.Request, used bool)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hc := h.held[id]
	if hc == nil || hc.claim != nil {
		return nil, nil, nil, nil
	}
	cl = &consumeClaim{done: make(chan struct{})}
	hc.claim = cl
	return hc.gone, hc.c, cl, func(r approval.Request, used bool) {
		cl.r, cl.used = r, used
		if !used {
			// Another decision may claim the call again.
			h.mu.Lock()
			if hc.claim == cl {
				hc.claim = nil
			}
			h.mu.Unlock()
		}
		close(cl.done)
	}
}
