package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/telemetry"
)

// Get returns one request or store.ErrNotFound, for the admin API: it reads
// with store.Store.ViewRequest, on the connections a store reserves for
// people's reads.
func (g *Gate) Get(ctx context.Context, id approval.ID) (approval.Request, error) {
	return g.store.ViewRequest(ctx, id)
}

// List returns one page of requests.
func (g *Gate) List(ctx context.Context, f store.Filter) ([]approval.Request, string, error) {
	return g.store.ListRequests(ctx, f)
}

// EachRequest is List that hands the page's requests to fn one at a time,
// as the store reads them (store.Store.EachRequest), on the connections a
// store reserves for people's reads.
func (g *Gate) EachRequest(ctx context.Context, f store.Filter, fn func(approval.Request) error) (string, error) {
	return g.store.EachRequest(ctx, f, fn)
}

// Review records reviewer's verdict on id and wakes the held call. It returns
// the request after the change: for an approval that consumed the call held
// in this process in the same transaction, approved (the call is being
// dispatched) or, when that consume's re-check refused the call,
// invalidated with the reason (nothing ran). When the same reviewer repeats the same
// verdict it returns the current request together with approval.ErrDuplicate.
// Other errors: store.ErrNotFound, approval.ErrResolved, ErrExpired,
// ErrConflict, ErrHashMismatch, ErrSelfReview, ErrNotEligible.
func (g *Gate) Review(ctx context.Context, id approval.ID, reviewer approval.Principal, v approval.Verdict, reason, pinnedHash string) (approval.Request, error) {
	return g.ReviewIf(ctx, id, reviewer, v, reason, pinnedHash, nil)
}

// ReviewIf is Review that, when allow is not nil, first asks allow whether
// reviewer may decide the request as stored (after the tenant check,
// inside the transaction that records the verdict, so the caller needs no
// read of its own before reviewing); an error from allow is returned as
// is and nothing is recorded. allow may run more than once.
func (g *Gate) ReviewIf(ctx context.Context, id approval.ID, reviewer approval.Principal, v approval.Verdict, reason, pinnedHash string, allow func(approval.Request) error) (approval.Request, error) {
	// The held call acts on the decided row without reading it again; its
	// consume re-checks the stored one (see hub). Until then the store
	// watcher's wake-ups of id wait for this one.
	var decided *approval.Request
	done := g.hub.decide(string(id))
	defer func() { done(decided) }()
	j := g.joinConsume(ctx, id, v)
	var shown approval.Request // the request as the decision left it, before a joined consume
	cr := creatorReview{g: g, reviewer: reviewer.ID}
	fn := func(r *approval.Request, read store.TxRead) error {
		j.used = false
		if reviewer.Tenant != "" && r.Tenant != reviewer.Tenant {
			return store.ErrNotFound
		}
		if err := cr.check(r, read.Chain); err != nil {
			return err
		}
		if allow != nil {
			if err := allow(*r); err != nil {
				return err
			}
		}
		// The time is taken inside the transaction, so a review that waited
		// for the row lock cannot be recorded before a deadline it missed.
		if err := r.Review(approval.Reviewer{ID: reviewer.ID, Groups: reviewer.Groups}, v, reason, pinnedHash, g.now()); err != nil {
			return err
		}
		shown = *r
		if j.k != nil && r.State == approval.StateApproved && r.HeldBy == g.instance && j.gone() == nil {
			// The call is held here and its caller still waits: consume it
			// in this transaction, with every check of the consume
			// (Gate.consume). When another policy revision came after
			// the check, the decision commits alone and the call
			// consumes on its own, which catches up (Gate.consume).
			err := j.k.apply(r, read)
			if errors.Is(err, errRevisionMoved) {
				return nil
			}
			if err != nil {
				return err
			}
			j.used = true
		}
		return nil
	}
	var (
		r   approval.Request
		err error
	)
	err = cr.run(ctx, func() error {
		var werr error
		switch reads := j.reads(); {
		case reads.PolicyRevision:
			r, werr = g.store.UpdateRequestReading(ctx, id, reviewer.ID, reads, fn)
		case reads.Chain:
			r, werr = g.store.UpdateRequestWithChain(ctx, id, reviewer.ID, func(r *approval.Request, chain session.Chain) error {
				return fn(r, store.TxRead{Chain: chain})
			})
		default:
			r, werr = g.store.UpdateRequest(ctx, id, reviewer.ID, func(r *approval.Request) error { return fn(r, store.TxRead{}) })
		}
		return werr
	})
	j.end(r, err == nil && j.used)
	if errors.Is(err, approval.ErrDuplicate) {
		cur, gerr := g.store.GetRequest(ctx, id)
		if gerr != nil {
			return approval.Request{}, gerr
		}
		return cur, err
	}
	if err != nil {
		return approval.Request{}, err
	}
	decided = &r
	if shown.State == approval.StateApproved || shown.State == approval.StateDenied {
		g.metrics.ApprovalDecided(string(shown.State))
	}
	g.log.InfoContext(ctx, "approval reviewed", "approval", id, "by", reviewer.ID, "verdict", v, "state", shown.State)
	if j.used && r.State != approval.StateInvalidated {
		// The call's consume is its holder's to report (afterConsume); the
		// reviewer is answered with the decision. A consume that
		// invalidated the call (the policy in force denies it, or its
		// quorum is no longer met) is answered as it is: invalidated,
		// with the reason, nothing run; reporting it (audit,
		// notification) is still the holder's alone.
		return store.Normalize(shown), nil
	}
	return r, nil
}

