package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"toolgate/internal/policy"
)

// A HandOff is a call [Gate.AdmitUnlessHeld] left undecided: holding it
// (or reading its session's policy first) is the job of a caller that can
// wait, which gets the HandOff as [Call.Prior]. It carries the policy
// decision already taken for the call, if one was, so that the call is
// evaluated, counted and recorded once. Only the gate makes one; its zero
// value carries nothing.
type HandOff struct {
	dec *policy.Decision // nil: nothing was evaluated
	// What dec was taken for; a Prior of another call is ignored.
	principal, kind, server, tool string
	args                          json.RawMessage
	// session: handed back only to read the call's agent session's
	// policy (AdmitSessionUnlessHeld decides it then, unless it holds).
	session bool
}

// SessionRead reports whether h was handed back only because the call is
// an agent session's, whose policy is read from the store first: the
// caller may then decide it with [Gate.AdmitSessionUnlessHeld] before it
// takes anything a held call's admission needs.
func (h *HandOff) SessionRead() bool { return h != nil && h.session }

// AdmitUnlessHeld is [Gate.AdmitTo] for a caller that answers allowed and
// denied calls at once and holds the others only after more set-up: the
// gateway's lean HTTP path for plain tools/call requests, which then holds
// the call through AdmitTo with the HandOff as Call.Prior, after its own
// larger frames have returned (docs/architecture.md). It decides *c and
// writes the answer to *adm exactly as AdmitTo does (one policy
// evaluation, the tool-call metric, the audit record, the span) when the
// policy allows or denies it, or when the evaluation fails (a refusal).
//
// It returns a non-nil HandOff instead, and leaves *adm alone, when the
// policy asks for an approval (the call would be held), or when c is not a
// plain call: a session principal (its session's policy is read first and
// may require approval: [HandOff.SessionRead]), Resume, Task, Defer or
// Prior set. Then nothing about the call is recorded, counted or traced:
// the caller must admit it through Admit or AdmitTo with Call.Prior set to
// the HandOff, which does all of that once. KeepAlive and OnHold matter
// only to a held call: a call that has them and that the policy allows or
// denies is decided here as any other.
func (g *Gate) AdmitUnlessHeld(ctx context.Context, c *Call, adm *Admission) *HandOff {
	if c.Resume != "" || c.Task || c.Defer || c.Prior != nil {
		return &HandOff{}
	}
	if c.Principal.SessionID != "" {
		return &HandOff{session: true}
	}
	start := g.now()
	dec, err := g.evalPolicy(g.policyCall(*c, c.Arguments))
	if err == nil && dec.Effect == policy.Approve {
		return g.handOff(c, dec)
	}
	g.decideTraced(ctx, c, adm, start, func(ctx context.Context) Admission { return g.decide(ctx, *c, nil, dec, err) })
	return nil
}

// AdmitSessionUnlessHeld is AdmitUnlessHeld for an agent session's call,
// one AdmitUnlessHeld handed back for its session alone
// ([HandOff.SessionRead]): it reads the session's policy (one read of the
// store, Store.Chain; it waits while the store does) and decides *c as
// admission would, recording, counting and tracing it once: refused when
// the session is unknown, revoked or excludes the call, or when the store
// cannot be read (fail closed); denied or allowed as the policy says,
// unless the call would be held (the policy asks for an approval, or the
// session requires one for what the policy allows). Then it returns a
// HandOff carrying the policy decision, for Call.Prior as above; the
// admission reads the session's policy again (held, the call is checked
// against its session then, and again at dispatch). Any other call is
// handed back as it is, undecided.
func (g *Gate) AdmitSessionUnlessHeld(ctx context.Context, c *Call, adm *Admission) *HandOff {
	if c.Principal.SessionID == "" || c.Resume != "" || c.Task || c.Defer || c.Prior != nil {
		return &HandOff{}
	}
	start := g.now()
	chain, refusal, ok := g.sessionChain(ctx, *c)
	if !ok {
		g.decideTraced(ctx, c, adm, start, func(ctx context.Context) Admission {
			g.record(ctx, *c, nil, refusal)
			return refusal
		})
		return nil
	}
	dec, err := g.evalPolicy(g.policyCall(*c, c.Arguments))
	if err == nil && (dec.Effect == policy.Approve || dec.Effect == policy.Allow && chain.RequiresApprovalItem(c.item())) {
		return g.handOff(c, dec)
	}
	g.decideTraced(ctx, c, adm, start, func(ctx context.Context) Admission { return g.decide(ctx, *c, chain, dec, err) })
	return nil
}

// handOff is the HandOff of c, which the policy decision dec would hold.
//
//go:noinline // dec moves to the heap here, on a held call's path only, not in its callers for every call
func (g *Gate) handOff(c *Call, dec policy.Decision) *HandOff {
	return &HandOff{dec: &dec, principal: c.Principal.ID, kind: c.Kind, server: c.Server, tool: c.Tool, args: c.Arguments}
}

// decideTraced sets *adm to decide's answer for c, under the admission's
// span started at start (none with the no-op tracer).
func (g *Gate) decideTraced(ctx context.Context, c *Call, adm *Admission, start time.Time, decide func(context.Context) Admission) {
	if _, off := g.opts.Tracer.(noop.Tracer); off {
		// No span to start, keep in the context or end: the no-op
		// tracer's Start would only store its span in a new context
		// (issue 13, an allowed call's allocations). Its spans record
		// nothing, so decide sees no difference.
		*adm = decide(ctx)
		return
	}
	ctx, span := g.startAdmit(ctx, c, start)
	*adm = decide(ctx)
	g.endAdmit(span, adm)
}

// evaluate is the policy decision for c: the one its Prior carries while
// that was taken for c under the revision in force, else a fresh one.
func (g *Gate) evaluate(c Call) (policy.Decision, error) {
	if h := c.Prior; h != nil && h.dec != nil && h.dec.Revision != "" && h.takenFor(c) {
		if r, ok := g.policy.(revisioned); ok && r.Revision() == h.dec.Revision {
			d := *h.dec
			h.dec.Decoded = nil // now the admission's (decide), not the hand-off's
			return d, nil
		}
	}
	return g.evalPolicy(g.policyCall(c, c.Arguments))
}

// for_ reports whether h was taken for c.
func (h *HandOff) takenFor(c Call) bool {
	return h.principal == c.Principal.ID && h.kind == c.Kind && h.server == c.Server && h.tool == c.Tool && bytes.Equal(h.args, c.Arguments)
}
