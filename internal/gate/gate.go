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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/telemetry"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// An Evaluator decides the effect of a call. *policy.Policy implements it,
// and so do *policy.Evaluator (compiled once) and *policy.Holder, whose
// policy can be swapped at run time.
//
// Two methods are optional. With Revision() string (policy.Holder,
// policy.Evaluator), an approved call is not evaluated again at consume
// while the revision in force is the one its admission was decided under
// (policy.Decision.Revision). With Listed(policy.Call) bool
// (policy.Holder), [Gate.Usable] hides what the policy denies a caller
// whatever the arguments (policy.list_denied).
type Evaluator interface {
	Evaluate(c policy.Call) (policy.Decision, error)
}

// revisioned is the optional part of an Evaluator that names the revision
// in force.
type revisioned interface{ Revision() string }

// lister is the optional part of an Evaluator that decides tools/list.
type lister interface{ Listed(c policy.Call) bool }

// A Catalog reports the current digest of a tool's definition, so that an
// approval bound to an older definition is not consumed. ok is false when the
// tool no longer exists. A Catalog that also implements ItemCatalog is asked
// about resources and prompts too.
type Catalog interface {
	ToolDigest(server, tool string) (digest string, ok bool)
}

// An ItemCatalog reports the current digest of what a call of kind (an
// approval kind) uses: a tool's or a prompt's definition digest, "" for a
// resource. ok is false when it no longer exists.
type ItemCatalog interface {
	ItemDigest(kind, server, name string) (digest string, ok bool)
}

