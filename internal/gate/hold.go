package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// errDeadline marks a wait that reached its deadline (the request's expiry,
// or the retry wait of a re-send).
var errDeadline = errors.New("approval deadline reached")

// errLeaseLost marks a hold whose lease another identical call took over.
var errLeaseLost = errors.New("another identical call took over the approval")

// attach lets an identical call (same principal, server, tool and argument
// hash) use an open request instead of creating a duplicate: an unanswered
// denial is answered once; a retry-mode request is waited on for up to
// RetryWait; a hold-mode request whose holder is gone (its lease lapsed or
// was released) is taken over. ok is false when there is nothing to attach
// to and a new request must be made.
func (g *Gate) attach(ctx context.Context, c Call, hash string) (adm Admission, ok bool) {
	open, err := g.store.OpenIdentical(ctx, c.Principal.ID, c.Server, c.Tool, hash)
	if err != nil {
		g.log.ErrorContext(ctx, "cannot look up identical requests; denying", "server", c.Server, "tool", c.Tool, "err", err)
		return refuse("denied: the approval store is unavailable, so the call cannot be held for approval"), true
	}
	for _, r := range open {
		switch {
		case !c.sameKind(r.Kind):
			// A prompt and a tool of the same name are different things.
		case r.State == approval.StateDenied:
			_, err := g.store.UpdateRequest(ctx, r.ID, "toolgate", func(r *approval.Request) error { return r.Answer(g.now()) })
			if err == nil {
				g.log.InfoContext(ctx, "identical call answered with an earlier denial", "approval", r.ID)
				return Admission{ApprovalID: r.ID, Meta: approvalMeta(r),
					Message: fmt.Sprintf("denied by %s: %s; nothing was run", r.DecidedBy, orNone(r.Reason))}, true
			}
		case c.Defer && r.State == approval.StatePending:
			// A multi round-trip caller does not hold: it may wait on a
			// request nobody holds, never on one a live call holds.
			if !g.isHolding(r.ID) && r.LeaseLapsed(g.now()) {
				return g.pendingAnswer(r), true
			}
		case r.Mode == policy.ModeRetry && !c.Task:
			return g.resend(ctx, c, r), true
		case g.isHolding(r.ID):
			// A live call in this process holds it: two live identical calls
			// never share one approval.
		default:
			if taken, ok := g.takeOver(ctx, r); ok {
				g.log.InfoContext(ctx, "identical call took over an abandoned request", "approval", r.ID, "state", taken.State)
				return g.holdTaken(ctx, c, taken), true
			}
		}
	}
	return Admission{}, false
}

// takeOver makes this process the holder of r if r's lease lapsed. A lease
// held by another process may belong to a live call or to one that just
// died (kill -9, a dropped client on another instance): it waits once until
// that lease would end, then tries again; a holder that is alive has renewed
// it by then.
func (g *Gate) takeOver(ctx context.Context, r approval.Request) (approval.Request, bool) {
	for attempt := 0; attempt < 2; attempt++ {
		taken, err := g.store.UpdateRequest(ctx, r.ID, "toolgate", func(cur *approval.Request) error {
			now := g.now()
			if (cur.State != approval.StatePending && cur.State != approval.StateApproved) || !cur.LeaseLapsed(now) {
				return errNoChange
			}
			cur.Renew(g.instance, now.Add(g.opts.Lease))
			return nil
		})
		if err == nil {
			return taken, true
		}
		if attempt > 0 || !errors.Is(err, errNoChange) {
			return approval.Request{}, false
		}
		cur, err := g.store.GetRequest(ctx, r.ID)
		if err != nil || (cur.State != approval.StatePending && cur.State != approval.StateApproved) {
			return approval.Request{}, false
		}
		wait := min(cur.LeaseUntil.Sub(g.now()), g.opts.Lease) + 10*time.Millisecond
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return approval.Request{}, false
		case <-t.C:
		}
	}
	return approval.Request{}, false
}

// holdTaken holds c on r, which this process just took over: a task
// records its task first (an identical call may have made r) and is told
// it is held.
func (g *Gate) holdTaken(ctx context.Context, c Call, r approval.Request) Admission {
	g.setHolding(r.ID, true)
	defer g.setHolding(r.ID, false)
	if c.Task {
		if err := g.recordTask(ctx, c, r); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
			g.release(ctx, r.ID)
			g.log.ErrorContext(ctx, "cannot record the task of an approval request; denying", "approval", r.ID, "err", err)
			return refuse("denied: the approval store is unavailable, so the call cannot be held for approval")
		}
	}
	if c.OnHold != nil && r.State == approval.StatePending {
		c.OnHold(r)
	}
	return g.holdOn(ctx, c, r)
}

