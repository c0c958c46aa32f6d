package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// hold asks for an approval of c with the parameters of dec and holds the
// call until it is decided. An open identical request that was decided
// (approved, or denied and not yet answered) is used first (see attach);
// then, when decide is not nil, the caller's grants get their chance
// ([Gate.withGrants]; decide is how the policy chooses among them); then
// a pending identical request is attached to, or a new one made. chain is
// c's session chain (nil for other principals). decoded is what the
// admission's policy evaluation decoded of c's arguments (or nil): the
// grant check reads them from it.
func (g *Gate) hold(ctx context.Context, c Call, chain session.Chain, dec policy.Decision, decide func(policy.Call) (policy.Decision, error), decoded *policy.Decoded) Admission {
	if dec.NoEligibleApprovers {
		return refuse(fmt.Sprintf("denied: rule %q requires approval but no approver is eligible to review it", dec.Rule))
	}
	// One parse of the arguments for their hash and, when a request is
	// made, its display copy (they were parsed for each). args is dead
	// once the copy is made, or before attach may wait: a held call
	// keeps neither.
	args, err := approval.Parse(c.Arguments)
	if err != nil {
		return refuse(fmt.Sprintf("invalid arguments: %v", err))
	}
	if g.parsedHook != nil {
		g.parsedHook(args)
	}
	hash := args.Hash()
	open, refusal, ok := g.openIdentical(ctx, c, hash)
	if !ok {
		return refusal
	}
	if len(open) == 0 && sharesIdentical(c, dec) {
		// Nothing to share yet: look again under the lock, so that of
		// identical calls arriving together one creates the request and
		// the others find it.
		unlock, err := g.identical.lock(ctx, identicalKey{c.Principal.ID, c.Server, c.Tool, hash, c.Kind})
		if err != nil {
			return refuse(fmt.Sprintf("call cancelled: %v; nothing was run", err))
		}
		if open, refusal, ok = g.openIdentical(ctx, c, hash); !ok {
			unlock()
			return refusal
		}
		if len(open) == 0 {
			defer unlock() // until this call's request exists
		} else {
			unlock()
		}
	}
	if len(open) > 0 {
		// attach may hold the call for a whole lease (takeOver's wait for
		// another instance's): the parse is not kept through it, and is
		// made again for the display copy only when attach declines and a
		// request is made after all (rare: a live call of this process
		// holds the open one).
		args = nil
	}
	decided := slices.ContainsFunc(open, func(r approval.Request) bool { return r.State != approval.StatePending })
	if decided {
		if adm, ok := g.attach(ctx, c, open); ok {
			return adm
		}
	}
	if decide != nil {
		switch d := g.withGrants(ctx, c, dec, hash, decide, decoded); {
		case d.Grant != "":
			return Admission{Allowed: true, Grant: d.Grant}
		case d.Effect == policy.Deny: // the policy moved meanwhile
			return denied(c, d)
		case d.Effect == policy.Allow:
			return Admission{Allowed: true}
		case d.NoEligibleApprovers:
			return refuse(fmt.Sprintf("denied: rule %q requires approval but no approver is eligible to review it", d.Rule))
		default:
			dec = d
		}
	}
	if !decided {
		if adm, ok := g.attach(ctx, c, open); ok {
			return adm
		}
	}
	if adm, ok := g.quorumRefusal(ctx, c, dec.Rule, dec.Approval); ok {
		return adm // nothing was created; the lock on identical calls is released
	}
	if args == nil {
		if args, err = approval.Parse(c.Arguments); err != nil {
			return refuse(fmt.Sprintf("invalid arguments: %v", err))
		}
	}
	display, warnings := args.Display(g.redact)
	id, err := approval.NewID()
	if err != nil {
		return g.storeRefusal(ctx, msgStoreUnavailable, "cannot make an approval id; denying", err, "server", c.Server, "tool", c.Tool)
	}
	now := g.now().UTC()
	ap := dec.Approval
	r := approval.Request{
		ID:                id,
		State:             approval.StatePending,
		Server:            c.Server,
		Tool:              c.Tool,
		Arguments:         display,
		ArgumentsHash:     hash,
		DisplayWarnings:   warnings,
		ToolDigest:        c.ToolDigest,
		Rule:              dec.Rule,
		Mode:              ap.Mode,
		RequestedBy:       c.Principal.ID,
		OnBehalfOf:        c.Principal.OnBehalfOf,
		Tenant:            c.Principal.Tenant,
		CreatedAt:         now,
		ExpiresAt:         now.Add(ap.Timeout),
		RequiredApprovals: max(ap.Approvals, 1),
		Approvers:         ap.Approvers,
		ValidFor:          ap.ValidFor,
		PolicyRevision:    dec.Revision,
		TimeoutRule:       dec.TimeoutRule,
		NoGrants:          !ap.GrantsAllowed() || g.grantsDisabled(),
	}
	if c.Kind != approval.KindToolCall {
		r.Kind = c.Kind // tool calls keep the empty kind, as before issue 10
	}
	switch {
	case c.Task:
		r.Mode = policy.ModeHold // the task's runner holds it
	case c.Defer:
		r.Mode = policy.ModeRetry // the caller comes back (Resume)
	}
	if r.Mode != policy.ModeRetry {
		r.Renew(g.instance, now.Add(g.opts.Lease))
		// Before the row exists, so no identical call can think it
		// abandoned; not renewed until the creation returned (leaseCreating).
		c.hold = g.leases.hold(id, true)
	}
	pre := g.subscribeCreated(id, r.Mode != policy.ModeRetry && !c.Defer) // before the request exists
	err = g.store.CreateRequest(ctx, r, g.pendingCaps(c.Principal, chain)...)
	if r.Mode != policy.ModeRetry {
		g.leases.drop(id, leaseCreating)
	}
	if err != nil {
		pre.drop()
		switch {
		case ctx.Err() != nil:
			// The caller went away during the creation, which may have
			// committed all the same (on Postgres a COMMIT cancelled in
			// flight can land): its lease is released as a dropped held
			// call's is, or an identical re-send on another instance
			// waited a whole lease for it. The caller waits for nothing.
			g.releaseHold(ctx, id, c.hold)
		case r.Mode == policy.ModeRetry || createRefused(err):
			g.leases.unhold(id, c.hold) // nothing was written (or no lease)
		default:
			// A store failure, which may have come after the commit (a
			// lost COMMIT reply): the lease is released in the
			// background, so that neither this refusal waits for a store
			// in trouble nor a re-send on another instance for the lease.
			g.releaseLater(ctx, id, c.hold)
		}
		return g.createRefusal(ctx, c, err)
	}
	g.metrics.ApprovalRequested()
	g.log.InfoContext(ctx, "approval requested", "approval", id, "server", c.Server, "tool", c.Tool,
		"principal", c.Principal.ID, "rule", dec.Rule, "mode", r.Mode, "expires_at", r.ExpiresAt, "arguments_hash", hash)
	if c.Task {
		if err := g.recordTask(ctx, c, r); err != nil {
			pre.drop()
			g.withdrawUnrecorded(ctx, r.ID)
			g.leases.unhold(id, c.hold)
			return g.storeRefusal(ctx, msgStoreUnavailable, "cannot record the task of an approval request; denying", err, "approval", id)
		}
	}
	switch {
	case c.Defer:
		return g.pendingAnswer(r)
	case r.Mode == policy.ModeRetry:
		return g.approvalRequired(r, "approval required")
	}
	if c.OnHold != nil {
		c.OnHold(r)
	}
	return heldOnCreated(c, r, pre) // Admit waits, once this frame is gone (heldCall)
}

