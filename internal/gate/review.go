package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Get returns one request or store.ErrNotFound.
func (g *Gate) Get(ctx context.Context, id approval.ID) (approval.Request, error) {
	return g.store.GetRequest(ctx, id)
}

// List returns one page of requests.
func (g *Gate) List(ctx context.Context, f store.Filter) ([]approval.Request, string, error) {
	return g.store.ListRequests(ctx, f)
}

// Review records reviewer's verdict on id and wakes the held call. It returns
// the request after the change. When the same reviewer repeats the same
// verdict it returns the current request together with approval.ErrDuplicate.
// Other errors: store.ErrNotFound, approval.ErrResolved, ErrExpired,
// ErrConflict, ErrHashMismatch, ErrSelfReview, ErrNotEligible.
func (g *Gate) Review(ctx context.Context, id approval.ID, reviewer approval.Principal, v approval.Verdict, reason, pinnedHash string) (approval.Request, error) {
	r, err := g.store.UpdateRequest(ctx, id, reviewer.ID, func(r *approval.Request) error {
		if reviewer.Tenant != "" && r.Tenant != reviewer.Tenant {
			return store.ErrNotFound
		}
		// The time is taken inside the transaction, so a review that waited
		// for the row lock cannot be recorded before a deadline it missed.
		return r.Review(approval.Reviewer{ID: reviewer.ID, Groups: reviewer.Groups}, v, reason, pinnedHash, g.now())
	})
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
	g.hub.wake(string(id))
	if r.State == approval.StateApproved || r.State == approval.StateDenied {
		g.metrics.ApprovalDecided(string(r.State))
	}
	g.log.InfoContext(ctx, "approval reviewed", "approval", id, "by", reviewer.ID, "verdict", v, "state", r.State)
	return r, nil
}

// Wake makes the calls held on id re-read it. The Postgres watcher calls it
// for each notification from another instance.
func (g *Gate) Wake(id approval.ID) { g.hub.wake(string(id)) }

// WakeAll makes every held call re-read its request. The SQLite watcher calls
// it when another process committed.
func (g *Gate) WakeAll() { g.hub.wakeAll() }

// Stop marks the gate as shutting down: holds that end from now on leave
// their requests pending instead of cancelling them.
func (g *Gate) Stop() { g.stopping.Store(true) }

// Run expires overdue requests every SweepInterval until ctx ends. Each
// expiry is a compare-and-set, so several sweepers (processes) are harmless.
func (g *Gate) Run(ctx context.Context) error {
	t := time.NewTicker(g.opts.SweepInterval)
	defer t.Stop()
	for {
		g.sweep(ctx)
		select {
		case <-ctx.Done():
			g.Stop()
			return nil
		case <-t.C:
		}
	}
}

// ledgerPruneEvery is how often the sweeper deletes expired ledger rows.
const ledgerPruneEvery = time.Minute

func (g *Gate) sweep(ctx context.Context) {
	now := g.now()
	if n, err := g.store.CountPending(ctx, ""); err == nil {
		g.metrics.PendingApprovals(n)
	}
	if now.Sub(g.lastPrune) >= ledgerPruneEvery {
		g.lastPrune = now
		if n, err := g.store.PruneLedger(ctx, now); err != nil && ctx.Err() == nil {
			g.log.WarnContext(ctx, "sweep: cannot prune the result ledger", "err", err)
		} else if n > 0 {
			g.log.DebugContext(ctx, "sweep: pruned expired results, tasks and request states", "rows", n)
		}
	}
	ids, err := g.store.Due(ctx, now, 100)
	if err != nil {
		if ctx.Err() == nil {
			g.log.WarnContext(ctx, "sweep: cannot list due requests", "err", err)
		}
		return
	}
	for _, id := range ids {
		r, err := g.store.UpdateRequest(ctx, id, "toolgate", func(r *approval.Request) error { return r.Sweep(now) })
		switch {
		case err == nil && r.State == approval.StateConsumed:
			g.log.WarnContext(ctx, "dispatch outcome unknown: the dispatching process stopped before the upstream answered", "approval", id)
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
}

// Ready reports whether the store answers.
func (g *Gate) Ready(ctx context.Context) error {
	if err := g.store.Ping(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}