// holdOn holds c on r, which this process holds the lease of, until it is
// decided, expires, the caller goes away, or c.MaxHold passes (then the
// request stays pending, its lease released, and the answer is Pending).
func (g *Gate) holdOn(ctx context.Context, c Call, r approval.Request) Admission {
	start := g.now()
	deadline := r.ExpiresAt
	if c.MaxHold > 0 && start.Add(c.MaxHold).Before(deadline) {
		deadline = start.Add(c.MaxHold)
	}
	wctx, span := g.opts.Tracer.Start(ctx, "approval wait", trace.WithAttributes(attribute.String("approval.id", string(r.ID))))
	got, err := g.wait(wctx, r.ID, deadline, c.KeepAlive, true)
	g.metrics.ApprovalWaited(g.now().Sub(start).Seconds())
	endWait(span, got, err)
	if errors.Is(err, errDeadline) && got.State == approval.StatePending && g.now().Before(got.ExpiresAt) {
		// MaxHold passed first: the caller cannot wait longer. The request
		// stays open for the identical re-send (or the next round).
		g.release(ctx, r.ID)
		g.log.InfoContext(ctx, "call answered before its approval was decided (max hold); the approval stays pending", "approval", r.ID)
		return g.pendingAnswer(got)
	}
	if err != nil {
		return g.abandon(ctx, c, r.ID, err)
	}
	return g.settle(ctx, c, got)
}

// release ends this process's lease on id, so an identical re-send (or the
// next round of a multi round-trip request) can take it over at once.
func (g *Gate) release(ctx context.Context, id approval.ID) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error {
		if r.HeldBy != g.instance || !r.LeaseUntil.After(g.now()) {
			return errNoChange
		}
		r.Release(g.instance, g.now())
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		g.log.WarnContext(ctx, "cannot release the lease of a held approval", "approval", id, "err", err)
	}
}

// endWait ends an approval wait span; approval.decision is the state the
// wait ended on (approved, denied, cancelled…), "timeout" at the deadline,
// or "abandoned" when the caller went away.
func endWait(span trace.Span, r approval.Request, err error) {
	decision := string(r.State)
	switch {
	case errors.Is(err, errDeadline):
		decision = "timeout"
	case err != nil:
		decision = "abandoned"
	}
	span.SetAttributes(attribute.String("approval.decision", decision))
	span.End()
}

// resend answers an identical re-send of a retry-mode call: it waits up to
// RetryWait for a decision, then answers "still pending" with the same id.
func (g *Gate) resend(ctx context.Context, c Call, r approval.Request) Admission {
	deadline := g.now().Add(g.opts.RetryWait)
	if r.ExpiresAt.Before(deadline) {
		deadline = r.ExpiresAt
	}
	wctx, span := g.opts.Tracer.Start(ctx, "approval wait", trace.WithAttributes(attribute.String("approval.id", string(r.ID))))
	got, err := g.wait(wctx, r.ID, deadline, c.KeepAlive, false)
	endWait(span, got, err)
	switch {
	case errors.Is(err, errDeadline) && g.now().Before(r.ExpiresAt):
		return approvalRequired(got, "approval still pending")
	case errors.Is(err, errDeadline):
		return g.abandon(ctx, c, r.ID, err)
	case err != nil:
		// The caller went away; a retry-mode request has no holder to release.
		return Admission{ApprovalID: r.ID, Message: "the caller went away while waiting"}
	}
	return g.settle(ctx, c, got)
}

// wait blocks until the request leaves pending, deadline or the request's
// stored expiry passes (errDeadline), or ctx ends (its cause). It never
// waits on a fresh timeout: restarts do not extend a request. With lease
// set it renews this process's lease every Lease/3.
func (g *Gate) wait(ctx context.Context, id approval.ID, deadline time.Time, keepAlive func(context.Context), lease bool) (approval.Request, error) {
	var kaC, leaseC <-chan time.Time
	if keepAlive != nil {
		t := time.NewTicker(g.opts.KeepAlive)
		defer t.Stop()
		kaC = t.C
	}
	if lease {
		t := time.NewTicker(g.opts.Lease / 3)
		defer t.Stop()
		leaseC = t.C
	}
	poll := time.NewTicker(g.opts.Poll)
	defer poll.Stop()
	timer := time.NewTimer(deadline.Sub(g.now()))
	defer timer.Stop()
	var last approval.Request
	for {
		woke, unsub := g.hub.subscribe(string(id))
		r, err := g.store.GetRequest(ctx, id)
		if err == nil {
			last = r
		}
		now := g.now()
		switch {
		case err == nil && r.State != approval.StatePending:
			unsub()
			return r, nil
		case err == nil && (!now.Before(r.ExpiresAt) || !now.Before(deadline)):
			unsub()
			return r, errDeadline
		case err == nil && lease && r.HeldBy != g.instance:
			unsub()
			return r, errLeaseLost
		case err != nil && ctx.Err() == nil:
			// The store is unreachable: keep holding, re-read on the next tick.
			g.log.WarnContext(ctx, "cannot read held approval; retrying", "approval", id, "err", err)
			if !now.Before(deadline) {
				unsub()
				return last, errDeadline
			}
		}
		select {
		case <-woke:
		case <-poll.C:
		case <-kaC:
			keepAlive(ctx)
		case <-leaseC:
			g.renew(ctx, id)
		case <-timer.C:
			// Re-read once more: a decision may have landed at the deadline.
		case <-ctx.Done():
			unsub()
			return approval.Request{}, context.Cause(ctx)
		}
		unsub()
	}
}

