// Package gate is where policy, approvals and the store meet. Every
// tools/call passes [Gate.Admit]: policy allows, denies, or asks for an
// approval, which the gate persists, holds until a reviewer decides (or the
// request expires), and consumes immediately before dispatch.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/telemetry"
)

// An Evaluator decides the effect of a call. *policy.Policy implements it.
type Evaluator interface {
	Evaluate(c policy.Call) (policy.Decision, error)
}

// A Catalog reports the current digest of a tool's definition, so that an
// approval bound to an older definition is not consumed. ok is false when the
// tool no longer exists.
type Catalog interface {
	ToolDigest(server, tool string) (digest string, ok bool)
}

// Options configures a Gate. The zero value (or nil) gives the documented defaults.
type Options struct {
	Logger *slog.Logger
	// Now returns the current time; default time.Now. Persisted times come from it.
	Now func() time.Time
	// Instance names this gateway process in held_by; default a random id.
	Instance string
	// KeepAlive is the interval of progress keep-alives while a call is held
	// (only for calls that carry a progress token); default 15s.
	KeepAlive time.Duration
	// Poll is the fallback interval at which a held call re-reads its request
	// even without a wake-up; default 2s.
	Poll time.Duration
	// SweepInterval is how often Run expires overdue requests; default 1s.
	SweepInterval time.Duration
	// MaxPendingPerPrincipal and MaxPending cap pending approvals; 0 means 32
	// and 10000. Over a cap a gated call is refused at once.
	MaxPendingPerPrincipal int
	MaxPending             int
	// Redaction shapes the display copy; the zero value means approval.DefaultRedaction().
	Redaction *approval.Redaction
	// Catalog, when set, is consulted at consume for the tool's current digest.
	Catalog Catalog
	// Metrics records the gate's metrics; nil records nothing.
	Metrics *telemetry.Metrics
}

// A Gate decides tool calls. Its methods are safe for concurrent use.
type Gate struct {
	store    store.Store
	policy   Evaluator
	log      *slog.Logger
	now      func() time.Time
	instance string
	opts     Options
	redact   approval.Redaction
	hub      *hub
	metrics  *telemetry.Metrics
	stopping atomic.Bool
}

// New returns a Gate over s and p.
func New(s store.Store, p Evaluator, opts *Options) *Gate {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Instance == "" {
		id, _ := approval.NewID()
		o.Instance = string(id)
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = time.Second
	}
	if o.MaxPendingPerPrincipal <= 0 {
		o.MaxPendingPerPrincipal = 32
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 10000
	}
	rd := approval.DefaultRedaction()
	if o.Redaction != nil {
		rd = *o.Redaction
	}
	return &Gate{store: s, policy: p, log: o.Logger, now: o.Now, instance: o.Instance, opts: o, redact: rd, hub: newHub(), metrics: o.Metrics}
}

// Admit decides c. It returns at once for allowed and denied calls; for a
// call that needs approval it persists a pending request and blocks until the
// request is decided, expires, or ctx ends. Any error on the way refuses the
// call (fail closed).
func (g *Gate) Admit(ctx context.Context, c Call) Admission {
	dec, err := g.policy.Evaluate(policy.Call{Server: c.Server, Tool: c.Tool, Principal: c.Principal.ID})
	if err != nil {
		g.log.ErrorContext(ctx, "policy evaluation failed; denying", "server", c.Server, "tool", c.Tool, "err", err)
		g.metrics.ToolCall(c.Server, string(policy.Deny))
		return refuse("denied: policy evaluation failed")
	}
	g.metrics.ToolCall(c.Server, string(dec.Effect))
	switch dec.Effect {
	case policy.Allow:
		return Admission{Allowed: true}
	case policy.Deny:
		return refuse(fmt.Sprintf("denied by policy rule %q: %s__%s is not allowed", dec.Rule, c.Server, c.Tool))
	case policy.Approve:
		return g.hold(ctx, c, dec)
	default:
		g.log.ErrorContext(ctx, "policy returned an unknown effect; denying", "effect", dec.Effect)
		return refuse("denied: policy returned an unknown effect")
	}
}

func refuse(msg string) Admission { return Admission{Message: msg} }

