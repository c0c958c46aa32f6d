package main

import (
	"context"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/policy"
)

// annotations returns the gate's Options.Annotations: the annotations the
// live catalog lists for a tool of a server marked trust_annotations (MCP
// defaults for the hints a tool leaves out), nil for every other server.
func (c *lazyCatalog) annotations(cfg config.Config) func(server, tool string) *policy.Annotations {
	// The trusted servers are read once: cfg is this closure's own copy,
	// and a method call on it per tools/call copied the whole Config
	// (728 bytes; branch httpcpu46's profile).
	trusted := make(map[string]bool)
	for name := range cfg.Servers {
		if cfg.TrustsAnnotations(name) {
			trusted[name] = true
		}
	}
	return func(server, tool string) *policy.Annotations {
		if !trusted[server] || c.gw == nil {
			return nil
		}
		h, ok := c.gw.ToolAnnotations(server, tool)
		if !ok {
			return nil
		}
		var a policy.Annotations
		if h == nil {
			a = policy.AnnotationsFromHints(nil, nil, nil, nil)
		} else {
			ro, idem := h.ReadOnlyHint, h.IdempotentHint
			a = policy.AnnotationsFromHints(&ro, h.DestructiveHint, &idem, h.OpenWorldHint)
		}
		return &a
	}
}

// liveExplainer serves POST /v1/policy/explain: the policy in force, the
// principal's groups from the config, the tool's annotations from the live
// catalog unless the request gives them (both only for trusted servers).
// For a caller with a tenant, an agent of another tenant is explained as an
// unknown id (no groups, tenant or on_behalf_of), as api.ExplainBody says.
type liveExplainer struct {
	holder *policy.Holder
	cfg    config.Config
	ann    func(server, tool string) *policy.Annotations
	// quorum adds the gate's quorum check to an explanation
	// (gate.Gate.ExplainQuorum); nil adds none.
	quorum func(x *policy.Explanation, p approval.Principal)
}

func (x *liveExplainer) Explain(_ context.Context, b api.ExplainBody) (policy.Explanation, error) {
	ann := b.Annotations
	if ann == nil {
		ann = x.ann(b.Server, b.Tool)
	}
	call := x.cfg.PolicyCall(b.Server, b.Tool, b.Arguments, b.Principal, ann)
	if b.Tenant != "" && call.Principal.Tenant != b.Tenant {
		call.Principal = policy.Principal{ID: b.Principal}
	}
	ex, err := x.holder.Explain(call)
	if err == nil && x.quorum != nil {
		x.quorum(&ex, approval.Principal{ID: call.Principal.ID, Tenant: call.Principal.Tenant, OnBehalfOf: call.Principal.OnBehalfOf})
	}
	return ex, err
}
