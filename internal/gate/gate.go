// Package gate is where policy, approvals and the store meet. Every
// tools/call passes [Gate.Admit]: policy allows, denies, or asks for an
// approval, which the gate persists, holds until a reviewer decides (or the
// request expires), and consumes immediately before dispatch.
package gate

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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

// PolicyRevision returns the revision of the deployment policy in force,
// as a request's approval.Request.PolicyRevision records the one that
// asked for it (policy.Decision.Revision); "" when the Evaluator has no
// revision (a plain *policy.Policy).
func (g *Gate) PolicyRevision() string {
	if r, ok := g.policy.(revisioned); ok {
		return r.Revision()
	}
	return ""
}

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
	// Watched says that the caller reports every change another process
	// or instance makes to the store (Wake, WakeAll and Changed, from
	// sqlstore.DB.WatchLog). With a store that tells its next due times
	// (store.DueTimer), Run's sweeper then skips the store while nothing
	// can be due (sweepDue); without, it sweeps every SweepInterval.
	Watched bool
	// Settled, when not nil, returns a generation of the store's commits
	// and whether it is current (sqlstore.DB.Settled): with Watched, the
	// idle sweeper skips its pending count while the generation is
	// current and unchanged since its last count (countUnlessSettled).
	Settled store.Settled
	// Retention says what Run prunes from the store, every PruneInterval
	// (default 1h); the zero value prunes nothing (see store.Retention).
	Retention     store.Retention
	PruneInterval time.Duration
	// MaxPendingPerPrincipal and MaxPending cap pending approvals; 0 means 32
	// and 10000. Over a cap a gated call is refused at once. The caps are
	// checked in the transaction that creates the request (store.Cap), so
	// they hold across goroutines and across processes sharing the store.
	// A session's requests count against its root session's whole tree.
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
	// Policies, when set, is the follower of the deployment policy kept in
	// the store (policy.source: store; cmd passes policystore.Service).
	// The consume of an approved call then reads the store's newest
	// revision number inside its transaction, under the policy lock
	// (store.TxReads.PolicyRevision), and commits only when it is the
	// revision its policy check used (Policies.Installed before the
	// check); when another instance's revision came first, the
	// transaction is rolled back, the policy brought up to date
	// (Policies.Sync) and the call checked again, at most
	// maxRevisionMoves times, after which it is refused. So no approved
	// call is dispatched under a revision that was replaced before its
	// consume committed, even while this instance's follower has not
	// woken yet (branch consume39). Only consumes pay the read (no read
	// before it, and none on allowed calls). nil: the policy in force is
	// the newest (policy.source: file).
	Policies PolicyFollower
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
	// GrantMaxTTL is the longest duration of a grant attached to an
	// approval (config grants.max_ttl); a longer one is refused, never
	// shortened. Default DefaultGrantMaxTTL.
	GrantMaxTTL time.Duration
	// GrantsDisabled turns grants off for the whole deployment (config
	// grants.enabled: false): ApproveWithGrant refuses with
	// grant.ErrForbidden and no grant, even one made before, admits a
	// call.
	GrantsDisabled bool
	// GrantsDisabledFunc, when set, is read instead of GrantsDisabled each
	// time the gate needs it, so that the setting follows a config reload
	// (cmd passes one that reads the grants.enabled of the config last
	// loaded).
	GrantsDisabledFunc func() bool
	// Reviewers, when not nil, is everyone who can review requests (the
	// configured approvers with role approver or admin, and serve --dev's
	// approver): a call whose approval fewer of them may review than its
	// quorum is refused at once instead of held until it expires
	// (CodeQuorumUnreachable). nil: the reviewers are not known to this
	// process (approvals.allow_no_approvers; they may be configured in
	// another process sharing the store), and such calls are held.
	Reviewers []Reviewer
	// Recorder, when set, is told of every call decided without an
	// approval request and of monitor-mode verdicts (the audit trail);
	// calls through an approval are recorded by their events.
	Recorder Recorder
}

