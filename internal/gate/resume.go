package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// resume continues c on the approval it names (Call.Resume): a re-send
// naming the approval, the next round of a multi round-trip request, or a
// task run again by an instance whose predecessor died. The request must
// be c's own call; it is never found by equal arguments alone.
//
//   - consumed: the ledger's result is returned (Admission.Replay) and the
//     call does not run again; one still being dispatched elsewhere is
//     waited for; an outcome that was lost is reported as unknown.
//   - pending or approved: held like any call (taken over when nobody
//     holds it; waited on, without a lease, while a live call holds it).
//   - otherwise: its outcome (denied, timed out, cancelled, invalidated).
func (g *Gate) resume(ctx context.Context, c Call) Admission {
	id := c.Resume
	hash, err := approval.Hash(c.Arguments)
	if err != nil {
		return refuse(fmt.Sprintf("invalid arguments: %v", err))
	}
	var deadline time.Time
	if c.MaxHold > 0 {
		deadline = g.now().Add(c.MaxHold)
	}
	for {
		// Subscribe before reading: a change between the read and the
		// wait (a decision, an outcome, a release here or, through the
		// watch, elsewhere) wakes the wait at once instead of being seen
		// only at its timer.
		sub := g.subscribeChange(id)
		a, again := g.resumeRound(ctx, c, hash, deadline, sub)
		g.dropChange(sub)
		if !again {
			return a
		}
	}
}

// A changeSub is a wait's subscriptions to one request's wake-ups and to
// Touched, made before the wait reads the request (resume). The wait
// notes what it read in touched (touchWaits.saw): Touched wakes it only
// when the request moved since.
type changeSub struct {
	woke    *wakeup
	touched *touchWait
}

// subscribeChange subscribes to the wake-ups of id and to Touched.
func (g *Gate) subscribeChange(id approval.ID) changeSub {
	woke, _ := g.hub.subscribe(string(id))
	return changeSub{woke: woke, touched: g.touch.add(id)}
}

// dropChange ends s's subscriptions; it may be called more than once.
func (g *Gate) dropChange(s changeSub) {
	g.hub.unsubscribe(s.woke)
	g.touch.drop(s.touched)
}