// renew extends this process's lease on a held request.
func (g *Gate) renew(ctx context.Context, id approval.ID) {
	_, err := g.store.UpdateRequest(ctx, id, "toolgate", func(r *approval.Request) error {
		if (r.State != approval.StatePending && r.State != approval.StateApproved) || r.HeldBy != g.instance {
			return errNoChange
		}
		r.Renew(g.instance, g.now().Add(g.opts.Lease))
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) && ctx.Err() == nil {
		g.log.WarnContext(ctx, "cannot renew the lease of a held approval", "approval", id, "err", err)
	}
}

// abandon handles a hold that ended without a usable decision. At the
// deadline it expires the request; if a decision landed first (the holder
// read "pending" just before an approval committed), it settles that
// decision for c, so an approval that was answered 200 is consumed by the
// call that is still waiting for it.
func (g *Gate) abandon(ctx context.Context, c Call, id approval.ID, cause error) Admission {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	switch {
	case errors.Is(cause, errDeadline):
		r, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error { return r.Expire(g.now()) })
		if err != nil && !errors.Is(err, approval.ErrResolved) && !errors.Is(err, approval.ErrNotDue) {
			g.log.ErrorContext(ctx, "cannot expire approval", "approval", id, "err", err)
			return Admission{ApprovalID: id, Timeout: true, Message: "timed out waiting for approval; nothing was run"}
		}
		if err != nil { // someone else settled it first; act on what is stored
			if r, err = g.store.GetRequest(bg, id); err != nil {
				return Admission{ApprovalID: id, Timeout: true, Message: "timed out waiting for approval; nothing was run"}
			}
		} else {
			g.metrics.ApprovalDecided(string(approval.StateExpired))
		}
		g.hub.wake(string(id))
		if ctx.Err() != nil {
			c = Call{} // the caller is gone: nothing can be dispatched
		}
		return g.settle(ctx, c, r)
	case errors.Is(cause, errLeaseLost):
		return Admission{ApprovalID: id, Message: "refused: " + errLeaseLost.Error() + "; nothing was run here"}
	case errors.Is(cause, context.Canceled) && !g.stopping.Load():
		// An explicit notifications/cancelled from the caller.
		_, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error { return r.Cancel(g.now()) })
		switch {
		case err == nil:
			g.metrics.ApprovalDecided(string(approval.StateCancelled))
		case !errors.Is(err, approval.ErrResolved):
			g.log.ErrorContext(ctx, "cannot cancel approval", "approval", id, "err", err)
		}
		g.hub.wake(string(id))
		g.log.InfoContext(ctx, "held call cancelled by the caller", "approval", id)
		return Admission{Message: "cancelled by the caller", ApprovalID: id}
	default:
		// The caller went away or the gateway is stopping: leave the request
		// as it is and release the lease, so an identical re-send can take it
		// over at once.
		_, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error {
			if r.HeldBy != g.instance || !r.LeaseUntil.After(g.now()) {
				return errNoChange
			}
			r.Release(g.instance, g.now())
			return nil
		})
		if err != nil && !errors.Is(err, errNoChange) {
			g.log.WarnContext(ctx, "cannot release the lease of an abandoned hold", "approval", id, "err", err)
		}
		if g.stopping.Load() {
			g.log.InfoContext(ctx, "gateway stopping; approval stays open for an identical re-send", "approval", id)
			return Admission{ApprovalID: id, Message: fmt.Sprintf("the gateway is shutting down; nothing was run. Approval %s stays pending: re-send the identical call to pick it up", id)}
		}
		g.log.InfoContext(ctx, "caller gone while held; approval stays open for an identical re-send", "approval", id, "cause", cause)
		return Admission{Message: "the caller went away while the call was held", ApprovalID: id}
	}
}
