package gate

import (
	"context"
	"errors"
	"fmt"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// consume moves an approved request to consumed in one compare-and-set that
// also revalidates the binding against the bytes about to be sent, the
// current policy, and the requesting session (revocation and exclusion,
// read inside the same transaction, so a revocation that answered before
// is always seen); any failure records invalidated with a reason and
// refuses the call. A store that cannot be used right now is retried while
// the caller waits: after an outage, an approved request is either
// dispatched by its holder or ends invalidated with a reason (issue 9,
// defect 13). The consumer then holds a dispatch lease, renewed with the
// others until the outcome is recorded, so a process that dies
// mid-dispatch leaves a visible "unknown" outcome (approval.Request.Sweep).
func (g *Gate) consume(ctx context.Context, c Call, id approval.ID) Admission {
	out := c.Arguments
	if c.Outgoing != nil {
		out = c.Outgoing()
	}
	hash, err := approval.Hash(out)
	if err != nil {
		hash = "invalid: " + err.Error() // cannot match the approved hash
	}
	digest := g.currentDigest(c)
	deniedBy := ""
	dec, err := g.consumeDecision(c, out)
	switch {
	case err != nil:
		deniedBy = "policy evaluation failed"
	case dec.Effect == policy.Deny:
		deniedBy = dec.Rule
	}
	b := approval.Binding{Principal: c.Principal.ID, Server: c.Server, Tool: c.Tool, ArgumentsHash: hash, ToolDigest: digest}
	fn := func(r *approval.Request, chain session.Chain) error {
		why := deniedBy
		if why == "" && c.Principal.SessionID != "" {
			// Sessions: only revocation and exclusion are re-checked; a
			// changed require_approval does not touch a call already
			// evaluated.
			if chain == nil {
				why = sessionRefusal(nil, store.ErrNotFound, c)
			} else {
				why = sessionRefusal(chain, nil, c)
			}
		}
		now := g.now()
		if err := r.Consume(b, why, now); err != nil {
			return err
		}
		if r.State == approval.StateConsumed {
			r.Renew(g.instance, now.Add(g.opts.Lease))
		}
		return nil
	}
	var r approval.Request
	err = g.retryStore(ctx, func(actx context.Context) error {
		var err error
		if c.Principal.SessionID == "" {
			// A call without a session has no chain to re-check: fn
			// ignores it, so the store need not read it.
			r, err = g.store.UpdateRequest(actx, id, "toolgate", func(r *approval.Request) error { return fn(r, nil) })
		} else {
			r, err = g.store.UpdateRequestWithChain(actx, id, "toolgate", fn)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, approval.ErrNotApproved) {
			cur, gerr := g.store.GetRequest(context.WithoutCancel(ctx), id)
			if gerr == nil && cur.State != approval.StateApproved {
				g.metrics.DispatchRefused("not_approved")
				return g.settle(ctx, Call{}, cur)
			}
		}
		g.metrics.DispatchRefused("store_error")
		g.releaseHold(ctx, id)
		in := g.incident(ctx, "cannot consume approval; refusing", err, "approval", id)
		return Admission{ApprovalID: id, Message: fmt.Sprintf("refused: the approval could not be used because the approval store failed; nothing was run (error id %s)", in.ID)}
	}
	g.hub.wake(string(id))
	if r.State != approval.StateConsumed {
		g.metrics.DispatchRefused("invalidated")
		g.log.WarnContext(ctx, "approval invalidated at dispatch", "approval", id, "reason", r.Reason)
		return Admission{ApprovalID: id, Meta: g.approvalMeta(r), Message: "approval invalidated: " + r.Reason + "; nothing was run. Re-send to request a new approval."}
	}
	g.leases.add(id, leaseDispatch)
	g.log.InfoContext(ctx, "approval consumed; dispatching", "approval", id, "server", c.Server, "tool", c.Tool)
	if c.Task {
		g.dropTaskArguments(ctx, id)
	}
	return Admission{Allowed: true, ApprovalID: id, Arguments: out, Held: r, finish: func(ctx context.Context, o approval.Outcome, d Recorded) {
		g.recordOutcome(ctx, id, o, g.ledgerRecord(id, d))
	}}
}

// errNoChange aborts an UpdateRequest that has nothing to write.
var errNoChange = errors.New("gate: nothing to change")

// recordOutcome records the dispatch outcome of id and, when rec is not
// nil, its result in the ledger, in one write (store.RecordDispatch), so
// that they land together. When the store cannot take it right now, a
// background writer owned by the gate retries it (Run waits for it) while
// the dispatch lease stays renewed, so the sweeper does not call a call
// that ran "unknown" because of an outage: "unknown" is left for a process
// that really died (issue 9, defect 13). The caller is not kept waiting
// for the retries. When the outcome cannot be recorded at all (the
// request was settled otherwise meanwhile), the result is still kept on
// its own, for a re-send naming the approval.
func (g *Gate) recordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result) {
	write := func(actx context.Context) error {
		fn := func(r *approval.Request) error { return r.RecordOutcome(o) }
		var err error
		if rec == nil {
			_, err = g.store.UpdateRequest(actx, id, "toolgate", fn)
		} else {
			_, err = g.store.RecordDispatch(actx, *rec, "toolgate", fn)
		}
		return err
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	err := write(actx)
	cancel()
	g.health.report(err, g.now())
	if err == nil || !transient(err) {
		g.leases.drop(id, leaseDispatch, false)
		if err != nil {
			g.log.ErrorContext(ctx, "cannot record dispatch outcome", "approval", id, "outcome", o, "err", err)
			if rec != nil {
				g.recordResult(ctx, *rec)
			}
		}
		return
	}
	g.log.WarnContext(ctx, "cannot record dispatch outcome yet; retrying in the background", "approval", id, "outcome", o, "err", err)
	g.outcomes.Go(func() {
		defer g.leases.drop(id, leaseDispatch, false)
		if err := g.retryStore(g.bg, write); err != nil {
			g.log.ErrorContext(g.bg, "cannot record dispatch outcome", "approval", id, "outcome", o, "err", err)
			if rec != nil {
				g.recordResult(g.bg, *rec)
			}
			return
		}
		g.log.InfoContext(g.bg, "dispatch outcome recorded after retrying", "approval", id, "outcome", o)
	})
}
