package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// A SessionPolicy tells which tools, prompts and resources a principal may
// use, for the lists the gateway answers. *gate.Gate implements it. Usable
// returns a filter over (kind, real server, real name), kind being an
// approval kind ("" or approval.KindToolCall, KindResourceRead,
// KindPromptGet): false for what the deployment policy denies to p or p's
// session excludes (everything once revoked). An error makes the gateway
// list nothing (fail closed). It must be safe for concurrent use.
type SessionPolicy interface {
	Usable(ctx context.Context, p approval.Principal) (use func(kind, server, name string) bool, err error)
}

// notifierTool is the exposed name of a tool that is never listed and never
// callable ("toolgate" is a reserved server name, so no upstream tool can
// have it). Adding and removing it makes the SDK send
// notifications/tools/list_changed to every MCP session, of which the
// sending middleware lets through only those whose view changed: the SDK
// has no way to notify one session (notes §5).
const notifierTool = "toolgate__list_changed"

// views remembers, per MCP session, its principal and a fingerprint of
// each list it last saw (tools, prompts, resources, templates), so that a
// list_changed notification reaches only the sessions whose view changed.
type views struct {
	mu    sync.Mutex
	m     map[*mcp.ServerSession]*view // guarded by mu
	limit int                          // guarded by mu; size at which record prunes closed sessions
}

// minPruneLimit is the smallest number of remembered views at which closed
// MCP sessions are forgotten.
const minPruneLimit = 256

type view struct {
	principal approval.Principal
	fps       map[viewKind]string // by list; absent until listed
}

// viewKind names one list an MCP session can see.
type viewKind uint8

const (
	viewTools viewKind = iota
	viewPrompts
	viewResources
	viewTemplates
)

// listChangedViews maps a list_changed notification to the lists it is
// about.
var listChangedViews = map[string][]viewKind{
	"notifications/tools/list_changed":     {viewTools},
	"notifications/prompts/list_changed":   {viewPrompts},
	"notifications/resources/list_changed": {viewResources, viewTemplates},
}

func newViews() *views { return &views{m: map[*mcp.ServerSession]*view{}, limit: minPruneLimit} }

// visibleTools returns the catalog entries p may use, in catalog order:
// not denied by policy, within its session. With no SessionPolicy every
// principal sees every tool.
func (g *Gateway) visibleTools(ctx context.Context, p approval.Principal) ([]Tool, error) {
	all := g.catalog.list()
	if g.opts.Sessions == nil {
		return all, nil
	}
	use, err := g.opts.Sessions.Usable(ctx, p)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(t Tool) bool { return !use(approval.KindToolCall, t.Server, t.Tool) }), nil
}

// fingerprint identifies a tool list: names and definition digests.
func fingerprint(ts []Tool) string {
	return fingerprintOf(ts, func(t Tool) string { return t.Name + "\x00" + t.Digest })
}

