package gate

import (
	"context"
	"encoding/json"
	"slices"

	"toolgate/internal/policy"
)

// policyCall is what the deployment policy sees of c, with args as the
// argument bytes.
func (g *Gate) policyCall(c Call, args json.RawMessage) policy.Call {
	p := c.Principal
	pc := policy.Call{
		Server:    c.Server,
		Principal: policy.Principal{ID: p.ID, Groups: p.Groups, Tenant: p.Tenant, OnBehalfOf: p.OnBehalfOf},
		Session:   p.SessionID,
		Arguments: args,
	}
	c.setPolicyName(&pc)
	if g.opts.Annotations != nil && pc.Kind == policy.KindTool {
		pc.Annotations = g.opts.Annotations(c.Server, c.Tool)
	}
	return pc
}

// noteDecision logs and counts what a decision says besides its effect:
// rules whose selectors erred (by name only: the errors may quote argument
// values) and a monitor-mode verdict.
func (g *Gate) noteDecision(ctx context.Context, c Call, dec policy.Decision) {
	if len(dec.Errors) > 0 {
		rules := make([]string, len(dec.Errors))
		for i, e := range dec.Errors {
			rules[i] = e.Rule
		}
		g.log.DebugContext(ctx, "policy selectors could not be evaluated; they never allow", "server", c.Server, "tool", c.Tool, "rules", rules)
	}
	if v := dec.Monitor.Verdict; v != "" {
		g.metrics.PolicyMonitored(c.Server, v)
		g.log.InfoContext(ctx, "policy monitor mode: the call proceeds", "verdict", v, "rule", dec.Monitor.Rule,
			"server", c.Server, "tool", c.Tool, "principal", c.Principal.ID, "effect", dec.Effect)
	}
}

// erredNote says, for a refusal, that the deciding rule's selector erred.
func erredNote(dec policy.Decision) string {
	if slices.ContainsFunc(dec.Errors, func(e policy.RuleError) bool { return e.Rule == dec.Rule }) {
		return " (its condition could not be evaluated for these arguments, which never allows)"
	}
	if dec.Unseen {
		return " (the command does not parse as shell, or runs code the policy cannot read, such as a shell, eval, an interpreter's inline code or a file written for a program to run later; such a command matches every deny rule on commands)"
	}
	return ""
}

// defaultNote says why policy.default decided dec: no rule allows or holds
// the call, and, when a rule's selector erred on it, that this never
// allows. It never quotes the error, which may quote argument values.
func defaultNote(dec policy.Decision) string {
	if len(dec.Errors) > 0 {
		return "no rule allows or holds this call; a rule's condition could not be evaluated for these arguments (such as a value of another type than it expects), which never allows"
	}
	return "no rule allows or holds this call"
}

// consumeDecision is the policy decision checked when an approved call is
// consumed: the admission's, while the policy revision in force is the one
// it was decided under; else a fresh evaluation of the bytes about to be
// sent.
func (g *Gate) consumeDecision(c Call, out json.RawMessage) (policy.Decision, error) {
	if d := c.admitted; d != nil && d.Revision != "" {
		if r, ok := g.policy.(revisioned); ok && r.Revision() == d.Revision {
			return *d, nil
		}
	}
	return g.evalPolicy(g.policyCall(c, out))
}
