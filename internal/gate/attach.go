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
	var holdBy time.Time // c's MaxHold, counted from here (takeOver's wait included)
	if c.MaxHold > 0 {
		holdBy = g.now().Add(c.MaxHold)
	}
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
		case g.leases.holding(r.ID):
			// A live call in this process holds it: two live identical calls
			// never share one approval.
		default:
			taken, m, _ := g.takeOver(ctx, r, holdBy)
			if m != 0 {
				g.log.InfoContext(ctx, "identical call took over an abandoned request", "approval", r.ID, "state", taken.State)
				return g.holdTaken(ctx, c, taken, m, holdBy), true
			}
			if !holdBy.IsZero() && !g.now().Before(holdBy) && ctx.Err() == nil {
				// Its MaxHold passed while it waited for another
				// instance's lease: answered as at MaxHold's end, by the
				// request as it is now.
				a, cur, ok := g.answerAfterWait(ctx, r)
				if !ok {
					a = g.settle(ctx, Call{}, cur) // decided or used meanwhile
				}
				return a, true
			}
		}
	}
	return Admission{}, false
}

// takeOver makes this process the holder of r if r's lease lapsed, or if
// the lease is this process's own and no call of this process holds it
// (its call went away and the release of its lease is not written yet,
// or could not be written): the re-send of a dropped call does not wait
// for its own lease to lapse. A release in flight is waited for; the
// lease is then taken over at once. A lease held by another process may
// belong to a live call or to one that just died (kill -9, a dropped
// client on another instance): it waits once until that lease would end,
// then tries again; a holder that is alive has renewed it by then. The
// take-over marks the lease held in this process (leases.claim) in the
// transaction that writes it, so that two re-sends never both take it;
// m is that hold's mark (0: not taken over). Neither wait goes past
// holdBy (the call's MaxHold; zero: none): the call is answered by then.
// failed is, when it was not taken over, the store's error of the last
// attempt's write when that failed (not a lease found held), else nil.
func (g *Gate) takeOver(ctx context.Context, r approval.Request, holdBy time.Time) (taken approval.Request, m holdMark, failed error) {
	for attempt := 0; attempt < 2; attempt++ {
		var (
			from     string          // the instance that held it last
			released <-chan struct{} // a release of this process's lease in flight
			err      error
		)
		m, failed = 0, nil
		taken, err = g.store.UpdateRequest(ctx, r.ID, "toolgate", func(cur *approval.Request) error {
			now := g.now()
			if (cur.State != approval.StatePending && cur.State != approval.StateApproved) || (!cur.LeaseLapsed(now) && cur.HeldBy != g.instance) {
				return errNoChange
			}
			if m == 0 {
				if m, released = g.leases.claim(r.ID); m == 0 {
					return errNoChange // a call here holds it, or its release is in flight
				}
			}
			from = cur.HeldBy
			cur.Renew(g.instance, now.Add(g.opts.Lease))
			return nil
		})
		if err != nil && !errors.Is(err, errNoChange) {
			failed = err // the store refused this attempt's write
		}
		if err != nil && m != 0 && !errors.Is(err, errNoChange) && ctx.Err() == nil {
			// The write may have committed, its reply lost: look.
			taken, err = g.takenAfterAll(ctx, r.ID)
		}
		if err == nil {
			if from != "" && from != g.instance {
				g.metrics.LeaseTakenOver(telemetry.TakenOverResend)
			}
			return taken, m, nil
		}
		g.leases.unhold(r.ID, m) // the claim's, if it made one
		if attempt > 0 || !errors.Is(err, errNoChange) {
			return approval.Request{}, 0, failed
		}
		switch {
		case released != nil:
			// This process's own lease, its release in flight: wait for it.
		case g.leases.holding(r.ID):
			return approval.Request{}, 0, failed // a live call of this process holds it
		default:
			// Held by another instance (or settled meanwhile): wait once
			// until its lease would end, or until it is released.
			if !g.waitForeignLease(ctx, r.ID, holdBy) {
				return approval.Request{}, 0, failed
			}
			continue
		}
		d := time.Duration(-1) // no bound but ctx
		if !holdBy.IsZero() {
			d = max(holdBy.Sub(g.now()), 0)
		}
		if !g.waitTakeOver(ctx, d, released) {
			return approval.Request{}, 0, failed
		}
	}
	return approval.Request{}, 0, failed
}

// waitTakeOver waits for released (nil: never), or d (< 0: no bound),
// and reports whether it was not ctx's end or d that ended the wait, or,
// with released nil, whether d passed before ctx ended.
func (g *Gate) waitTakeOver(ctx context.Context, d time.Duration, released <-chan struct{}) bool {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-timeout:
		return released == nil
	case <-released:
		return true
	}
}

// holdTaken holds c on r, which this process just took over (its hold's
// mark m: takeOver): a task records its task first (an identical call may
// have made r) and is told it is held. Admit waits for the decision
// (heldCall), until holdBy at most (c's MaxHold, counted from before the
// take-over's wait; zero: none).
func (g *Gate) holdTaken(ctx context.Context, c Call, r approval.Request, m holdMark, holdBy time.Time) Admission {
	c.hold = m // Admit ends it after the wait (afterHold)
	if refusal, ok := g.takenSessionRefusal(ctx, c); !ok {
		g.releaseHold(ctx, r.ID, m)
		return refusal
	}
	if !holdBy.IsZero() {
		c.MaxHold = max(holdBy.Sub(g.now()), 1) // > 0: passed already, the wait ends at once (endHold answers pending)
	}
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
