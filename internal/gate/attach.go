package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/telemetry"
)

// openIdentical returns the open requests an identical call (same
// principal, server, tool and argument hash) may attach to; on a store
// error ok is false with the refusal.
func (g *Gate) openIdentical(ctx context.Context, c Call, hash string) (open []approval.Request, refusal Admission, ok bool) {
	open, err := g.store.OpenIdentical(ctx, c.Principal.ID, c.Server, c.Tool, hash)
	if err != nil {
		return nil, g.storeRefusal(ctx, msgStoreUnavailable, "cannot look up identical requests; denying", err, "server", c.Server, "tool", c.Tool), false
	}
	return open, Admission{}, true
}

// attach lets an identical call use one of the open requests open (see
// openIdentical) instead of creating a duplicate: an unanswered denial is
// answered once; a retry-mode request is waited on for up to RetryWait; a
// hold-mode request whose holder is gone (its lease lapsed or was
// released) is taken over. ok is false when there is nothing to attach to
// and a new request must be made.
func (g *Gate) attach(ctx context.Context, c Call, open []approval.Request) (adm Admission, ok bool) {
	for _, r := range open {
		switch {
		case !c.sameKind(r.Kind):
			// A prompt and a tool of the same name are different things.
		case r.State == approval.StateDenied:
			_, err := g.store.UpdateRequest(ctx, r.ID, "toolgate", func(r *approval.Request) error { return r.Answer(g.now()) })
			if err == nil {
				g.log.InfoContext(ctx, "identical call answered with an earlier denial", "approval", r.ID)
				return Admission{ApprovalID: r.ID, Meta: g.approvalMeta(r),
					Message: fmt.Sprintf("denied by %s: %s; nothing was run", r.DecidedBy, orNone(r.Reason))}, true
			}
		case c.Defer && r.State == approval.StatePending:
			// A multi round-trip caller does not hold: it may wait on a
			// request nobody holds, never on one a live call holds.
			if !g.leases.has(r.ID, leaseHold) && r.LeaseLapsed(g.now()) {
				return g.pendingAnswer(r), true
			}
		case r.Mode == policy.ModeRetry && !c.Task:
			return g.resend(ctx, c, r), true
		case g.leases.has(r.ID, leaseHold):
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
		var from string // the instance that held it last
		taken, err := g.store.UpdateRequest(ctx, r.ID, "toolgate", func(cur *approval.Request) error {
			now := g.now()
			if (cur.State != approval.StatePending && cur.State != approval.StateApproved) || !cur.LeaseLapsed(now) {
				return errNoChange
			}
			from = cur.HeldBy
			cur.Renew(g.instance, now.Add(g.opts.Lease))
			return nil
		})
		if err == nil {
			if from != "" && from != g.instance {
				g.metrics.LeaseTakenOver(telemetry.TakenOverResend)
			}
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
// it is held. Admit waits for the decision (heldCall).
func (g *Gate) holdTaken(ctx context.Context, c Call, r approval.Request) Admission {
	c.hold = g.leases.hold(r.ID, false) // Admit ends it after the wait (afterHold)
	if c.Task {
		if err := g.recordTask(ctx, c, r); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
			g.releaseHold(ctx, r.ID, c.hold)
			return g.storeRefusal(ctx, msgStoreUnavailable, "cannot record the task of an approval request; denying", err, "approval", r.ID)
		}
	}
	if c.OnHold != nil && r.State == approval.StatePending {
		c.OnHold(r)
	}
	return heldOn(c, r)
}