// resumeRound is one round of resume: it reads the request and answers
// c, or takes the request over and holds it, or waits for a change (sub,
// made before the read) and reports again: the next round reads it anew.
func (g *Gate) resumeRound(ctx context.Context, c Call, hash string, deadline time.Time, sub changeSub) (a Admission, again bool) {
	id := c.Resume
	r, err := g.store.GetRequest(ctx, id)
	if err == nil {
		g.touch.saw(sub.touched, r)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return refuse(fmt.Sprintf("approval %s does not exist; nothing was run", id)), false
	case err != nil:
		g.log.ErrorContext(ctx, "cannot read a resumed approval; refusing", "approval", id, "err", err)
		return refuse("refused: the approval store is unavailable; nothing was run"), false
	case r.RequestedBy != c.Principal.ID || r.Server != c.Server || r.Tool != c.Tool || r.ArgumentsHash != hash || !c.sameKind(r.Kind):
		return Admission{ApprovalID: id, Message: fmt.Sprintf("approval %s was made for a different call (another caller, tool or arguments); nothing was run", id)}, false
	}
	now := g.now()
	switch r.State {
	case approval.StateConsumed:
		rec, err := g.store.GetResult(ctx, id)
		if err == nil {
			g.log.InfoContext(ctx, "re-send of a consumed approval answered from the result ledger", "approval", id)
			return Admission{ApprovalID: id, Held: heldCopy(r), Meta: g.approvalMeta(r), Replay: &Recorded{Result: rec.Result, Error: rec.Error, Truncated: rec.Truncated}}, false
		}
		if !errors.Is(err, store.ErrNotFound) {
			return refuse("refused: the approval store is unavailable; nothing was run"), false
		}
		if r.DispatchOutcome == approval.OutcomeNone && !r.LeaseLapsed(now) {
			break // still being dispatched: wait for its result
		}
		return Admission{ApprovalID: id, Held: heldCopy(r), Meta: g.approvalMeta(r), Message: usedMessage(r)}, false
	case approval.StatePending, approval.StateApproved:
		if !g.leases.holding(id) && (r.LeaseLapsed(now) || r.HeldBy == g.instance) {
			// Nobody holds it, or this process's own call did and went
			// away (takeOver). Nothing of this round waits on sub: it
			// is not kept through the take-over's wait and the hold.
			g.dropChange(sub)
			taken, m, failed := g.takeOver(ctx, r, deadline)
			if m != 0 {
				return g.holdTaken(ctx, c, taken, m, deadline), false
			}
			if !deadline.IsZero() && !g.now().Before(deadline) {
				// Its MaxHold passed while the take-over waited: answered
				// by the request as it is now (settled: by the loop).
				if a, _, ok := g.answerAfterWait(ctx, r); ok {
					return a, false
				}
			}
			if failed != nil {
				// The store refused the take-over's write: refused, as a
				// failed read is (attack27: "look again" tried it again at
				// once, without pause, for as long as the store refused).
				g.log.ErrorContext(ctx, "cannot take over a resumed approval; refusing", "approval", id, "err", failed)
				return refuse("refused: the approval store is unavailable; nothing was run"), false
			}
			return Admission{}, true // someone else took it meanwhile: look again
		}
		// A live call holds it: wait for its decision without a lease.
	default:
		if c.Task {
			g.dropTaskArguments(ctx, id)
		}
		return g.settle(ctx, Call{}, r), false
	}
	if !deadline.IsZero() && !now.Before(deadline) {
		return g.pendingAnswer(r), false
	}
	until := r.ExpiresAt.Add(r.ValidFor)
	if r.State == approval.StateConsumed || !until.After(now) {
		// A consumed request's validity is spent: its dispatch ends with
		// its outcome (woke) or its lease's end (below), whenever its
		// tool is done; and a wait never ends before it begins (attack27:
		// a tool that ran past the approval's validity made the re-send
		// read the request and the ledger again and again without pause).
		until = now.Add(g.opts.Lease)
	}
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	if lu := r.LeaseUntil.Add(10 * time.Millisecond); !r.LeaseUntil.IsZero() && lu.After(now) && lu.Before(until) {
		until = lu // look again when the holder's lease would have lapsed
	}
	var touched <-chan struct{}
	if r.HeldBy != "" && r.HeldBy != g.instance {
		touched = sub.touched.C // its release reaches this process through the watch
	} else {
		g.touch.drop(sub.touched) // not kept through the wait: Touched reads every waited request
	}
	if err := g.waitChange(ctx, sub.woke.C, touched, until, g.keepAlive(c, r.ID, r.Rule, r.ExpiresAt, r.State)); err != nil {
		return Admission{ApprovalID: id, Message: "the caller went away while waiting; nothing was run"}, false
	}
	return Admission{}, true
}

// waitChange returns when woke is closed (request id may have changed: a
// local change, or the store's watcher for another process or instance),
// when touched is (a nil channel: never; the watch's Touched, a release
// by another instance on SQLite), at until, or with ctx's cause when ctx
// ends. Both channels are subscriptions made before the request was read
// (subscribeChange). Its keep-alives come from the gate's one beat, like
// a held call's.
func (g *Gate) waitChange(ctx context.Context, woke, touched <-chan struct{}, until time.Time, keepAlive func(context.Context)) error {
	timer := time.NewTimer(max(until.Sub(g.now()), 0))
	defer timer.Stop()
	var kaC <-chan struct{}
	var slot uint8
	if keepAlive != nil {
		slot, kaC = g.beat.join()
		defer g.beat.leave(slot)
	}
	for {
		select {
		case <-woke:
			return nil
		case <-touched:
			return nil
		case <-timer.C:
			return nil
		case <-kaC:
			keepAlive(ctx)
			kaC = g.beat.next(slot)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// usedMessage answers a re-send of a consumed approval whose result the
// ledger does not have.
func usedMessage(r approval.Request) string {
	if r.DispatchOutcome == approval.OutcomeUnknown {
		return fmt.Sprintf("approval %s was used, but the outcome of that run is unknown: the gateway instance running it stopped before it recorded a result. "+
			"The call may or may not have had its effect; it is not run again. Check its effect, and make a new call if needed.", r.ID)
	}
	return fmt.Sprintf("approval %s was used already (outcome %s) and its result is no longer kept; it is not run again. Make a new call to run it again (it needs a new approval).",
		r.ID, orNone(string(r.DispatchOutcome)))
}
