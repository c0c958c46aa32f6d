package config

import (
	"encoding/json"

	"toolgate/internal/policy"
)

// PolicyPrincipal returns the configured agent id as policy rules see it
// (groups, tenant, on_behalf_of). ok is false when no agent has that id;
// the principal is then the bare id.
func (c Config) PolicyPrincipal(id string) (p policy.Principal, ok bool) {
	for _, a := range c.Agents {
		if a.ID == id {
			return policy.Principal{ID: a.ID, Groups: a.Groups, Tenant: a.Tenant, OnBehalfOf: a.OnBehalfOf}, true
		}
	}
	return policy.Principal{ID: id}, false
}

// TrustsAnnotations reports whether servers.<server>.trust_annotations is
// set: only then do policy rules see the annotations of its tools.
func (c Config) TrustsAnnotations(server string) bool {
	s, ok := c.Servers[server]
	return ok && s.TrustAnnotations
}

// PolicyCall is the policy.Call of a call described by hand (policy
// explain and policy test): the principal from the configured agents, and
// the annotations only when server is trusted.
func (c Config) PolicyCall(server, tool string, args json.RawMessage, principal string, ann *policy.Annotations) policy.Call {
	p, _ := c.PolicyPrincipal(principal)
	pc := policy.Call{Server: server, Tool: tool, Principal: p, Arguments: args}
	if c.TrustsAnnotations(server) {
		pc.Annotations = ann
	}
	return pc
}
