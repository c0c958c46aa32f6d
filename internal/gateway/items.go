package gateway

import (
	"context"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The prompts, resources and resource templates of every upstream
// (issue 10), listed from its shared session when it connects and again
// after it says they changed (list_changed), then named for agents by
// buildExposure. Agents' lists and routing read the current exposure
// without a lock.

// exposure returns the current exposure.
func (g *Gateway) exposure() *exposure { return g.exposed.Load() }

// listItems lists the prompts, resources and templates the session c
// offers (each only when the server's capabilities say it has them),
// following pagination.
func (u *upstream) listItems(ctx context.Context, cs *mcp.ClientSession) (serverItems, error) {
	it := serverItems{name: u.name, unprefixed: u.cfg.Unprefixed}
	caps := &mcp.ServerCapabilities{}
	if res := cs.InitializeResult(); res != nil && res.Capabilities != nil {
		caps = res.Capabilities
	}
	if caps.Prompts != nil {
		it.promptsCap = true
		for p, err := range cs.Prompts(withAnswerCheck(ctx, "prompts/list"), nil) {
			if err != nil {
				return serverItems{}, fmt.Errorf("list prompts: %w", err)
			}
			it.prompts = append(it.prompts, p)
		}
	}
	if caps.Resources != nil {
		it.resourcesCap = true
		for r, err := range cs.Resources(withAnswerCheck(ctx, "resources/list"), nil) {
			if err != nil {
				return serverItems{}, fmt.Errorf("list resources: %w", err)
			}
			it.resources = append(it.resources, r)
		}
		for t, err := range cs.ResourceTemplates(withAnswerCheck(ctx, "resources/templates/list"), nil) {
			if err != nil {
				return serverItems{}, fmt.Errorf("list resource templates: %w", err)
			}
			it.templates = append(it.templates, t)
		}
	}
	return it, nil
}

// itemsLoop lists the upstream's prompts and resources whenever a refresh
// is asked for (list_changed, or a new session) and applies them. A new
// shared session also renews the subscriptions made on the old one.
func (u *upstream) itemsLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.itemsCh:
		}
		c, err := u.session()
		if err != nil {
			continue // a new session requests another refresh
		}
		lctx, cancel := context.WithTimeout(ctx, u.connectTimeout())
		u.g.subs.resubscribe(lctx, u, nil, c)
		reported := u.itemsReported.Swap(false) // a session said its prompts or resources changed
		cs := listSession(u.itemsFrom.Swap(nil), c)
		items, err := u.listItems(lctx, cs)
		if err != nil && cs != c.cs && lctx.Err() == nil {
			// The session that reported the change ended: list the shared one.
			items, err = u.listItems(lctx, c.cs)
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				u.log.WarnContext(ctx, "upstream prompts and resources not listed", "err", err)
			}
			continue
		}
		if !u.g.applyItems(items) && reported {
			u.g.upstreamListChanged(false)
		}
	}
}

// applyItems replaces the listed items of the servers in items, rebuilds
// the exposure, reports new name clashes, and notifies agent sessions
// whose prompt or resource lists changed. It reports whether any changed.
func (g *Gateway) applyItems(items ...serverItems) bool {
	if len(items) == 0 {
		return false
	}
	g.itemsMu.Lock()
	defer g.itemsMu.Unlock()
	for _, it := range items {
		g.items[it.name] = it
	}
	all := make([]serverItems, 0, len(g.items))
	for _, it := range g.items {
		all = append(all, it)
	}
	slices.SortFunc(all, func(a, b serverItems) int { return cmpString(a.name, b.name) })
	old := g.exposure()
	x := buildExposure(all, g.log)
	g.exposed.Store(x)
	for _, c := range x.clashes {
		if !slices.Contains(old.clashes, c) {
			g.log.Warn("name clash between upstreams: " + c)
		}
	}
	prompts := fingerprintOf(old.prompts, func(p Prompt) string { return p.Name + "\x00" + p.Digest }) !=
		fingerprintOf(x.prompts, func(p Prompt) string { return p.Name + "\x00" + p.Digest })
	resources := fingerprintOf(old.resources, func(r Resource) string { return r.URI + "\x00" + r.Server }) !=
		fingerprintOf(x.resources, func(r Resource) string { return r.URI + "\x00" + r.Server }) ||
		fingerprintOf(old.templates, func(t Template) string { return t.URITemplate + "\x00" + t.Server }) !=
			fingerprintOf(x.templates, func(t Template) string { return t.URITemplate + "\x00" + t.Server })
	if prompts || resources {
		g.log.Info("prompts and resources updated", "prompts", len(x.prompts), "resources", len(x.resources), "templates", len(x.templates))
		g.itemsChanged(prompts, resources)
	}
	return prompts || resources
}

// ItemDigest returns the digest an approval of a request of kind (an
// approval kind) is bound to: the tool's or prompt's definition digest,
// "" for a resource (its URI is the binding). ok is false when the tool
// or prompt is gone. It satisfies the gate's ItemCatalog.
func (g *Gateway) ItemDigest(kind, server, name string) (string, bool) {
	switch kind {
	case "resource_read":
		return "", true
	case "prompt_get":
		p, ok := g.exposure().promptByReal(server, name)
		return p.Digest, ok
	}
	return g.ToolDigest(server, name)
}
