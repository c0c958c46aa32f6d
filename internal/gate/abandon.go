package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// abandon handles a hold that ended without a usable decision. At the
// deadline it expires the request; if a decision landed first (the holder
// read "pending" just before an approval committed), it settles that
// decision for c, so an approval that was answered 200 is consumed by the
// call that is still waiting for it. Writes the store cannot take right
// now (unreachable, busy) are retried while the caller waits: answering
// "timed out" for a request that is in fact approved would lose a human's
// yes (issue 9, defect 13).
func (g *Gate) abandon(ctx context.Context, c Call, id approval.ID, cause error) Admission {
	switch {
	case errors.Is(cause, errDeadline):
		var (
			r       approval.Request
			expired bool
		)
		err := g.retryStore(ctx, func(actx context.Context) error {
			var err error
			r, err = g.store.UpdateRequest(actx, id, "toolgate", func(r *approval.Request) error { return r.Expire(g.now()) })
			if errors.Is(err, approval.ErrResolved) || errors.Is(err, approval.ErrNotDue) {
				// Someone else settled it first: act on what is stored.
				r, err = g.store.GetRequest(actx, id)
				return err
			}
			expired = err == nil
			return err
		})
		if err != nil {
			g.log.ErrorContext(ctx, "cannot expire approval; the caller is gone or the store failed", "approval", id, "err", err)
			g.releaseHold(ctx, id, c.hold)
			return Admission{ApprovalID: id, Timeout: true, Message: "timed out waiting for approval; nothing was run"}
		}
		if expired {
			g.metrics.ApprovalDecided(string(approval.StateExpired))
			g.log.InfoContext(ctx, "approval expired", "approval", id) // as the sweeper logs it
		}
		g.hub.wake(string(id))
		if ctx.Err() != nil {
			c = Call{} // the caller is gone: nothing can be dispatched
		}
		return g.settle(ctx, c, r)
	case errors.Is(cause, errLeaseLost):
		return Admission{ApprovalID: id, Message: "refused: " + errLeaseLost.Error() + "; nothing was run here"}
	case errors.Is(cause, errWaitPanicked):
		// Left as when the caller goes away (below), but the caller is
		// still there: it is told.
		g.releaseHold(ctx, id, c.hold)
		return Admission{ApprovalID: id, Message: fmt.Sprintf("refused: %v; nothing was run. Approval %s stays pending: re-send the identical call to pick it up", errWaitPanicked, id)}
	case errors.Is(cause, context.Canceled) && !g.stopping.Load():
		// An explicit notifications/cancelled from the caller: record it,
		// retrying for a while (the caller's context is already done).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.Lease)
		defer cancel()
		err := g.retryStore(rctx, func(actx context.Context) error {
			_, err := g.store.UpdateRequest(actx, id, "toolgate", func(r *approval.Request) error { return r.Cancel(g.now()) })
			return err
		})
		switch {
		case err == nil:
			g.metrics.ApprovalDecided(string(approval.StateCancelled))
		case !errors.Is(err, approval.ErrResolved):
			g.log.ErrorContext(ctx, "cannot cancel approval", "approval", id, "err", err)
			g.releaseHold(ctx, id, c.hold)
		}
		g.hub.wake(string(id))
		g.log.InfoContext(ctx, "held call cancelled by the caller", "approval", id)
		return Admission{Message: "cancelled by the caller", ApprovalID: id}
	default:
		// The caller went away or the gateway is stopping: leave the request
		// as it is and release the lease, so an identical re-send can take it
		// over at once.
		g.releaseHold(ctx, id, c.hold)
		if g.stopping.Load() {
			g.log.InfoContext(ctx, "gateway stopping; approval stays open for an identical re-send", "approval", id)
			return Admission{ApprovalID: id, Message: fmt.Sprintf("the gateway is shutting down; nothing was run. Approval %s stays pending: re-send the identical call to pick it up", id)}
		}
		g.log.InfoContext(ctx, "caller gone while held; approval stays open for an identical re-send", "approval", id, "cause", cause)
		return Admission{Message: "the caller went away while the call was held", ApprovalID: id}
	}
}

// releaseHold ends the hold m of a call on id (Call.hold): it stops
// renewing it and ends its lease now, so an identical re-send can take the
// request over at once. It is best effort: a lease that could not be
// released lapses by itself (an identical re-send in this process takes
// it over at once: takeOver). Until the release is written, such a
// re-send waits for it (leases.release). A hold that is not m (none, or
// an identical re-send's that took the request over since m ended) is
// left alone, its lease with it.
func (g *Gate) releaseHold(ctx context.Context, id approval.ID, m holdMark) {
	end := g.leases.release(id, m)
	if end == nil {
		return
	}
	defer end()
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	defer cancel()
	g.writeRelease(bg, id)
}

// maxBackgroundReleases bounds the releases releaseLater writes at once:
// in an outage each may wait attemptTimeout for a store that does not
// answer, and the refusals that start them can come by the thousand.
const maxBackgroundReleases = 4

// releaseLater is releaseHold in the background, best effort, for a call
// that is answered without waiting for it: one whose request's creation
// reported a store failure that may have come after its commit (a lost
// COMMIT reply). The hold's mark ends now (leases.releaseMark: from then
// until the release is written an identical re-send in this process waits
// for it); a goroutine the gate owns (Run waits for it) waits for a
// renewal batch in flight (up to a lease in an outage, which the refusal
// must not) and writes the release, bounded by attemptTimeout. With
// maxBackgroundReleases under way already, the lease is left to lapse by
// itself (closing23: the request stayed leased for a whole lease, 15 s,
// which an identical re-send on another instance waited out).
func (g *Gate) releaseLater(ctx context.Context, id approval.ID, m holdMark) {
	// Under the group's lock: Run's Wait for the releases begins after
	// this one's Go, or this one finds the group stopped (attack25: a
	// release begun while or after Run waited wrote after Run returned).
	started := g.releases.start(func(wg *sync.WaitGroup) {
		select {
		case g.releasing <- struct{}{}:
		default:
			g.leases.unhold(id, m) // too many under way: the lease lapses by itself
			return
		}
		end := g.leases.releaseMark(id, m)
		if end == nil {
			<-g.releasing
			return
		}
		wg.Go(func() {
			defer func() { <-g.releasing }()
			defer end()
			g.leases.afterBatch()
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
			defer cancel()
			g.writeRelease(wctx, id)
		})
	})
	if !started {
		g.leases.unhold(id, m) // Run is done: the lease lapses by itself
	}
}

// writeRelease ends this process's lease on request id in the store, if
// it still holds it: releaseHold's write, under ctx.
func (g *Gate) writeRelease(ctx context.Context, id approval.ID) {
	_, err := g.store.UpdateRequest(ctx, id, "toolgate", func(r *approval.Request) error {
		if r.HeldBy != g.instance || !r.LeaseUntil.After(g.now()) {
			return errNoChange
		}
		r.Release(g.instance, g.now())
		return nil
	})
	switch {
	case err == nil:
		// A re-send here waiting on this lease without a mark of its own
		// (resume's wait for a live holder) looks again at once; other
		// instances hear of it through the watch (sqlstore, release.go).
		g.hub.wake(string(id))
	case !errors.Is(err, errNoChange) && !errors.Is(err, store.ErrNotFound): // not found: a creation that did not commit
		g.log.WarnContext(ctx, "cannot release the lease of an abandoned hold", "approval", id, "err", err)
	}
}
