package gate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/telemetry"
)

// Leases. A holder's claim on a request is a lease (approval.Request.HeldBy
// and LeaseUntil) that lapses unless renewed: a held call's pending or
// approved request, and a consumed request until its dispatch outcome is
// recorded. The gate renews the leases of every request this process holds
// in one batch per Lease/3 (Store.RenewLeases: on sqlstore one write of
// this instance's lease row, the held requests taking their lease from it;
// docs/architecture.md, "Instance leases"), not one write per request.

// leaseKind says why this process holds a lease.
type leaseKind uint8

const (
	// leaseHold: a call of this process waits on the request (hold mode).
	leaseHold leaseKind = 1 << iota
	// leaseDispatch: this process consumed the request and has not
	// recorded its dispatch outcome yet.
	leaseDispatch
	// leaseCreating: set with leaseHold while this process creates the
	// request (the row may not exist yet, or not be visible to a renewal
	// yet). A renewal leaves such an id out (ids): the creation writes the
	// row with a lease of its own (approval.Request.Renew), the next
	// renewal takes it, and nothing but its creator can have changed a
	// request being created. Named in the batch, the id was missing from
	// the store's answer and its held call was woken to read a request it
	// had just written: on Postgres, in a burst of admissions, every
	// renewal (each Lease/3) woke the hundreds to thousands of calls whose
	// creation was queued for a pool connection, and each woken wait kept
	// the whole request it read (docs/performance.md, "heldpeak2").
	leaseCreating
)

// leases is the set of requests whose leases this process renews.
type leases struct {
	// renewing serializes a renewal batch with releases: a lease released
	// while a batch that names it is in flight could otherwise be extended
	// again after its release.
	renewing sync.Mutex

	mu   sync.Mutex
	held map[approval.ID]leaseKind // guarded by mu

	// unmarked, guarded by renewing: the last renewal named no id and
	// succeeded, so the store has no request marked for this instance
	// (only a renewal marks one, and one naming no id unmarks every
	// marked request). Until an id is held again a renewal has nothing
	// to do and is skipped: an idle process writes nothing every Lease/3.
	unmarked bool
}

func newLeases() *leases { return &leases{held: map[approval.ID]leaseKind{}} }

// add marks id as held for k.
func (l *leases) add(id approval.ID, k leaseKind) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[id] |= k
}

// drop unmarks id for k; with wait set, it returns only once no renewal
// batch that may name id is in flight, so a release written afterwards is
// not undone by that batch.
func (l *leases) drop(id approval.ID, k leaseKind, wait bool) {
	if wait {
		l.renewing.Lock()
		defer l.renewing.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.held[id] &^ k; v == 0 {
		delete(l.held, id)
	} else {
		l.held[id] = v
	}
}

// has reports whether id is held for k.
func (l *leases) has(id approval.ID, k leaseKind) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[id]&k != 0
}

// ids returns every id held, sorted, except those still being created
// (leaseCreating).
func (l *leases) ids() []approval.ID {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]approval.ID, 0, len(l.held))
	for id, k := range l.held {
		if k&leaseCreating == 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// renewLeases renews every lease this process holds, every Lease/3, until
// ctx ends; while it holds none and the last renewal left nothing marked,
// it skips the store (leases.unmarked). A request missing from the store's
// answer was taken over or settled elsewhere: its waiter is woken to
// re-read it. Whether the store answered is recorded for the sweeper
// (storeHealth).
func (g *Gate) renewLeases(ctx context.Context) {
	t := time.NewTicker(g.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.renewOnce(ctx)
	}
}

// renewOnce renews the leases held now in one batch.
func (g *Gate) renewOnce(ctx context.Context) {
	g.leases.renewing.Lock()
	defer g.leases.renewing.Unlock()
	ids := g.leases.ids()
	if len(ids) == 0 && g.leases.unmarked {
		return // nothing held, nothing marked (leases.unmarked); the sweeper reports the store's health
	}
	rctx, cancel := context.WithTimeout(ctx, g.opts.Lease)
	defer cancel()
	renewed, err := g.store.RenewLeases(rctx, g.instance, ids, g.now().Add(g.opts.Lease))
	g.health.report(err, g.now())
	g.leases.unmarked = err == nil && len(ids) == 0
	if err != nil {
		if ctx.Err() == nil {
			g.metrics.StoreError(telemetry.StoreOpLeaseRenewal)
			g.log.WarnContext(ctx, "cannot renew the leases of held approvals; retrying", "held", len(ids), "err", err)
		}
		return
	}
	if len(renewed) == len(ids) {
		return
	}
	// renewed is ids less the missing ones, in the same order: walked
	// beside ids, without a set of the (thousands of) ids renewed.
	j := 0
	for _, id := range ids {
		if j < len(renewed) && renewed[j] == id {
			j++
			continue
		}
		g.hub.wake(string(id))
	}
}

// storeHealth remembers since when the store has answered without a
// failure, so that the sweeper does not call a dispatch outcome unknown
// because its holder could not renew during an outage: after the store
// comes back, a live holder renews within Lease/3.
type storeHealth struct {
	mu     sync.Mutex
	failed bool      // guarded by mu: the last call failed
	since  time.Time // guarded by mu: when the current run of successes began
}

// report records the outcome of a store call made at now.
func (h *storeHealth) report(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil && (errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)):
		h.failed = true
	case err == nil && h.failed:
		h.failed, h.since = false, now
	}
}

// steadyFor reports whether the store has answered without failing for at
// least d before now (ever since the gate started, if it never failed).
func (h *storeHealth) steadyFor(d time.Duration, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.failed && !now.Before(h.since.Add(d))
}