// fingerprintOf identifies a list by the keys of its items.
func fingerprintOf[T any](items []T, key func(T) string) string {
	h := sha256.New()
	for _, it := range items {
		h.Write([]byte(key(it) + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// viewFingerprint returns the fingerprint of list k as principal p would
// see it now.
func (g *Gateway) viewFingerprint(ctx context.Context, p approval.Principal, k viewKind) (string, error) {
	if k == viewTools {
		ts, err := g.visibleTools(ctx, p)
		if err != nil {
			return "", err
		}
		return fingerprint(ts), nil
	}
	use := func(string, string, string) bool { return true }
	if g.opts.Sessions != nil {
		var err error
		if use, err = g.opts.Sessions.Usable(ctx, p); err != nil {
			return "", err
		}
	}
	switch k {
	case viewPrompts:
		return fingerprintOf(g.visiblePrompts(use), func(p Prompt) string { return p.Name + "\x00" + p.Digest }), nil
	case viewResources:
		return fingerprintOf(g.visibleResources(use), func(r Resource) string { return r.URI + "\x00" + r.Server }), nil
	}
	return fingerprintOf(g.visibleTemplates(use), func(t Template) string { return t.URITemplate + "\x00" + t.Server }), nil
}

// recordView remembers what list k showed to the MCP session of req.
func (g *Gateway) recordView(req mcp.Request, p approval.Principal, k viewKind, fp string) {
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		if g.views.record(ss, p, k, fp) {
			g.views.prune(g.liveSessions())
		}
	}
}

// principalOf finds the principal of a request the downstream server
// received: from the POST that carries it (HTTP) or the stdio session's
// context.
func (g *Gateway) principalOf(ctx context.Context, req mcp.Request) (approval.Principal, bool) {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		post := g.carriers.get(ex.Header.Get(carrierHeader))
		if post == nil {
			return approval.Principal{}, false
		}
		return post.principal, true
	}
	p, ok := ctx.Value(principalKey{}).(approval.Principal)
	return p, ok
}

// listTools answers tools/list: the SDK's list, without the notifier tool
// and, for an agent session, without the tools outside its policy. It
// records the session's view so later notifications can tell whether it
// changed.
func (g *Gateway) listTools(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	res, err := next(ctx, method, req)
	if err != nil {
		return res, err
	}
	lr, ok := res.(*mcp.ListToolsResult)
	if !ok {
		return res, nil
	}
	p, ok := g.principalOf(ctx, req)
	if !ok {
		lr.Tools = nil
		return lr, nil
	}
	visible, err := g.visibleTools(ctx, p)
	if err != nil {
		g.log.ErrorContext(ctx, "cannot read the session policy; listing no tools", "principal", p.ID, "err", err)
		visible = nil
	}
	names := make(map[string]bool, len(visible))
	for _, t := range visible {
		names[t.Name] = true
	}
	names[PolicyToolName] = err == nil && g.policyToolOn(p)
	lr.Tools = slices.DeleteFunc(slices.Clone(lr.Tools), func(t *mcp.Tool) bool { return !names[t.Name] })
	if err == nil {
		g.recordView(req, p, viewTools, fingerprint(visible))
	}
	return lr, nil
}

// record sets list k of the view of ss and reports whether so many views
// are remembered that closed sessions should be pruned.
func (v *views) record(ss *mcp.ServerSession, p approval.Principal, k viewKind, fp string) (prune bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w := v.m[ss]
	if w == nil || w.principal.ID != p.ID {
		w = &view{principal: p, fps: map[viewKind]string{}}
		v.m[ss] = w
	}
	w.fps[k] = fp
	return len(v.m) > v.limit
}

// liveSessions returns a membership test for the MCP sessions the
// downstream server has open now.
func (g *Gateway) liveSessions() func(*mcp.ServerSession) bool {
	live := g.liveSessionSet()
	return func(ss *mcp.ServerSession) bool { return live[ss] }
}

// get returns the principal of ss's view and the fingerprint of its list
// k ("" when that list was never shown), if ss has a view.
func (v *views) get(ss *mcp.ServerSession, k viewKind) (approval.Principal, string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.m[ss]
	if !ok {
		return approval.Principal{}, "", false
	}
	return w.principal, w.fps[k], true
}

// prune forgets sessions that are no longer live.
func (v *views) prune(live func(*mcp.ServerSession) bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for ss := range v.m {
		if !live(ss) {
			delete(v.m, ss)
		}
	}
	v.limit = max(minPruneLimit, 2*len(v.m))
}

// sendingMiddleware lets a list_changed notification through to an MCP
// session only when a list it is about changed for that session since it
// last listed it (or when that is unknown), and lets a resources/updated
// the gateway broadcast reach only the sessions it names.
func (g *Gateway) sendingMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/resources/updated" {
			return g.filterUpdated(ctx, method, req, next)
		}
		kinds, ok := listChangedViews[method]
		if !ok {
			return next(ctx, method, req)
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok {
			return next(ctx, method, req)
		}
		changed := false
		for _, k := range kinds {
			p, old, known := g.views.get(ss, k)
			if !known || old == "" {
				changed = true
				continue
			}
			fp, err := g.viewFingerprint(ctx, p, k)
			if err != nil || fp != old {
				changed = true // unknown: tell the client to re-list
				if err == nil {
					g.views.record(ss, p, k, fp)
				}
			}
		}
		if !changed {
			return nil, nil // this session's lists did not change
		}
		return next(ctx, method, req)
	}
}

// SessionsChanged tells the gateway that the tool policy of some agent
// sessions changed (for example one was revoked). Every MCP session of this
// process whose visible tools changed since it last listed them gets
// notifications/tools/list_changed; the others get nothing. Sessions served
// by other gateway instances are not notified: they see the change on their
// next tools/list, and the gate enforces it on every call.
func (g *Gateway) SessionsChanged() {
	g.toolsMu.Lock()
	defer g.toolsMu.Unlock()
	g.views.prune(g.liveSessions())
	g.toolsChanged()
	g.itemsChanged(true, true)
}

// toolsChanged makes the SDK send notifications/tools/list_changed to every
// MCP session; the sending middleware delivers it only where the tool list
// changed or is not known (a 2026-07-28 subscriptions/listen stream). The
// caller holds toolsMu.
func (g *Gateway) toolsChanged() {
	g.server.AddTool(&mcp.Tool{Name: notifierTool, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return errorResult("unknown tool " + notifierTool), nil
		})
	g.server.RemoveTools(notifierTool)
}

// upstreamListChanged passes on an upstream's list_changed whose listing
// changed nothing in the catalog (it re-added a tool as it was, say): the
// SDK tells every session, and the sending middleware lets it through only
// to those whose view of the list is not known to be current.
func (g *Gateway) upstreamListChanged(tools bool) {
	if tools {
		g.toolsMu.Lock()
		g.toolsChanged()
		g.toolsMu.Unlock()
		return
	}
	g.itemsChanged(true, true)
}

// notifierURI is the URI of a resource that is never listed nor readable;
// adding and removing it makes the SDK send resources/list_changed (see
// notifierTool). notifierTool doubles as the name of such a prompt.
const notifierURI = "toolgate://list-changed"

// itemsChanged makes the SDK send prompts/list_changed and/or
// resources/list_changed to every MCP session; the sending middleware
// delivers them only where the lists changed.
func (g *Gateway) itemsChanged(prompts, resources bool) {
	if prompts {
		g.server.AddPrompt(&mcp.Prompt{Name: notifierTool}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return nil, errInvalidParams("unknown prompt: " + notifierTool)
		})
		g.server.RemovePrompts(notifierTool)
	}
	if resources {
		g.server.AddResource(&mcp.Resource{URI: notifierURI, Name: "list-changed"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return nil, mcp.ResourceNotFoundError(notifierURI)
		})
		g.server.RemoveResources(notifierURI)
	}
}