// A Gate decides tool calls. Its methods are safe for concurrent use.
type Gate struct {
	// parsedHook, when set (by tests only, before the gate's first call),
	// sees the parse of each held call's arguments that hold makes first.
	parsedHook func(*approval.Parsed)

	store    store.Store
	policy   Evaluator
	log      *slog.Logger
	now      func() time.Time
	instance string
	opts     Options
	redact   approval.Redaction
	hub      *hub
	// touch are the take-over waits Touched may wake.
	touch    touchWaits
	metrics  *telemetry.Metrics
	stopping atomic.Bool

	identical identicalLocks // retry-mode look-up and creation, per call (identical.go)
	quorumLog refusalLog     // thins the log lines of quorum refusals (refusallog.go)

	lastPrune time.Time         // owned by Run's goroutine (sweep): the ledger's last prune
	due       sweepDue          // when the sweeper next has work (sweepdue.go)
	counted   store.SettledMark // owned by Run's goroutine: the idle sweeper's last count (sweepdue.go)

	leases *leases     // the leases this process renews
	beat   *beat       // the keep-alive clock of every held call
	health storeHealth // whether the store answered lately (for the sweeper)
	// outcomes are the background writers of dispatch outcomes the store
	// could not take at once (see recordOutcome); Run waits for them.
	outcomes background
	// releases are the background releases of leases (releaseLater), at
	// most maxBackgroundReleases at once (releasing); Run waits for them.
	releases  background
	releasing chan struct{}
	// bg is canceled when Run ends; background writers stop retrying then.
	bg       context.Context
	bgCancel context.CancelFunc
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
	if o.Lease <= 0 {
		o.Lease = 15 * time.Second
	}
	if o.RetryWait <= 0 {
		o.RetryWait = 20 * time.Second
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = time.Second
	}
	if o.PruneInterval <= 0 {
		o.PruneInterval = time.Hour
	}
	if o.Tracer == nil {
		o.Tracer = noop.NewTracerProvider().Tracer("toolgate/gate")
	}
	o.Tracer = newSafeTracer(o.Tracer, o.Logger) // tracesafe.go
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
	if o.GrantMaxTTL <= 0 {
		o.GrantMaxTTL = DefaultGrantMaxTTL
	}
	rd := approval.DefaultRedaction()
	if o.Redaction != nil {
		rd = *o.Redaction
	}
	g := &Gate{store: s, policy: p, log: o.Logger, now: o.Now, instance: o.Instance, opts: o, redact: rd, hub: newHub(),
		metrics: o.Metrics, leases: newLeases(), beat: newBeat(o.KeepAlive), releasing: make(chan struct{}, maxBackgroundReleases)}
	if dt, ok := s.(store.DueTimer); ok && o.Watched {
		g.due.timer = dt
		g.store = changeNoting{Store: s, due: &g.due}
	}
	// Until the store has answered for a lease, holders elsewhere that an
	// outage kept from renewing are given the benefit of the doubt.
	g.health.since = o.Now()
	g.bg, g.bgCancel = context.WithCancel(context.Background())
	return g
}

// Admit decides c. It returns at once for allowed and denied calls; for a
// call that needs approval it persists a pending request and blocks until the
// request is decided, expires, or ctx ends. Any error on the way refuses the
// call (fail closed).
//
// Admit starts the call's span (attributes mcp.method.name, gen_ai.tool.name
// or gen_ai.prompt.name or mcp.resource.uri, toolgate.server, approval.id); it ends with a refusal, or at
// Admission.Finish for an admitted call.
func (g *Gate) Admit(ctx context.Context, c Call) (adm Admission) {
	g.AdmitTo(ctx, &c, &adm)
	return adm
}

// AdmitTo is Admit writing its answer to *adm. A held call waits in this
// frame and those below it for minutes: the work before and after the
// wait is in functions that return (see heldCall), and the answer is
// written in place, so a caller that keeps c and adm off its own frame
// (the gateway's middleware) parks a held call in a small stack.
func (g *Gate) AdmitTo(ctx context.Context, c *Call, adm *Admission) {
	ctx, span := g.startAdmit(ctx, c, time.Time{})
	g.admitInto(ctx, c, adm)
	if adm.held != nil {
		g.waitHeld(ctx, adm)
	}
	g.endAdmit(span, adm)
}

