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
	held map[approval.ID]leaseMark // guarded by mu
	last holdMark                  // the last hold's mark (hold); guarded by mu
	// inRelease are the holds being released (release), each with the
	// channel closed when its release was written (or failed); nil until
	// the first release. Guarded by mu.
	inRelease map[approval.ID]*release

	// batch is the renewal's ids, sorted (the store looks its rows up in
	// them), kept from one renewal to the next (guarded by renewing; its
	// rebuild reads held under mu too): 16 bytes per held call, not
	// allocated again every Lease/3 (docs/performance.md, "held23"), and
	// not collected from held and sorted again while nothing changed
	// (renewalIDs; "held24"). It may still name ids dropped since the
	// last renewal, until the next one.
	batch []approval.ID
	// added are the ids that became renewable (marked, not creating)
	// since batch was built, in the order they did; removed, that one
	// stopped being renewable. Guarded by mu.
	added   []approval.ID
	removed bool

	// unmarked, guarded by renewing: the last renewal named no id and
	// succeeded, so the store has no request marked for this instance
	// (only a renewal marks one, and one naming no id unmarks every
	// marked request). Until an id is held again a renewal has nothing
	// to do and is skipped: an idle process writes nothing every Lease/3.
	unmarked bool
}

// release is a release of a hold in flight (leases.inRelease).
type release struct {
	done chan struct{}
	n    int // releases of the id in flight
}

// A holdMark names the leaseHold mark of one hold (leases.hold); 0 names
// none. A hold ends only the mark it made (unhold): an abandoned hold let
// go of its mark when it released its lease and again after its wait, and
// an identical re-send that took the request over in between lost its
// mark to the second drop (its lease no longer renewed while it waited,
// and a second re-send could take the request over too; closing22).
type holdMark uint64

// leaseMark is why this process holds a request's lease, and, with
// leaseHold, whose hold it is.
type leaseMark struct {
	kinds leaseKind
	hold  holdMark // the hold of leaseHold; 0 without
}

func newLeases() *leases { return &leases{held: map[approval.ID]leaseMark{}} }

// hold marks id as held (leaseHold, with leaseCreating while creating)
// for a new hold, and returns its mark, which ends it (unhold).
func (l *leases) hold(id approval.ID, creating bool) holdMark {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	k := leaseHold
	if creating {
		k |= leaseCreating
	}
	m := l.held[id]
	l.put(id, m, leaseMark{kinds: m.kinds | k, hold: l.last})
	return l.last
}

// unhold ends the hold m of id (leaseHold and leaseCreating) and reports
// whether it did: a mark another hold made since is left alone.
func (l *leases) unhold(id approval.ID, m holdMark) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unholdLocked(id, m)
}

// unholdLocked is unhold with l.mu held.
func (l *leases) unholdLocked(id approval.ID, m holdMark) bool {
	cur, ok := l.held[id]
	if m == 0 || !ok || cur.hold != m {
		return false
	}
	l.put(id, cur, leaseMark{kinds: cur.kinds &^ (leaseHold | leaseCreating)})
	return true
}

// release ends the hold m of id (as unhold) for a release of its lease
// in the store, and returns end, to call once that release was written
// (or failed), or nil when m is not id's hold (nothing to release). It
// returns only once no renewal batch that may name id is in flight, so
// the release written afterwards is not undone by that batch. Until end
// is called, the store still shows this process's lease, which no live
// call of this process holds any more: an identical re-send here waits
// for the release (claim) instead of for the lease to lapse.
func (l *leases) release(id approval.ID, m holdMark) (end func()) {
	if m == 0 {
		return nil
	}
	l.renewing.Lock()
	defer l.renewing.Unlock()
	return l.releaseMark(id, m)
}

// releaseMark is release without waiting for a renewal batch in flight:
// before writing the release, its caller waits for one (afterBatch).
func (l *leases) releaseMark(id approval.ID, m holdMark) (end func()) {
	if m == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.unholdLocked(id, m) {
		return nil
	}
	if l.inRelease == nil {
		l.inRelease = map[approval.ID]*release{}
	}
	rel := l.inRelease[id]
	if rel == nil {
		rel = &release{done: make(chan struct{})}
		l.inRelease[id] = rel
	}
	rel.n++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if rel.n--; rel.n == 0 {
			delete(l.inRelease, id)
			close(rel.done)
		}
	}
}

// afterBatch returns once no renewal batch that began before it is in
// flight: one that named an id whose mark ended before (releaseMark) has
// ended, and none begun since names it.
func (l *leases) afterBatch() {
	l.renewing.Lock()
	defer l.renewing.Unlock()
}

// claim makes a new hold of id, as hold does, and returns its mark,
// unless this process holds id (for any kind) or a release of its hold is
// in flight: then m is 0, and released, for a release in flight, is
// closed once that release was written. A take-over calls it in the
// transaction that writes the lease, so that two re-sends of this process
// never both take the request over: the second one sees the first one's
// mark.
func (l *leases) claim(id approval.ID) (m holdMark, released <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rel := l.inRelease[id]; rel != nil {
		return 0, rel.done
	}
	if l.held[id].kinds != 0 {
		return 0, nil
	}
	l.last++
	l.put(id, leaseMark{}, leaseMark{kinds: leaseHold, hold: l.last})
	return l.last, nil
}

