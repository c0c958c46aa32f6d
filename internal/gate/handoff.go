package gate

import (
	"bytes"
	"context"
	"encoding/json"

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
}

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
// may require approval), Resume, Task, Defer, KeepAlive, OnHold or Prior
// set. Then nothing about the call is recorded, counted or traced: the
// caller must admit it through Admit or AdmitTo with Call.Prior set to the
// HandOff, which does all of that once.
func (g *Gate) AdmitUnlessHeld(ctx context.Context, c *Call, adm *Admission) *HandOff {
	if c.Principal.SessionID != "" || c.Resume != "" || c.Task || c.Defer || c.KeepAlive != nil || c.OnHold != nil || c.Prior != nil {
		return &HandOff{}
	}
	start := g.now()
	dec, err := g.evalPolicy(g.policyCall(*c, c.Arguments))
	if err == nil && dec.Effect == policy.Approve {
		return &HandOff{dec: &dec, principal: c.Principal.ID, kind: c.Kind, server: c.Server, tool: c.Tool, args: c.Arguments}
	}
	if _, off := g.opts.Tracer.(noop.Tracer); off {
		// No span to start, keep in the context or end: the no-op
		// tracer's Start would only store its span in a new context
		// (issue 13, an allowed call's allocations). Its spans record
		// nothing, so decide sees no difference.
		*adm = g.decide(ctx, *c, nil, dec, err)
		return nil
	}
	ctx, span := g.startAdmit(ctx, c, start)
	*adm = g.decide(ctx, *c, nil, dec, err)
	g.endAdmit(span, adm)
	return nil
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