func (g *Gate) hold(ctx context.Context, c Call, dec policy.Decision) Admission {
	if dec.NoEligibleApprovers {
		return refuse(fmt.Sprintf("denied: rule %q requires approval but no approver is eligible to review it", dec.Rule))
	}
	hash, err := approval.Hash(c.Arguments)
	if err != nil {
		return refuse(fmt.Sprintf("invalid arguments: %v", err))
	}
	display, warnings, err := approval.Display(c.Arguments, g.redact)
	if err != nil {
		return refuse(fmt.Sprintf("invalid arguments: %v", err))
	}
	if msg := g.overCap(ctx, c.Principal.ID); msg != "" {
		return refuse(msg)
	}
	id, err := approval.NewID()
	if err != nil {
		return refuse("approval store unavailable: cannot make an id")
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
		HeldBy:            g.instance,
	}
	if err := g.store.CreateRequest(ctx, r); err != nil {
		g.log.ErrorContext(ctx, "cannot record approval request; denying", "server", c.Server, "tool", c.Tool, "err", err)
		return refuse("denied: the approval store is unavailable, so the call cannot be held for approval")
	}
	g.metrics.ApprovalRequested()
	g.log.InfoContext(ctx, "approval requested", "approval", id, "server", c.Server, "tool", c.Tool,
		"principal", c.Principal.ID, "rule", dec.Rule, "expires_at", r.ExpiresAt, "arguments_hash", hash)

	got, err := g.wait(ctx, id, r.ExpiresAt, c.KeepAlive)
	g.metrics.ApprovalWaited(g.now().Sub(now).Seconds())
	if err != nil {
		return g.abandon(ctx, id, err)
	}
	return g.settle(ctx, c, got)
}

// overCap returns a refusal message when a pending cap is reached.
func (g *Gate) overCap(ctx context.Context, principal string) string {
	n, err := g.store.CountPending(ctx, principal)
	if err != nil {
		return "denied: the approval store is unavailable, so the call cannot be held for approval"
	}
	if n >= g.opts.MaxPendingPerPrincipal {
		return fmt.Sprintf("denied: %d approvals are already pending for %s (approvals.max_pending_per_principal); decide or let them expire first", n, principal)
	}
	total, err := g.store.CountPending(ctx, "")
	if err != nil {
		return "denied: the approval store is unavailable, so the call cannot be held for approval"
	}
	if total >= g.opts.MaxPending {
		return fmt.Sprintf("denied: %d approvals are already pending in total (approvals.max_pending)", total)
	}
	return ""
}

// errDeadline marks a hold that reached the request's expiry.
var errDeadline = errors.New("approval deadline reached")

// wait blocks until the request leaves pending, its expiry passes, or ctx
// ends. It waits until the stored expiry, never a fresh timeout.
func (g *Gate) wait(ctx context.Context, id approval.ID, expiresAt time.Time, keepAlive func(context.Context)) (approval.Request, error) {
	var kaC <-chan time.Time
	if keepAlive != nil {
		t := time.NewTicker(g.opts.KeepAlive)
		defer t.Stop()
		kaC = t.C
	}
	poll := time.NewTicker(g.opts.Poll)
	defer poll.Stop()
	deadline := time.NewTimer(expiresAt.Sub(g.now()))
	defer deadline.Stop()
	for {
		woke, unsub := g.hub.subscribe(string(id))
		r, err := g.store.GetRequest(ctx, id)
		switch {
		case err == nil && r.State != approval.StatePending:
			unsub()
			return r, nil
		case err == nil && !g.now().Before(r.ExpiresAt):
			unsub()
			return r, errDeadline
		case err != nil && ctx.Err() == nil:
			// The store is unreachable: keep holding, re-read on the next tick.
			g.log.WarnContext(ctx, "cannot read held approval; retrying", "approval", id, "err", err)
		}
		select {
		case <-woke:
		case <-poll.C:
		case <-kaC:
			keepAlive(ctx)
		case <-deadline.C:
			// Re-read once more: a decision may have landed at the deadline.
		case <-ctx.Done():
			unsub()
			return approval.Request{}, context.Cause(ctx)
		}
		unsub()
	}
}

// abandon handles a hold that ended without a decision.
func (g *Gate) abandon(ctx context.Context, id approval.ID, cause error) Admission {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	switch {
	case errors.Is(cause, errDeadline):
		r, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error { return r.Expire(g.now()) })
		if err != nil && !errors.Is(err, approval.ErrResolved) && !errors.Is(err, approval.ErrNotDue) {
			g.log.ErrorContext(ctx, "cannot expire approval", "approval", id, "err", err)
			return refuse("timed out waiting for approval")
		}
		if err != nil { // someone else settled it first; act on what is stored
			r, err = g.store.GetRequest(bg, id)
			if err != nil {
				return refuse("timed out waiting for approval")
			}
		} else {
			g.metrics.ApprovalDecided(string(approval.StateExpired))
		}
		g.hub.wake(string(id))
		return g.settle(ctx, Call{}, r)
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
		// The caller went away or the gateway is stopping: leave it pending.
		g.log.InfoContext(ctx, "caller gone while held; approval stays pending", "approval", id, "cause", cause)
		return Admission{Message: "the caller went away while the call was held", ApprovalID: id}
	}
}