// holding reports whether a live call of this process holds id (for any
// kind), its hold not being released: what claim refuses for good.
func (l *leases) holding(id approval.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[id].kinds != 0 && l.inRelease[id] == nil
}

// put changes id's mark from old (its mark now, the zero mark when it
// has none) to m, deleting it when no kind is left, and notes for the
// next renewal whether id became renewable or stopped being so
// (leases.added, leases.removed). l.mu is held.
func (l *leases) put(id approval.ID, old, m leaseMark) {
	if m.kinds == 0 {
		delete(l.held, id)
	} else {
		l.held[id] = m
	}
	switch was, is := renewable(old), renewable(m); {
	case is && !was:
		l.added = append(l.added, id)
	case was && !is:
		l.removed = true
	}
}

// renewable reports whether a renewal names a request marked m: held
// for some kind and not being created.
func renewable(m leaseMark) bool { return m.kinds != 0 && m.kinds&leaseCreating == 0 }

// add marks id as held for k, which is not leaseHold (hold makes that).
func (l *leases) add(id approval.ID, k leaseKind) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.held[id]
	l.put(id, m, leaseMark{kinds: m.kinds | k, hold: m.hold})
}

// drop unmarks id for k, which is not leaseHold (unhold ends that).
func (l *leases) drop(id approval.ID, k leaseKind) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.held[id]
	if !ok {
		return
	}
	l.put(id, m, leaseMark{kinds: m.kinds &^ k, hold: m.hold})
}

// has reports whether id is held for k.
func (l *leases) has(id approval.ID, k leaseKind) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[id].kinds&k != 0
}

// ids returns every id held, sorted, except those still being created
// (leaseCreating), in a new slice.
func (l *leases) ids() []approval.ID {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]approval.ID, 0, len(l.held))
	for id, m := range l.held {
		if renewable(m) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// renewalIDs returns what ids returns, in l.batch's array, which the
// caller holds (l.renewing) until it is done with them. The batch is
// updated, not rebuilt: the ids that stopped being renewable since the
// last renewal are dropped from it (one look-up in held per id, only when
// one did), and those that became renewable are sorted on their own and
// merged in. A renewal while nothing changed (10,000 calls held idle)
// sorts nothing; before, every renewal collected held's ids and sorted
// them all (≈ 4 ms per Lease/3 at 10,000 under load). The ids must be
// sorted: the store looks the rows it reads up in them
// (sqlstore.RenewLeases; it sorts a copy of unsorted ids).
func (l *leases) renewalIDs() []approval.ID {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := l.batch
	if l.removed {
		ids = slices.DeleteFunc(ids, func(id approval.ID) bool { return !renewable(l.held[id]) }) // zeroes the tail: no dropped id stays alive
	}
	if len(l.added) > 0 {
		add := slices.DeleteFunc(l.added, func(id approval.ID) bool { return !renewable(l.held[id]) })
		slices.Sort(add) // usually in order already: UUIDv7 ids, added as created
		ids = mergeSorted(ids, slices.Compact(add))
	}
	if cap(ids) > 2*len(ids)+1024 {
		ids = slices.Clip(slices.Clone(ids)) // most holds ended: let the big array go
	}
	clear(l.added)
	if cap(l.added) > 1024 {
		l.added = nil
	} else {
		l.added = l.added[:0]
	}
	l.batch, l.removed = ids, false
	return ids
}

// mergeSorted merges add, sorted without duplicates, into ids, sorted
// without duplicates, in ids' array when it has room; an id in both is
// kept once.
func mergeSorted(ids, add []approval.ID) []approval.ID {
	if len(add) == 0 {
		return ids
	}
	if len(ids) == 0 || ids[len(ids)-1] < add[0] {
		return append(ids, add...) // the usual case: new ids sort after the held ones
	}
	n := len(ids)
	ids = slices.Grow(ids, len(add))[:n+len(add)]
	// from the back, so nothing of ids is overwritten before it is read
	i, j := n-1, len(add)-1
	for k := len(ids) - 1; j >= 0; k-- {
		if i >= 0 && ids[i] > add[j] {
			ids[k] = ids[i]
			i--
		} else {
			ids[k] = add[j]
			j--
		}
	}
	return slices.Compact(ids) // an id in both is next to itself
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
	ids := g.leases.renewalIDs()
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

// of returns the requests this process holds a lease of kind k on,
// sorted.
func (l *leases) of(k leaseKind) []approval.ID {
	l.mu.Lock()
	var ids []approval.ID
	for id, m := range l.held {
		if m.kinds&k != 0 {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// Dispatching returns, sorted, the approvals this process consumed and
// has not recorded a dispatch outcome for yet: what a process that ends
// now leaves to a sweeper, which records them "unknown" once their lease
// lapses (serve's log line of a shutdown that overran its bound).
func (g *Gate) Dispatching() []approval.ID { return g.leases.of(leaseDispatch) }
