package gate

import (
	"context"

	"toolgate/internal/approval"
	"toolgate/internal/session"
)

// Usable returns which items principal p may use, for the gateway's lists
// (tools/list, prompts/list, resources/list, resources/templates/list;
// issue 10): an item is usable when p's session, if p is one, covers it
// (nothing once revoked) and, unless the deployment policy sets
// list_denied, the policy does not deny it to p whatever the arguments
// (policy.Evaluator.Listed). kind is an approval kind
// (approval.KindToolCall or "", KindResourceRead, KindPromptGet) and name
// the real tool name, resource URI or prompt name. Items needing approval
// are usable. Errors reading the session are returned; callers fail closed
// (list nothing).
func (g *Gate) Usable(ctx context.Context, p approval.Principal) (func(kind, server, name string) bool, error) {
	var chain session.Chain
	if p.SessionID != "" {
		c, err := g.store.Chain(ctx, session.ID(p.SessionID))
		if err != nil {
			return nil, err
		}
		if c.Revoked() {
			return func(string, string, string) bool { return false }, nil
		}
		chain = c
	}
	l, isLister := g.policy.(lister)
	return func(kind, server, name string) bool {
		c := Call{Principal: p, Kind: kind, Server: server, Tool: name}
		if chain != nil && !chain.AllowsItem(c.item()) {
			return false
		}
		return !isLister || l.Listed(g.policyCall(c, nil))
	}, nil
}