// settle turns a decided request into an admission; for an approved request
// it consumes the approval against c first. c is zero when the caller is gone
// (no dispatch can follow).
func (g *Gate) settle(ctx context.Context, c Call, r approval.Request) Admission {
	a := Admission{ApprovalID: r.ID}
	switch r.State {
	case approval.StateApproved:
		if c.Server == "" {
			a.Message = "approved, but the call is no longer being held"
			return a
		}
		return g.consume(ctx, c, r.ID)
	case approval.StateDenied:
		a.Message = fmt.Sprintf("denied by %s: %s", r.DecidedBy, orNone(r.Reason))
	case approval.StateExpired:
		a.Timeout = true
		a.Message = fmt.Sprintf("timed out: no decision on approval %s before %s; nothing was run", r.ID, r.ExpiresAt.Format(time.RFC3339))
	case approval.StateCancelled:
		a.Message = "cancelled; nothing was run"
	case approval.StateInvalidated:
		a.Message = "approval invalidated: " + r.Reason
	case approval.StateConsumed:
		a.Message = "approval already used; nothing was run"
	default:
		a.Message = fmt.Sprintf("approval is %s; nothing was run", r.State)
	}
	return a
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// consume moves an approved request to consumed in one compare-and-set that
// also revalidates the binding and the current policy; any failure records
// invalidated with a reason and refuses the call.
func (g *Gate) consume(ctx context.Context, c Call, id approval.ID) Admission {
	hash, err := approval.Hash(c.Arguments)
	if err != nil {
		return refuse(fmt.Sprintf("invalid arguments: %v", err))
	}
	digest := c.ToolDigest
	if g.opts.Catalog != nil {
		if d, ok := g.opts.Catalog.ToolDigest(c.Server, c.Tool); ok {
			digest = d
		} else {
			digest = "" // the tool is gone: the binding cannot hold
		}
	}
	deniedBy := ""
	dec, err := g.policy.Evaluate(policy.Call{Server: c.Server, Tool: c.Tool, Principal: c.Principal.ID})
	switch {
	case err != nil:
		deniedBy = "policy evaluation failed"
	case dec.Effect == policy.Deny:
		deniedBy = dec.Rule
	}
	b := approval.Binding{Principal: c.Principal.ID, Server: c.Server, Tool: c.Tool, ArgumentsHash: hash, ToolDigest: digest}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error { return r.Consume(b, deniedBy, g.now()) })
	if err != nil {
		if errors.Is(err, approval.ErrNotApproved) {
			if cur, gerr := g.store.GetRequest(bg, id); gerr == nil && cur.State != approval.StateApproved {
				g.metrics.DispatchRefused("not_approved")
				return g.settle(ctx, Call{}, cur)
			}
		}
		g.metrics.DispatchRefused("store_error")
		g.log.ErrorContext(ctx, "cannot consume approval; refusing", "approval", id, "err", err)
		return Admission{ApprovalID: id, Message: "refused: the approval could not be consumed: " + err.Error()}
	}
	g.hub.wake(string(id))
	if r.State != approval.StateConsumed {
		g.metrics.DispatchRefused("invalidated")
		g.log.WarnContext(ctx, "approval invalidated at dispatch", "approval", id, "reason", r.Reason)
		return Admission{ApprovalID: id, Message: "approval invalidated: " + r.Reason + "; nothing was run"}
	}
	g.log.InfoContext(ctx, "approval consumed; dispatching", "approval", id, "server", c.Server, "tool", c.Tool)
	return Admission{Allowed: true, ApprovalID: id, finish: func(ctx context.Context, o approval.Outcome) { g.recordOutcome(ctx, id, o) }}
}

func (g *Gate) recordOutcome(ctx context.Context, id approval.ID, o approval.Outcome) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error { return r.RecordOutcome(o) }); err != nil {
		g.log.ErrorContext(ctx, "cannot record dispatch outcome", "approval", id, "outcome", o, "err", err)
	}
}