// Names of the pending caps, as their config keys; refusals name them.
const (
	capPerPrincipal = "approvals.max_pending_per_principal"
	capTotal        = "approvals.max_pending"
)

// pendingCaps returns the caps a new request of p must fit: its own
// (for a session: its root session's whole tree, so creating child sessions
// does not multiply the cap) and the total.
func (g *Gate) pendingCaps(p approval.Principal, chain session.Chain) []store.Cap {
	own := store.Cap{Scope: store.CapPrincipal, Key: p.ID, Limit: g.opts.MaxPendingPerPrincipal, Name: capPerPrincipal}
	if len(chain) > 0 {
		own = store.Cap{Scope: store.CapSessionTree, Key: string(chain[len(chain)-1].ID), Limit: g.opts.MaxPendingPerPrincipal, Name: capPerPrincipal}
	}
	return []store.Cap{own, {Scope: store.CapTotal, Limit: g.opts.MaxPending, Name: capTotal}}
}

// createRefused reports whether err, from CreateRequest, is the store's
// refusal inside the transaction (a cap, a session revoked meanwhile, a
// session_policy request's base revision that moved: store.ErrConflict),
// which wrote nothing, rather than a failure that may have come after
// its commit.
func createRefused(err error) bool {
	var ce *store.CapError
	return errors.As(err, &ce) || errors.Is(err, session.ErrRevoked) || errors.Is(err, store.ErrConflict)
}

// createRefusal is the answer to a call whose request the store refused
// to create: over a cap, a session revoked meanwhile, or a store failure.
func (g *Gate) createRefusal(ctx context.Context, c Call, err error) Admission {
	var ce *store.CapError
	switch {
	case errors.As(err, &ce) && ce.Cap.Name == capTotal:
		return refuse(fmt.Sprintf("denied: %d approvals are already pending in total (%s); decide or let them expire first", ce.Pending, capTotal))
	case errors.As(err, &ce):
		who := c.Principal.ID
		if ce.Cap.Scope == store.CapSessionTree {
			who = "session tree " + ce.Cap.Key
		}
		return refuse(fmt.Sprintf("denied: %d approvals are already pending for %s (%s); decide or let them expire first", ce.Pending, who, ce.Cap.Name))
	case errors.Is(err, session.ErrRevoked):
		return refuse(fmt.Sprintf("refused: session %s was revoked; nothing was run", c.Principal.SessionID))
	}
	return g.storeRefusal(ctx, msgStoreUnavailable, "cannot record approval request; denying", err, "server", c.Server, "tool", c.Tool)
}