// AdmitOrHold is AdmitTo's first half, for a caller that holds a call on
// a goroutine other than the one that admits it (the gateway's parked
// calls, docs/performance.md "One goroutine per parked call"): it decides
// c and records its admission (the policy, the store write of a held
// call's request) on the calling goroutine and, when the call is held,
// returns without waiting, held true and hctx, ctx with the admission's
// span, to hand to WaitAdmitted, which must then be called exactly once
// (on any goroutine) to wait for the decision and complete *adm. When held
// is false *adm is the final answer, as AdmitTo's, and hctx is nil. The
// goroutine that lives for the whole hold then never runs the admission's
// deep work, so its stack stays small. A held call keeps c itself, not a
// copy: the caller lends *c to the gate (which writes its unexported
// state into it) and must not change it until the wait returns.
func (g *Gate) AdmitOrHold(ctx context.Context, c *Call, adm *Admission) (hctx context.Context, held bool) {
	ctx, span := g.startAdmit(ctx, c, time.Time{})
	g.admitInto(ctx, c, adm)
	if h := adm.held; h != nil {
		// The caller's Call is the held one from now on (lent until
		// WaitHold returns): the gate's copy, with what admit set on it,
		// goes back into it and is dropped.
		*c = *h.c
		h.c = c
		g.readAhead(ctx, h)
		return ctx, true
	}
	g.endAdmit(span, adm)
	return nil, false
}

// WaitAdmitted waits for the decision on the call AdmitOrHold held (hctx:
// the context it returned; adm: the Admission it wrote) and writes the
// answer to *adm, as AdmitTo does after its wait: the call is parked in
// this frame and the gate's small wait frames below it.
func (g *Gate) WaitAdmitted(hctx context.Context, adm *Admission) {
	g.waitHeld(hctx, adm)
	g.endAdmit(trace.SpanFromContext(hctx), adm)
}

// A HeldCall is the hold of a call AdmitOrHold held, taken out of its
// Admission (Admission.TakeHold) for WaitHold: what the wait needs and
// none of the Admission's answer fields (712 B), which a held call would
// otherwise keep for minutes (docs/performance.md, "Smaller held calls").
// The zero HeldCall holds nothing.
type HeldCall struct{ h *heldCall }

// TakeHold returns the hold of an Admission that AdmitOrHold answered
// held, leaving the Admission without it (the zero HeldCall when it has
// none). The hold must then be waited for exactly once with WaitHold.
func (a *Admission) TakeHold() HeldCall {
	h := a.held
	a.held = nil
	return HeldCall{h: h}
}

// WaitHold is WaitAdmitted for a hold taken out of its Admission
// (TakeHold): it waits for the decision on hc (hctx: the context
// AdmitOrHold returned) and returns the answer, a new Admission as
// WaitAdmitted would have written it. The call is parked in this frame and
// the gate's small wait frames below it.
func (g *Gate) WaitHold(hctx context.Context, hc HeldCall) *Admission {
	adm := g.holdOn(hctx, hc.h)
	g.afterHold(hctx, hc.h, adm)
	g.endAdmit(trace.SpanFromContext(hctx), adm)
	return adm
}

// startAdmit starts the span of c's admission (see Admit).
//
//go:noinline // its attribute temporaries stay out of Admit's parked frame
func (g *Gate) startAdmit(ctx context.Context, c *Call, start time.Time) (context.Context, trace.Span) {
	if _, ok := g.opts.Tracer.(noop.Tracer); ok {
		// It ignores the name and the options: not built (issue 13, an
		// allowed call's allocations).
		return g.opts.Tracer.Start(ctx, "")
	}
	opts := make([]trace.SpanStartOption, 0, 3)
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	opts = append(opts, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("mcp.method.name", c.method()),
			attribute.String(c.nameAttribute(), c.Tool),
			attribute.String("toolgate.server", c.Server),
		))
	return g.opts.Tracer.Start(ctx, c.spanName(), opts...)
}

// admitInto sets *adm to admit's answer for c.
//
//go:noinline // admit's frame is gone before a held call waits
func (g *Gate) admitInto(ctx context.Context, c *Call, adm *Admission) {
	*adm = g.admit(ctx, *c)
}

// endAdmit ends span for a refused call, or makes adm's Finish end it.
//
//go:noinline // its closure stays out of Admit's parked frame
func (g *Gate) endAdmit(span trace.Span, adm *Admission) {
	if !span.IsRecording() {
		// Its attributes and End do nothing: adm's Finish is left as it
		// is (no closure per call).
		return
	}
	span.SetAttributes(attribute.Bool("toolgate.allowed", adm.Allowed))
	if adm.ApprovalID != "" {
		span.SetAttributes(attribute.String("approval.id", string(adm.ApprovalID)))
	}
	if !adm.Allowed {
		span.End()
		return
	}
	inner := adm.finish
	adm.finish = func(ctx context.Context, o approval.Outcome, d Recorded) {
		if inner != nil {
			inner(ctx, o, d)
		}
		span.SetAttributes(attribute.String("toolgate.dispatch_outcome", string(o)))
		span.End()
	}
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
			g.record(ctx, c, nil, refusal)
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
	dec, err := g.evaluate(c)
	return g.decide(ctx, c, chain, dec, err)
}