// A joinedConsume is the consume of a call held in this process that a
// decision runs in its own transaction (Gate.joinConsume); the zero value
// joins none.
type joinedConsume struct {
	gone    func() error  // the held call's context's Err
	k       *consumeCheck // nil: no call to consume
	release func(r approval.Request, used bool)
	used    bool // set by the decision's transaction function, last run
}

// joinConsume claims the call held here on id, if any (hub.claim), for an
// approving decision, and prepares its consume's check (consumeCheck)
// before the transaction. A decision that is not an approval, or finds no
// call offered, joins none. With Options.Policies nothing is read before
// the transaction: it reads the newest revision itself (j.reads), and
// when that is not the one the check used the call consumes on its own
// (Gate.consume catches up).
func (g *Gate) joinConsume(ctx context.Context, id approval.ID, v approval.Verdict) *joinedConsume {
	j := &joinedConsume{}
	if v != approval.VerdictApprove {
		return j
	}
	gone, c, cl, release := g.hub.claim(string(id))
	if c == nil {
		return j
	}
	j.gone = gone
	j.k = g.consumeCheck(*c)
	cl.k = j.k
	j.release = release
	return j
}

// reads is what the decision's transaction reads for the joined consume
// (consumeCheck.reads), nothing when it joins none.
func (j *joinedConsume) reads() store.TxReads {
	if j.k == nil {
		return store.TxReads{}
	}
	return j.k.reads()
}

// end releases the claim, if any, with the request as committed and
// whether the decision's transaction consumed it.
func (j *joinedConsume) end(r approval.Request, used bool) {
	j.used = used
	if j.release != nil {
		j.release(r, used)
	}
}

// Wake makes the calls held on id re-read it. The store's watcher calls it
// for each request another process or instance changed (sqlstore.DB.Watch).
func (g *Gate) Wake(id approval.ID) {
	g.due.noteChange()
	g.hub.wake(string(id))
}

// WakeAll makes every held call re-read its request. The store's watcher
// calls it once, when it starts following the change feed.
func (g *Gate) WakeAll() {
	g.due.noteChange()
	g.hub.wakeAll()
}

// Changed tells the gate that the store's event log grew (a request was
// created, in this process or another): the sweeper reads its next due
// times again (Options.Watched). The store's watcher calls it.
func (g *Gate) Changed() { g.due.noteChange() }

// Stop marks the gate as shutting down: holds that end from now on leave
// their requests pending instead of cancelling them.
func (g *Gate) Stop() { g.stopping.Store(true) }

// Run does the gate's periodic work until ctx ends: every SweepInterval it
// expires overdue requests (each expiry is a compare-and-set, so several
// sweepers, one per process, are harmless; with Options.Watched only
// when something can be due, sweepDue); every Lease/3 it renews the
// leases this process holds, in one batch; every PruneInterval it prunes
// what Options.Retention lets go. When ctx ends it stops the gate and
// waits for dispatch outcomes still being written, up to one lease.
func (g *Gate) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { g.renewLeases(ctx) })
	if r := g.opts.Retention; r != (store.Retention{}) {
		wg.Go(func() { g.pruneEvery(ctx, r) })
	}
	t := time.NewTicker(g.opts.SweepInterval)
	defer t.Stop()
	for {
		g.sweepIfDue(ctx)
		select {
		case <-ctx.Done():
			g.Stop()
			wg.Wait()
			g.drainOutcomes()
			g.releases.stop() // no release begins from here on (releaseLater)
			g.releases.Wait() // each bounded by attemptTimeout
			g.logUnloggedRefusals(ctx)
			return nil
		case <-t.C:
		}
	}
}

// drainOutcomes waits for the background writers of dispatch outcomes, at
// most one lease; then it stops them (their requests' leases lapse and
// the sweeper of a live process records "unknown"). No writer begins once
// it waits (outcomeLater): an outcome the store cannot take from then on
// is left to that sweeper too.
func (g *Gate) drainOutcomes() {
	g.outcomes.stop()
	done := make(chan struct{})
	go func() { g.outcomes.Wait(); close(done) }()
	t := time.NewTimer(g.opts.Lease)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		g.log.Warn("stopping with dispatch outcomes not recorded; they will be recorded unknown")
	}
	g.bgCancel()
	<-done
}