// currentDigest is the digest c's approval must match at consume: the
// catalog's current one ("" when the item is gone, so the binding cannot
// hold), or c.ToolDigest when the catalog cannot tell.
func (g *Gate) currentDigest(c Call) string {
	if g.opts.Catalog == nil {
		return c.ToolDigest
	}
	var (
		d  string
		ok bool
	)
	if ic, isItem := g.opts.Catalog.(ItemCatalog); isItem {
		d, ok = ic.ItemDigest(c.Kind, c.Server, c.Tool)
	} else if c.Kind == "" || c.Kind == approval.KindToolCall {
		d, ok = g.opts.Catalog.ToolDigest(c.Server, c.Tool)
	} else {
		return c.ToolDigest
	}
	if !ok {
		return ""
	}
	return d
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
	// Lease is how long a holder's claim on a request lasts unless renewed;
	// holders renew it every Lease/3. When it lapses (the caller dropped or
	// the process died), an identical re-send from the same principal takes
	// the request over. Default 15s.
	Lease time.Duration
	// RetryWait is how long an identical re-send of a call in retry mode
	// waits for the decision before it answers "still pending"; default 20s.
	RetryWait time.Duration
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
	// Tracer starts the spans of calls and approval waits; nil means no-op.
	Tracer trace.Tracer
	// ServerExists reports whether the deployment configures a server; it
	// decides which session refs and require_approval keys are unknown
	// (session.ErrUnknownServer). nil accepts every valid server name.
	ServerExists func(server string) bool
	// SessionApproval holds the approval parameters of calls that a
	// session's require_approval holds while the deployment policy allows
	// them (normally policy.approval); zero fields mean a 5m timeout, hold
	// mode and one approval.
	SessionApproval policy.Approval
	// SessionApprovalFunc, when set, is called for each such call instead
	// of reading SessionApproval, so the parameters follow a deployment
	// policy reloaded at run time (cmd passes the policy.Holder's
	// Load().Approval). Zero fields get the same defaults.
	SessionApprovalFunc func() policy.Approval
	// Annotations returns the annotations of a tool for policy rules, or
	// nil when they are unknown or its server is not trusted
	// (servers.<name>.trust_annotations); nil means unknown for every tool.
	Annotations func(server, tool string) *policy.Annotations
	// PolicyRequestTimeout is how long a session's pending policy request
	// waits for a decision (config sessions.policy_request_timeout);
	// default 300s. MaxPolicyRequests caps a session's pending policy
	// requests, apart from its tool-call approvals; default 32.
	PolicyRequestTimeout time.Duration
	MaxPolicyRequests    int
	// PublicURL is the approver inbox's external base URL
	// (approvals.public_url, e.g. https://toolgate.example.com), without a
	// trailing slash. When set, answers about pending approvals (and task
	// status messages) include the approval's inbox page,
	// PublicURL + "/ui/approvals/" + id; "" leaves the link out.
	PublicURL string
	// Key signs task ids and multi round-trip request states and seals the
	// raw arguments kept for tasks; every instance sharing the store must
	// use the same one. Without a valid key, calls cannot become tasks or
	// multi round-trip requests (Call.Task and Call.Defer are refused).
	Key seal.Key
	// ResultMaxBytes bounds a result kept in the result ledger; a larger
	// one is replaced by a stand-in saying so. Default 1 MiB.
	ResultMaxBytes int
	// ResultTTL is how long the ledger keeps a consumed approval's result
	// after it was recorded (and how long a finished task stays readable).
	// Default 1h.
	ResultTTL time.Duration
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

	mu      sync.Mutex
	holding map[approval.ID]bool // guarded by mu: requests a call in this process holds

	lastPrune time.Time // owned by Run's goroutine (sweep): the ledger's last prune
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
		o.Now = time.Now //nolint:forbidigo // the default of the injected clock
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
	if o.Lease <= 0 {
		o.Lease = 15 * time.Second
	}
	if o.RetryWait <= 0 {
		o.RetryWait = 20 * time.Second
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = time.Second
	}
	if o.Tracer == nil {
		o.Tracer = noop.NewTracerProvider().Tracer("toolgate/gate")
	}
	if o.MaxPendingPerPrincipal <= 0 {
		o.MaxPendingPerPrincipal = 32
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 10000
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	if o.ResultMaxBytes <= 0 {
		o.ResultMaxBytes = 1 << 20
	}
	if o.ResultTTL <= 0 {
		o.ResultTTL = time.Hour
	}
	rd := approval.DefaultRedaction()
	if o.Redaction != nil {
		rd = *o.Redaction
	}
	return &Gate{store: s, policy: p, log: o.Logger, now: o.Now, instance: o.Instance, opts: o, redact: rd, hub: newHub(), metrics: o.Metrics, holding: map[approval.ID]bool{}}
}

// Admit decides c. It returns at once for allowed and denied calls; for a
// call that needs approval it persists a pending request and blocks until the
// request is decided, expires, or ctx ends. Any error on the way refuses the
// call (fail closed).
//
// Admit starts the call's span (attributes mcp.method.name, gen_ai.tool.name
// or gen_ai.prompt.name or mcp.resource.uri, toolgate.server, approval.id); it ends with a refusal, or at
// Admission.Finish for an admitted call.
func (g *Gate) Admit(ctx context.Context, c Call) Admission {
	ctx, span := g.opts.Tracer.Start(ctx, c.spanName(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("mcp.method.name", c.method()),
			attribute.String(c.nameAttribute(), c.Tool),
			attribute.String("toolgate.server", c.Server),
		))
	adm := g.admit(ctx, c)
	span.SetAttributes(attribute.Bool("toolgate.allowed", adm.Allowed))
	if adm.ApprovalID != "" {
		span.SetAttributes(attribute.String("approval.id", string(adm.ApprovalID)))
	}
	if !adm.Allowed {
		span.End()
		return adm
	}
	inner := adm.finish
	adm.finish = func(ctx context.Context, o approval.Outcome, d Recorded) {
		if inner != nil {
			inner(ctx, o, d)
		}
		span.SetAttributes(attribute.String("toolgate.dispatch_outcome", string(o)))
		span.End()
	}
	return adm
}

func (g *Gate) admit(ctx context.Context, c Call) Admission {
	// A session's call is first checked against the session's policy
	// (revocation, tool exclusion: no approval overrides these); the effect
	// is then the strictest of the deployment's and the session's
	// require_approval, decided once, here (issue 5).
	var chain session.Chain
	if c.Principal.SessionID != "" {
		ch, refusal, ok := g.sessionChain(ctx, c)
		if !ok {
			return refusal
		}
		chain = ch
	}
	if c.Resume != "" {
		// The approval exists: policy is evaluated again at consume.
		return g.resume(ctx, c)
	}
	if (c.Task || c.Defer) && !g.opts.Key.Valid() {
		return refuse("denied: this gateway has no key to keep the call as a task or a multi round-trip request")
	}
	dec, err := g.policy.Evaluate(g.policyCall(c, c.Arguments))
	if err != nil {
		g.log.ErrorContext(ctx, "policy evaluation failed; denying", "server", c.Server, "tool", c.Tool, "kind", c.Kind, "err", err)
		g.metrics.ToolCall(c.Server, string(policy.Deny))
		return refuse("denied: policy evaluation failed")
	}
	g.metrics.ToolCall(c.Server, string(dec.Effect))
	g.noteDecision(ctx, c, dec)
	c.admitted = &dec // consume reuses it while the revision stays
	adm := g.admitDecided(ctx, c, chain, dec)
	adm.Monitor = dec.Monitor
	return adm
}

// admitDecided acts on the policy decision dec for c.
func (g *Gate) admitDecided(ctx context.Context, c Call, chain session.Chain, dec policy.Decision) Admission {
	switch dec.Effect {
	case policy.Allow:
		if chain.RequiresApprovalItem(c.item()) {
			return g.hold(ctx, c, g.sessionApproval())
		}
		return Admission{Allowed: true}
	case policy.Deny:
		return refuse(fmt.Sprintf("denied by policy rule %q%s: %s is not allowed", dec.Rule, erredNote(dec), c.label()))
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
	if adm, ok := g.attach(ctx, c, hash); ok {
		return adm
	}
	display, warnings, err := approval.Display(c.Arguments, g.redact)
	if err != nil {
		return refuse(fmt.Sprintf("invalid arguments: %v", err))
	}
	if msg := g.overCap(ctx, c.Principal); msg != "" {
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
		g.setHolding(id, true) // before the row exists, so no identical call can think it abandoned
		defer g.setHolding(id, false)
	}
	if err := g.store.CreateRequest(ctx, r); err != nil {
		g.log.ErrorContext(ctx, "cannot record approval request; denying", "server", c.Server, "tool", c.Tool, "err", err)
		return refuse("denied: the approval store is unavailable, so the call cannot be held for approval")
	}
	g.metrics.ApprovalRequested()
	g.log.InfoContext(ctx, "approval requested", "approval", id, "server", c.Server, "tool", c.Tool,
		"principal", c.Principal.ID, "rule", dec.Rule, "mode", r.Mode, "expires_at", r.ExpiresAt, "arguments_hash", hash)
	if c.Task {
		if err := g.recordTask(ctx, c, r); err != nil {
			g.withdrawUnrecorded(ctx, r.ID)
			g.log.ErrorContext(ctx, "cannot record the task of an approval request; denying", "approval", id, "err", err)
			return refuse("denied: the approval store is unavailable, so the call cannot be held for approval")
		}
	}
	switch {
	case c.Defer:
		return g.pendingAnswer(r)
	case r.Mode == policy.ModeRetry:
		return approvalRequired(r, "approval required")
	}
	if c.OnHold != nil {
		c.OnHold(r)
	}
	return g.holdOn(ctx, c, r)
}

// approvalRequired is the answer of a call in retry mode whose request is
// still pending.
func approvalRequired(r approval.Request, what string) Admission {
	return Admission{
		ApprovalID: r.ID,
		Message: fmt.Sprintf("%s: this call needs a human approval (approval %s, rule %q); nothing was run. "+
			"Re-send the identical call to wait for the decision; the request expires at %s.",
			what, r.ID, r.Rule, r.ExpiresAt.UTC().Format(time.RFC3339)),
		Meta: approvalMeta(r),
	}
}

// approvalMeta is the _meta["toolgate/approval"] entry of answers about r.
func approvalMeta(r approval.Request) map[string]any {
	return map[string]any{"toolgate/approval": map[string]any{
		"id":         string(r.ID),
		"state":      string(r.State),
		"mode":       r.Mode,
		"expires_at": r.ExpiresAt.UTC().Format(time.RFC3339),
	}}
}

func (g *Gate) setHolding(id approval.ID, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if on {
		g.holding[id] = true
	} else {
		delete(g.holding, id)
	}
}

func (g *Gate) isHolding(id approval.ID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holding[id]
}

// overCap returns a refusal message when a pending cap is reached.
// A session's requests count against its root session's whole tree, so
// creating child sessions does not multiply the cap.
func (g *Gate) overCap(ctx context.Context, p approval.Principal) string {
	const unavailable = "denied: the approval store is unavailable, so the call cannot be held for approval"
	var n int
	var err error
	who := p.ID
	if p.SessionID != "" {
		var ch session.Chain
		if ch, err = g.store.Chain(ctx, session.ID(p.SessionID)); err == nil && len(ch) > 0 {
			root := ch[len(ch)-1].ID
			who = "session tree " + string(root)
			n, err = g.store.CountPendingInTree(ctx, root)
		}
	} else {
		n, err = g.store.CountPending(ctx, p.ID)
	}
	if err != nil {
		return unavailable
	}
	if n >= g.opts.MaxPendingPerPrincipal {
		return fmt.Sprintf("denied: %d approvals are already pending for %s (approvals.max_pending_per_principal); decide or let them expire first", n, who)
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

// settle turns a decided request into an admission; for an approved request
// it consumes the approval against c first. c is zero when the caller is gone
// (no dispatch can follow).
func (g *Gate) settle(ctx context.Context, c Call, r approval.Request) Admission {
	a := Admission{ApprovalID: r.ID, Meta: approvalMeta(r)}
	switch r.State {
	case approval.StateApproved:
		if c.Server == "" {
			a.Message = "approved, but the call is no longer being held"
			return a
		}
		return g.consume(ctx, c, r.ID)
	case approval.StateDenied:
		g.answer(ctx, r.ID)
		a.Message = fmt.Sprintf("denied by %s: %s; nothing was run", r.DecidedBy, orNone(r.Reason))
	case approval.StateExpired:
		a.Timeout = true
		a.Message = fmt.Sprintf("timed out: no decision on approval %s before %s; nothing was run", r.ID, r.ExpiresAt.UTC().Format(time.RFC3339))
		if r.Reason == approval.ReasonUnusedApproval {
			a.Message = fmt.Sprintf("timed out: approval %s was approved but not used within its validity; nothing was run", r.ID)
		}
	case approval.StateCancelled:
		a.Message = "cancelled; nothing was run"
	case approval.StateInvalidated:
		a.Message = "approval invalidated: " + r.Reason + "; nothing was run"
	case approval.StateConsumed:
		a.Message = "approval already used by an identical call; nothing was run. Re-send to request a new approval."
	default:
		a.Message = fmt.Sprintf("approval is %s; nothing was run", r.State)
	}
	return a
}

// answer records that a denial was delivered, so identical re-sends start a
// new request instead of getting it again.
func (g *Gate) answer(ctx context.Context, id approval.ID) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error { return r.Answer(g.now()) })
	if err != nil && !errors.Is(err, approval.ErrResolved) {
		g.log.WarnContext(ctx, "cannot record that a denial was answered", "approval", id, "err", err)
	}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// consume moves an approved request to consumed in one compare-and-set that
// also revalidates the binding against the bytes about to be sent and the
// current policy; any failure records invalidated with a reason and refuses
// the call. The consumer takes a lease for the dispatch, renewed until
// Finish, so a process that dies mid-dispatch leaves a visible "unknown"
// outcome (see approval.Request.Sweep).
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
	if deniedBy == "" {
		// Sessions: only revocation and exclusion are re-checked; a changed
		// require_approval does not touch a call already evaluated.
		deniedBy = g.sessionDeniedAtDispatch(ctx, c)
	}
	b := approval.Binding{Principal: c.Principal.ID, Server: c.Server, Tool: c.Tool, ArgumentsHash: hash, ToolDigest: digest}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error {
		now := g.now()
		if err := r.Consume(b, deniedBy, now); err != nil {
			return err
		}
		if r.State == approval.StateConsumed {
			r.Renew(g.instance, now.Add(g.opts.Lease))
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, approval.ErrNotApproved) {
			if cur, gerr := g.store.GetRequest(bg, id); gerr == nil && cur.State != approval.StateApproved {
				g.metrics.DispatchRefused("not_approved")
				return g.settle(ctx, Call{}, cur)
			}
		}
		g.metrics.DispatchRefused("store_error")
		g.log.ErrorContext(ctx, "cannot consume approval; refusing", "approval", id, "err", err)
		return Admission{ApprovalID: id, Message: "refused: the approval could not be consumed (" + err.Error() + "); nothing was run"}
	}
	g.hub.wake(string(id))
	if r.State != approval.StateConsumed {
		g.metrics.DispatchRefused("invalidated")
		g.log.WarnContext(ctx, "approval invalidated at dispatch", "approval", id, "reason", r.Reason)
		return Admission{ApprovalID: id, Meta: approvalMeta(r), Message: "approval invalidated: " + r.Reason + "; nothing was run. Re-send to request a new approval."}
	}
	g.log.InfoContext(ctx, "approval consumed; dispatching", "approval", id, "server", c.Server, "tool", c.Tool)
	if c.Task {
		g.dropTaskArguments(ctx, id)
	}
	stop := g.renewWhileDispatching(ctx, id)
	return Admission{Allowed: true, ApprovalID: id, Arguments: out, Held: r, finish: func(ctx context.Context, o approval.Outcome, d Recorded) {
		stop()
		// The result first: a process that dies between the two leaves a
		// result to report rather than an unknown outcome.
		g.recordResult(ctx, id, d)
		g.recordOutcome(ctx, id, o)
	}}
}

// renewWhileDispatching renews the dispatch lease of id until stop is called.
func (g *Gate) renewWhileDispatching(ctx context.Context, id approval.ID) (stop func()) {
	// The lease outlives the call's cancellation: it is renewed until the
	// outcome is recorded, and stop ends it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(g.opts.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _ = g.store.UpdateRequest(ctx, id, "toolgate", func(r *approval.Request) error {
					if r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeNone || r.HeldBy != g.instance {
						return errNoChange
					}
					r.Renew(g.instance, g.now().Add(g.opts.Lease))
					return nil
				})
			}
		}
	}()
	return func() { cancel(); <-done }
}

// errNoChange aborts an UpdateRequest that has nothing to write.
var errNoChange = errors.New("gate: nothing to change")

func (g *Gate) recordOutcome(ctx context.Context, id approval.ID, o approval.Outcome) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error { return r.RecordOutcome(o) }); err != nil {
		g.log.ErrorContext(ctx, "cannot record dispatch outcome", "approval", id, "outcome", o, "err", err)
	}
}