// decide acts on the policy's answer (dec, err) for c, as admit does once
// it has it: counts it, refuses on an error, and records the admission
// (a held call's after its wait).
func (g *Gate) decide(ctx context.Context, c Call, chain session.Chain, dec policy.Decision, err error) Admission {
	if err != nil {
		g.log.ErrorContext(ctx, "policy evaluation failed; denying", "server", c.Server, "tool", c.Tool, "kind", c.Kind, "err", err)
		g.metrics.ToolCall(c.Server, string(policy.Deny))
		adm := refuse("denied: policy evaluation failed")
		g.record(ctx, c, nil, adm)
		return adm
	}
	g.noteDecision(ctx, c, dec)
	// What the evaluation decoded serves a held call's grant check (one
	// decode of its arguments, args29); no kept decision holds it.
	decoded := dec.Decoded
	dec.Decoded = nil
	// The hand-off has served (evaluate): a held call does not keep it,
	// and the decision it carries, while it waits.
	c.Prior = nil
	adm := g.admitDecided(ctx, c, chain, dec, decoded)
	g.metrics.ToolCall(c.Server, countedEffect(c, chain, dec, adm))
	if adm.held != nil {
		// Admit waits for the decision; the admission is recorded after it,
		// with the copy the held call keeps (admitDecided), one per call.
		if hc := adm.held.c; hc != nil && hc.admitted != nil {
			adm.held.dec = hc.admitted
		} else {
			adm.held.dec = keptDecision(dec)
		}
		return adm
	}
	adm.Monitor = dec.Monitor
	g.record(ctx, c, &dec, adm)
	return adm
}

// admitDecided acts on the policy decision dec for c; decoded is what
// the evaluation decoded of c (for hold's grant check), or nil.
func (g *Gate) admitDecided(ctx context.Context, c Call, chain session.Chain, dec policy.Decision, decoded *policy.Decoded) Admission {
	switch dec.Effect {
	case policy.Allow:
		if chain.RequiresApprovalItem(c.item()) {
			c.admitted = keptDecision(dec) // consume reuses it while the revision stays
			sd := g.sessionApproval()
			sd.Revision = dec.Revision
			return g.hold(ctx, c, chain, sd, g.sessionGrants(sd), decoded)
		}
		return Admission{Allowed: true}
	case policy.Deny:
		return denied(c, dec)
	case policy.Approve:
		c.admitted = keptDecision(dec) // consume reuses it while the revision stays
		return g.hold(ctx, c, chain, dec, g.evalPolicy, decoded)
	default:
		g.log.ErrorContext(ctx, "policy returned an unknown effect; denying", "effect", dec.Effect)
		return refuse("denied: policy returned an unknown effect")
	}
}

// keptDecision returns a copy of dec that a held call keeps (Call.admitted,
// heldCall.dec). Only a call that may be held gets one: taking dec's
// address in decide put every call's decision on the heap (≈ 200 bytes
// per allowed call; issue 13).
func keptDecision(dec policy.Decision) *policy.Decision { return &dec }

func refuse(msg string) Admission { return Admission{Message: msg} }

// denied is the refusal of a call the policy decision dec denies. It says
// "this call to" the tool: a rule with a when or a command condition denies
// some calls of a tool, and "shell__run is not allowed" read to agents
// (newuser49) as if the whole tool were, so they stopped using it.
//
// A call no rule allows or holds is refused by policy.default, which is no
// rule: it is named as the default, and when some rule could not be
// decided for the call (a condition reading `"amount": "50"` as a number)
// the agent is told so, since that is what it can change (newuser50: the
// agent read `denied by policy rule "default"` for a string amount and
// could tell its customer nothing).
func denied(c Call, dec policy.Decision) Admission {
	if dec.Rule == policy.DefaultRule {
		return refuse(fmt.Sprintf("denied by the policy's default (%s): this call to %s is not allowed", defaultNote(dec), c.label()))
	}
	return refuse(fmt.Sprintf("denied by policy rule %q%s: this call to %s is not allowed", dec.Rule, erredNote(dec), c.label()))
}
