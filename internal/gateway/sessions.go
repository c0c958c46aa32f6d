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

// A SessionPolicy tells which tools a principal may see. *gate.Gate
// implements it. VisibleTools returns a filter over real (server, tool)
// pairs: for an agent session only the session's effective tools (nothing
// once revoked), and for everyone not the tools the deployment policy
// denies them whatever the arguments (unless policy.list_denied). An error
// makes the gateway show no tools (fail closed). It must be safe for
// concurrent use.
type SessionPolicy interface {
	VisibleTools(ctx context.Context, p approval.Principal) (allow func(server, tool string) bool, err error)
}

// notifierTool is the exposed name of a tool that is never listed and never
// callable ("toolgate" is a reserved server name, so no upstream tool can
// have it). Adding and removing it makes the SDK send
// notifications/tools/list_changed to every MCP session, of which the
// sending middleware lets through only those whose view changed: the SDK
// has no way to notify one session (notes §5).
const notifierTool = "toolgate__list_changed"

// views remembers, per MCP session, its principal and a fingerprint of the
// tool list it last saw, so that a list_changed notification reaches only
// the sessions whose view changed.
type views struct {
	mu    sync.Mutex
	m     map[*mcp.ServerSession]*view // guarded by mu
	limit int                          // guarded by mu; size at which record prunes closed sessions
}

// minPruneLimit is the smallest number of remembered views at which closed
// MCP sessions are forgotten.
const minPruneLimit = 256

type view struct {
	principal   approval.Principal
	fingerprint string // "" until known
}

func newViews() *views { return &views{m: map[*mcp.ServerSession]*view{}, limit: minPruneLimit} }

// visibleTools returns the catalog entries p may see, in catalog order.
// With no SessionPolicy every principal sees every tool.
func (g *Gateway) visibleTools(ctx context.Context, p approval.Principal) ([]Tool, error) {
	all := g.catalog.list()
	if g.opts.Sessions == nil {
		return all, nil
	}
	allow, err := g.opts.Sessions.VisibleTools(ctx, p)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(t Tool) bool { return !allow(t.Server, t.Tool) }), nil
}

// fingerprint identifies a tool list: names and definition digests.
func fingerprint(ts []Tool) string {
	h := sha256.New()
	for _, t := range ts {
		h.Write([]byte(t.Name + "\x00" + t.Digest + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
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
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && err == nil {
		if g.views.record(ss, p, fingerprint(visible)) {
			g.views.prune(g.liveSessions())
		}
	}
	return lr, nil
}

// record sets the view of ss and reports whether so many views are
// remembered that closed sessions should be pruned.
func (v *views) record(ss *mcp.ServerSession, p approval.Principal, fp string) (prune bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.m[ss] = &view{principal: p, fingerprint: fp}
	return len(v.m) > v.limit
}

// liveSessions returns a membership test for the MCP sessions the
// downstream server has open now.
func (g *Gateway) liveSessions() func(*mcp.ServerSession) bool {
	live := map[*mcp.ServerSession]bool{}
	for ss := range g.server.Sessions() {
		live[ss] = true
	}
	return func(ss *mcp.ServerSession) bool { return live[ss] }
}

// get returns the view of ss, if any.
func (v *views) get(ss *mcp.ServerSession) (view, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.m[ss]
	if !ok {
		return view{}, false
	}
	return *w, true
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

// sendingMiddleware lets notifications/tools/list_changed through to an MCP
// session only when the tools it may see changed since it last listed them
// (or when that is unknown).
func (g *Gateway) sendingMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "notifications/tools/list_changed" {
			return next(ctx, method, req)
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok {
			return next(ctx, method, req)
		}
		w, ok := g.views.get(ss)
		if !ok {
			return next(ctx, method, req)
		}
		visible, err := g.visibleTools(ctx, w.principal)
		if err != nil {
			return next(ctx, method, req) // unknown: tell the client to re-list
		}
		fp := fingerprint(visible)
		if fp == w.fingerprint {
			return nil, nil // this session's view did not change
		}
		g.views.record(ss, w.principal, fp)
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
	g.server.AddTool(&mcp.Tool{Name: notifierTool, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return errorResult("unknown tool " + notifierTool), nil
		})
	g.server.RemoveTools(notifierTool)
}