// pruneEvery prunes the store every PruneInterval, the first time right
// away.
func (g *Gate) pruneEvery(ctx context.Context, r store.Retention) {
	t := time.NewTicker(g.opts.PruneInterval)
	defer t.Stop()
	for {
		p, err := g.store.Prune(ctx, r, g.now())
		switch {
		case err != nil && ctx.Err() == nil:
			g.log.WarnContext(ctx, "prune: cannot delete what retention lets go", "err", err)
		case err == nil && p.Requests+p.Events+p.Sessions > 0:
			g.log.InfoContext(ctx, "pruned", "requests", p.Requests, "events", p.Events, "sessions", p.Sessions, "events_pruned_through", p.Through.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ledgerPruneEvery is how often the sweeper deletes expired ledger rows.
const ledgerPruneEvery = time.Minute

func (g *Gate) sweep(ctx context.Context) {
	now := g.now()
	// Each store call is one attempt, bounded: a call that hangs does not
	// stop the sweeps after it.
	g.countPending(ctx)
	if now.Sub(g.lastPrune) >= ledgerPruneEvery && g.due.ledgerDue(now) {
		g.lastPrune = now
		cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		n, err := g.store.PruneLedger(cctx, now)
		cancel()
		if err != nil && ctx.Err() == nil {
			g.log.WarnContext(ctx, "sweep: cannot prune the result ledger", "err", err)
		} else if n > 0 {
			g.log.DebugContext(ctx, "sweep: pruned expired results, tasks and request states", "rows", n)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	ids, err := g.store.Due(cctx, now, 100)
	cancel()
	g.health.report(err, g.now())
	if err != nil {
		if ctx.Err() == nil {
			g.metrics.StoreError(telemetry.StoreOpSweep)
			g.log.WarnContext(ctx, "sweep: cannot list due requests", "err", err)
		}
		return
	}
	for _, id := range ids {
		g.sweepOne(ctx, id, now)
	}
}

// countPending sets the pending gauge from the store's count, one
// bounded attempt: a store that stopped answering is a count unknown, not
// the last one kept while the sweep waits. The count's outcome is the
// store's health as the sweeper sees it (storeHealth): an idle watched
// sweeper makes no other call (attack25: an outage that began while it
// was idle went unseen, and a lapsed dispatch elsewhere was called
// unknown as soon as the store was back, not a lease later).
func (g *Gate) countPending(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	n, err := g.store.CountPending(cctx, "")
	cancel()
	if ctx.Err() == nil {
		g.health.report(err, g.now())
	}
	if err == nil {
		g.metrics.PendingApprovals(n)
	} else if ctx.Err() == nil {
		// Not the last count: a steady gauge would hide the outage.
		g.metrics.PendingUnknown()
	}
	return err == nil
}

// sweepOne moves the due request id on (approval.Request.Sweep), one
// bounded attempt.
func (g *Gate) sweepOne(ctx context.Context, id approval.ID, now time.Time) {
	var from string // the dispatcher of a consumed request
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	r, err := g.store.UpdateRequest(cctx, id, "toolgate", func(r *approval.Request) error {
		if r.State == approval.StateConsumed && !g.mayCallUnknown(r.ID, now) {
			return approval.ErrNotDue
		}
		from = r.HeldBy
		return r.Sweep(now)
	})
	switch {
	case err == nil && r.State == approval.StateConsumed:
		if from != g.instance {
			g.metrics.LeaseTakenOver(telemetry.TakenOverOutcomeUnknown)
		}
		g.log.WarnContext(ctx, "dispatch outcome unknown: the dispatching process stopped before the upstream answered", "approval", id, "instance", from)
		g.hub.wake(string(id))
	case err == nil:
		g.metrics.ApprovalDecided(string(approval.StateExpired))
		g.log.InfoContext(ctx, "approval expired", "approval", id)
		g.hub.wake(string(id))
	case errors.Is(err, approval.ErrNotDue), errors.Is(err, approval.ErrResolved):
	default:
		g.log.WarnContext(ctx, "sweep: cannot expire", "approval", id, "err", err)
	}
}

// mayCallUnknown reports whether the sweeper may record the outcome of the
// consumed request id as unknown now that its dispatch lease lapsed: not
// while this process is still dispatching it or retrying its outcome, and
// not until the store has answered this process for a whole lease (after
// an outage, a live holder elsewhere renews its leases within Lease/3 of
// the store's return; one that has not by then is gone).
func (g *Gate) mayCallUnknown(id approval.ID, now time.Time) bool {
	return !g.leases.has(id, leaseDispatch) && g.health.steadyFor(g.opts.Lease, now)
}

// Ready reports whether the store answers.
func (g *Gate) Ready(ctx context.Context) error {
	if err := g.store.Ping(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}
