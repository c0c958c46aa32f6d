package gate

import (
	"context"
	"sync"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// touchReadTimeout bounds Touched's one read of the waited leases.
const touchReadTimeout = 5 * time.Second

// touchWaits are the take-over waits on another instance's lease that
// Touched may wake (waitForeignLease; resume's wait on a live holder
// elsewhere). On SQLite the watch calls Touched after every poll that
// saw another connection's commit: a release of a lease writes no event
// it could name. Touched reads the leases of every waited request in one
// batch (store.Store.EachLease: one statement per few hundred ids) and
// wakes only the waits whose request's state, holder or lease moved, so
// that N waits cost a few statements per Touched instead of N reads
// (attack26: 10,000 re-sends after a crash, ≈ 40,000 reads a second).
//
// No wake-up is lost: a wait registers (add) before it reads its request,
// then notes what it read (saw). A commit that the watch reports with a
// Touched is committed before that Touched's read begins, so the read
// sees it; a wait whose read came before the commit saw the old lease and
// is woken, one whose read came after saw the commit itself, and one
// that registered but has not noted its read yet when the batch is
// compared is woken whatever the batch read (it re-reads: one read more,
// never one missed).
type touchWaits struct {
	mu    sync.Mutex
	waits map[*touchWait]struct{} // guarded by mu
}

// A touchWait is one registered wait: C is closed when Touched finds its
// request changed (or cannot tell).
type touchWait struct {
	id approval.ID
	C  chan struct{}
	// seen is the lease the wait read, once read is set; guarded by
	// touchWaits.mu, like listed.
	seen   store.Lease
	read   bool
	listed bool
}

// add registers a wait on request id's lease, before the wait reads it.
func (t *touchWaits) add(id approval.ID) *touchWait {
	w := &touchWait{id: id, C: make(chan struct{}), listed: true}
	t.mu.Lock()
	if t.waits == nil {
		t.waits = make(map[*touchWait]struct{})
	}
	t.waits[w] = struct{}{}
	t.mu.Unlock()
	return w
}

// saw notes r as what wait w read of its request.
func (t *touchWaits) saw(w *touchWait, r approval.Request) {
	t.mu.Lock()
	w.seen = store.Lease{ID: r.ID, State: r.State, HeldBy: r.HeldBy, LeaseUntil: r.LeaseUntil}
	w.read = true
	t.mu.Unlock()
}

// drop ends w's registration; it may be called more than once.
func (t *touchWaits) drop(w *touchWait) {
	t.mu.Lock()
	if w.listed {
		delete(t.waits, w)
		w.listed = false
	}
	t.mu.Unlock()
}

// wakeLocked closes w's channel and ends its registration; t.mu is held.
func (t *touchWaits) wakeLocked(w *touchWait) {
	if w.listed {
		delete(t.waits, w)
		w.listed = false
		close(w.C)
	}
}

// moved reports whether l, as read now, differs from what a wait saw in
// a way it acts on: another state or holder, a lease that ends sooner (a
// release), or the request gone. A lease renewed by its holder (a later
// end) wakes nobody: the waits look again when the lease they read would
// have ended.
func moved(seen store.Lease, l store.Lease, found bool) bool {
	return !found || l.State != seen.State || l.HeldBy != seen.HeldBy || l.LeaseUntil.Before(seen.LeaseUntil)
}

// touched is Touched: one batched read of the waited leases, then the
// waits whose request moved (or that had not read it yet) are woken. A
// failed read wakes every wait (each reads its own request again, as
// before the batch).
func (g *Gate) touched(ctx context.Context) {
	t := &g.touch
	t.mu.Lock()
	if len(t.waits) == 0 {
		t.mu.Unlock()
		return
	}
	ids := make([]approval.ID, 0, len(t.waits))
	seenID := make(map[approval.ID]struct{}, len(t.waits))
	for w := range t.waits {
		if _, dup := seenID[w.id]; !dup {
			seenID[w.id] = struct{}{}
			ids = append(ids, w.id)
		}
	}
	t.mu.Unlock()

	now := make(map[approval.ID]store.Lease, len(ids))
	ctx, cancel := context.WithTimeout(ctx, touchReadTimeout)
	err := g.store.EachLease(ctx, ids, func(l store.Lease) { now[l.ID] = l })
	cancel()

	t.mu.Lock()
	defer t.mu.Unlock()
	for w := range t.waits {
		if _, asked := seenID[w.id]; !asked {
			continue // registered after the ids were taken: it reads after this read began
		}
		l, found := now[w.id]
		if err != nil || !w.read || moved(w.seen, l, found) {
			t.wakeLocked(w)
		}
	}
}
