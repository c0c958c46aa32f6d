package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// Resources (issue 10): resources/list and resources/templates/list
// answer from the exposure (every server's lists, named as exposure.go
// says), paginated and filtered to what the caller may use;
// resources/read and resources/subscribe route the URI to its server and
// pass the gate like a tools/call (kind resource_read, bound to the real
// URI); resources/updated reaches only the agent sessions that subscribed.

// listResources answers resources/list.
func (g *Gateway) listResources(ctx context.Context, req mcp.Request) (mcp.Result, error) {
	lr, _ := req.(*mcp.ListResourcesRequest)
	var cursor string
	if lr != nil && lr.Params != nil {
		cursor = lr.Params.Cursor
	}
	p, use := g.usable(ctx, req)
	visible := g.visibleResources(use)
	items, next, err := page(visible, func(r Resource) string { return r.URI }, cursor, g.opts.ListPageSize)
	if err != nil {
		return nil, err
	}
	out := &mcp.ListResourcesResult{Resources: make([]*mcp.Resource, 0, len(items)), NextCursor: next, Cacheable: privateCache}
	for _, r := range items {
		def := *r.Definition
		def.URI = r.URI
		out.Resources = append(out.Resources, &def)
	}
	g.recordView(req, p, viewResources, fingerprintOf(visible, func(r Resource) string { return r.URI + "\x00" + r.Server }))
	return out, nil
}

func (g *Gateway) visibleResources(use func(kind, server, name string) bool) []Resource {
	var out []Resource
	for _, r := range g.exposure().resources {
		if use(approval.KindResourceRead, r.Server, r.Real) {
			out = append(out, r)
		}
	}
	return out
}

// listTemplates answers resources/templates/list. A template is listed
// when the caller may use the template string itself as a resource name
// (a deny rule whose glob matches it hides it); reads of its URIs are
// gated one by one.
func (g *Gateway) listTemplates(ctx context.Context, req mcp.Request) (mcp.Result, error) {
	lr, _ := req.(*mcp.ListResourceTemplatesRequest)
	var cursor string
	if lr != nil && lr.Params != nil {
		cursor = lr.Params.Cursor
	}
	p, use := g.usable(ctx, req)
	visible := g.visibleTemplates(use)
	items, next, err := page(visible, func(t Template) string { return t.URITemplate }, cursor, g.opts.ListPageSize)
	if err != nil {
		return nil, err
	}
	out := &mcp.ListResourceTemplatesResult{ResourceTemplates: make([]*mcp.ResourceTemplate, 0, len(items)), NextCursor: next, Cacheable: privateCache}
	for _, t := range items {
		def := *t.Definition
		def.URITemplate = t.URITemplate
		out.ResourceTemplates = append(out.ResourceTemplates, &def)
	}
	g.recordView(req, p, viewTemplates, fingerprintOf(visible, func(t Template) string { return t.URITemplate + "\x00" + t.Server }))
	return out, nil
}

func (g *Gateway) visibleTemplates(use func(kind, server, name string) bool) []Template {
	var out []Template
	for _, t := range g.exposure().templates {
		if use(approval.KindResourceRead, t.Server, t.Real) {
			out = append(out, t)
		}
	}
	return out
}

// resolveURI routes an exposed URI to its upstream: unknown URIs get the
// MCP resource-not-found error (invalid params with the URI, SEP-2164),
// ambiguous ones invalid params naming the namespaced form.
func (g *Gateway) resolveURI(uri string) (*upstream, string, error) {
	server, real, ok, err := g.exposure().route(uri, func(s string) bool { return g.ups[s] != nil })
	var amb *errAmbiguousURI
	switch {
	case errors.As(err, &amb):
		return nil, "", errInvalidParams(amb.Error())
	case err != nil:
		return nil, "", err
	case !ok || g.ups[server] == nil:
		return nil, "", mcp.ResourceNotFoundError(uri)
	}
	return g.ups[server], real, nil
}

// readResource answers resources/read: route, gate, read upstream. A
// panic after the admission fails closed (recoverAnswer).
func (g *Gateway) readResource(ctx context.Context, req mcp.Request) (result mcp.Result, rerr error) {
	rr, ok := req.(*mcp.ReadResourceRequest)
	if !ok || rr.Params == nil || rr.Params.URI == "" {
		return nil, errInvalidParams("resources/read needs params.uri")
	}
	ctx, p, release, err := g.bindRequest(ctx, req)
	if err != nil {
		return nil, &jsonrpc.Error{Code: CodeRefused, Message: err.Error()}
	}
	defer release()
	exposed := rr.Params.URI
	u, real, err := g.resolveURI(exposed)
	if err != nil {
		return nil, err
	}
	args, err := json.Marshal(map[string]string{"uri": real})
	if err != nil {
		return nil, err
	}
	call := gate.Call{Principal: p, Kind: approval.KindResourceRead, Server: u.name, Tool: real, Arguments: args}
	prog := newRequestProgress(ctx, req, g.log)
	if prog != nil {
		call.KeepAlive = prog.keepAlive
	} else {
		call.MaxHold = g.opts.MaxHold
	}
	adm := *g.admitCounted(ctx, req, &call)
	if !adm.Allowed {
		return nil, refusalError(adm)
	}
	defer g.recoverAnswer(ctx, u.name, real, &adm, &result, &rerr)
	defer g.relayProgress(prog)()
	var res *mcp.ReadResourceResult
	o := g.newOrigin(ctx, rr.Session, p, u.name)
	var upErr error // the upstream request's error, toolgate's verdict marked (requestOutcome)
	err = g.forward(ctx, u, o, func(ctx context.Context, c *upConn, _ *agentConn) error {
		var err error
		cctx, meta := u.sendRelayProgress(withAnswerCheck(ctx, "resources/read"), c, prog, upstreamMeta(rr.Params.Meta))
		res, err = c.cs.ReadResource(cctx, &mcp.ReadResourceParams{URI: real, Meta: meta})
		upErr = sdkVerdict(c, slotFrom(cctx), err)
		return err
	})
	g.finishRequest(ctx, &adm, err, upErr)
	if err != nil {
		return nil, err
	}
	if exposed != real {
		for _, c := range res.Contents {
			if c != nil && c.URI == real {
				c.URI = exposed
			}
		}
	}
	delete(res.Meta, mcp.MetaKeyServerInfo)
	// The read was gated for this principal: no shared cache may keep it,
	// and the next read goes through the gate again (SEP-2549), whatever
	// the upstream's hint said.
	res.Cacheable = privateCache
	if answersModern(ctx, req) {
		return markComplete(res), nil
	}
	return res, nil
}

// finishRequest records the dispatch outcome of an admitted
// resources/read or prompts/get that forward answered with err, as the
// tools/call path records a call's (polish19): upErr is the upstream
// request's own error (sdkVerdict: toolgate's verdict, when one was
// marked), nil when forward failed before or around it.
func (g *Gateway) finishRequest(ctx context.Context, adm *gate.Admission, err, upErr error) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	adm.FinishOnce(fctx, requestOutcome(err, upErr), gate.Recorded{})
}

// requestOutcome is the outcome of a request other than tools/call that
// forward answered with err, the upstream request having failed with
// upErr: ok without err; toolgate's own verdict as callError records it
// (a result over the size limit: the upstream ran it, tool_error; a
// malformed answer or one never sent: transport_error); any other
// JSON-RPC error is the upstream's answer (tool_error, whatever its code
// or data); anything else (no session, a failed connection, a
// cancellation) transport_error.
func requestOutcome(err, upErr error) approval.Outcome {
	var wire *jsonrpc.Error
	switch v := verdictOf(upErr); {
	case err == nil:
		return approval.OutcomeOK
	case v != nil && v.kind == verdictTooLarge:
		return approval.OutcomeToolError
	case v != nil:
		return approval.OutcomeTransportError
	case upErr != nil && errors.As(upErr, &wire):
		return approval.OutcomeToolError
	}
	return approval.OutcomeTransportError
}

// subscribe is the downstream server's SubscribeHandler: the URI is
// routed and checked like a read (a deny refuses it; a resource that
// needs approval may be watched, its reads are held), and the upstream
// session that serves the agent subscribes once for all its subscribers.
// The SDK then records the agent session's subscription to the exposed
// URI, which resources/updated notifications follow.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	if req.Params == nil {
		return errInvalidParams("resources/subscribe needs params.uri")
	}
	p, use := g.usable(ctx, req)
	u, real, err := g.resolveURI(req.Params.URI)
	if err != nil {
		return err
	}
	if !use(approval.KindResourceRead, u.name, real) {
		return &jsonrpc.Error{Code: CodeRefused, Message: fmt.Sprintf("denied: resource %s (server %s) is not allowed for %s", real, u.name, p.ID)}
	}
	if err := g.watch(req.Session); err != nil {
		msg := "the gateway is shutting down"
		if errors.Is(err, errSessionReleasing) {
			msg = errSessionReleasing.Error()
		}
		return &jsonrpc.Error{Code: CodeUpstreamUnavailable, Message: msg}
	}
	o := g.newOrigin(ctx, req.Session, p, u.name)
	return g.forward(ctx, u, o, func(ctx context.Context, c *upConn, ac *agentConn) error {
		k := subKey{server: u.name, owner: ac, uri: real}
		if !g.subs.add(k, req.Session, req.Params.URI, c) {
			return nil
		}
		if err := c.cs.Subscribe(withAnswerCheck(ctx, "resources/subscribe"), &mcp.SubscribeParams{URI: real}); err != nil {
			g.subs.remove(k, req.Session)
			return err
		}
		return nil
	})
}

// unsubscribe is the downstream server's UnsubscribeHandler; the upstream
// subscription ends with its last subscriber.
func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	if req.Params == nil {
		return errInvalidParams("resources/unsubscribe needs params.uri")
	}
	p, _ := g.principalOf(ctx, req)
	u, real, err := g.resolveURI(req.Params.URI)
	if err != nil {
		return err
	}
	o := g.newOrigin(ctx, req.Session, p, u.name)
	return g.forward(ctx, u, o, func(ctx context.Context, c *upConn, ac *agentConn) error {
		if !g.subs.remove(subKey{server: u.name, owner: ac, uri: real}, req.Session) {
			return nil
		}
		return c.cs.Unsubscribe(withAnswerCheck(ctx, "resources/unsubscribe"), &mcp.UnsubscribeParams{URI: real})
	})
}

// resourceUpdated handles an upstream's notifications/resources/updated on
// session cs: it is delivered, under the URI each used, to the agent
// sessions subscribed to it through cs only. It does not block the
// upstream's notification handler.
func (u *upstream) resourceUpdated(cs *mcp.ClientSession, p *mcp.ResourceUpdatedNotificationParams) {
	if p == nil {
		return
	}
	owner := u.agentConnOf(cs)
	byURI := u.g.subs.subscribers(subKey{server: u.name, owner: owner, uri: p.URI})
	if len(byURI) == 0 {
		u.log.Debug("resources/updated for a URI nobody subscribed to through toolgate; dropped")
		return
	}
	u.notify.push(func() {
		for exposed, sessions := range byURI {
			tok := u.g.deliveries.put(sessions)
			meta := mcp.Meta{deliverMetaKey: tok}
			_ = u.g.server.ResourceUpdated(u.g.root, &mcp.ResourceUpdatedNotificationParams{URI: exposed, Meta: meta})
			u.g.deliveries.delete(tok)
		}
	}, len(p.URI))
}

// deliverMetaKey marks a notification the gateway broadcasts through the
// SDK with the token of the agent sessions that may receive it; the
// sending middleware drops it for every other session and removes the key.
const deliverMetaKey = "toolgate/deliver"

// deliveries maps delivery tokens to the agent sessions allowed to
// receive a notification. Safe for concurrent use.
type deliveries struct{ m sync.Map } // string → map[*mcp.ServerSession]bool

func (d *deliveries) put(to map[*mcp.ServerSession]bool) string {
	tok := rand.Text()
	d.m.Store(tok, to)
	return tok
}

func (d *deliveries) delete(tok string) { d.m.Delete(tok) }

func (d *deliveries) allowed(tok string, ss *mcp.ServerSession) bool {
	v, ok := d.m.Load(tok)
	return ok && v.(map[*mcp.ServerSession]bool)[ss]
}

// filterUpdated is the sending middleware's part for resources/updated:
// only the sessions the delivery names get it, without the key.
func (g *Gateway) filterUpdated(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	ureq, ok := req.(*mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams])
	if !ok || ureq.Params == nil {
		return next(ctx, method, req)
	}
	tok, _ := ureq.Params.Meta[deliverMetaKey].(string)
	if tok == "" {
		return next(ctx, method, req)
	}
	if !g.deliveries.allowed(tok, ureq.Session) {
		return nil, nil
	}
	p := *ureq.Params
	p.Meta = nil
	for k, v := range ureq.Params.Meta {
		if k != deliverMetaKey {
			if p.Meta == nil {
				p.Meta = mcp.Meta{}
			}
			p.Meta[k] = v
		}
	}
	return next(ctx, method, &mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Session: ureq.Session, Params: &p})
}

// A subKey names one upstream subscription: the server, the per-agent
// session it was made on (nil: the shared one) and the real URI.
type subKey struct {
	server string
	owner  *agentConn
	uri    string
}

// subscriptions tracks which agent sessions subscribed, under which
// exposed URI, to each upstream subscription. Safe for concurrent use.
type subscriptions struct {
	mu sync.Mutex
	m  map[subKey]map[*mcp.ServerSession]string // guarded by mu
	on map[subKey]*upConn                       // guarded by mu: the session the upstream subscription lives on
}

func newSubscriptions() *subscriptions {
	return &subscriptions{m: map[subKey]map[*mcp.ServerSession]string{}, on: map[subKey]*upConn{}}
}

// add records ss's subscription and reports whether the upstream must be
// asked (no subscriber yet, or the last one was on another session c).
func (s *subscriptions) add(k subKey, ss *mcp.ServerSession, exposed string, c *upConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := len(s.m[k]) == 0 || s.on[k] != c
	if s.m[k] == nil {
		s.m[k] = map[*mcp.ServerSession]string{}
	}
	s.m[k][ss] = exposed
	s.on[k] = c
	return first
}

// remove drops ss's subscription and reports whether it was the last.
func (s *subscriptions) remove(k subKey, ss *mcp.ServerSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	subs, ok := s.m[k]
	if !ok {
		return false
	}
	if _, had := subs[ss]; !had {
		return false
	}
	delete(subs, ss)
	if len(subs) == 0 {
		delete(s.m, k)
		delete(s.on, k)
		return true
	}
	return false
}

// subscribers returns the sessions subscribed to k, grouped by the URI
// under which each subscribed.
func (s *subscriptions) subscribers(k subKey) map[string]map[*mcp.ServerSession]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[*mcp.ServerSession]bool{}
	for ss, exposed := range s.m[k] {
		if out[exposed] == nil {
			out[exposed] = map[*mcp.ServerSession]bool{}
		}
		out[exposed][ss] = true
	}
	return out
}

// forget drops every subscription of ss (its session ended). Upstream
// subscriptions left without subscribers stay until their session ends;
// their updates are dropped.
func (s *subscriptions) forget(ss *mcp.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, subs := range s.m {
		delete(subs, ss)
		if len(subs) == 0 {
			delete(s.m, k)
			delete(s.on, k)
		}
	}
}

// resubscribe renews, on a new session c of u (owner nil: the shared one),
// the upstream subscriptions that still have subscribers.
func (s *subscriptions) resubscribe(ctx context.Context, u *upstream, owner *agentConn, c *upConn) {
	s.mu.Lock()
	var uris []string
	for k := range s.m {
		if k.server == u.name && k.owner == owner && s.on[k] != c {
			s.on[k] = c
			uris = append(uris, k.uri)
		}
	}
	s.mu.Unlock()
	for _, uri := range uris {
		sctx, cancel := context.WithTimeout(ctx, u.connectTimeout())
		if err := c.cs.Subscribe(withAnswerCheck(sctx, "resources/subscribe"), &mcp.SubscribeParams{URI: uri}); err != nil {
			u.log.WarnContext(ctx, "cannot renew a resource subscription on the new upstream session", "err", err)
		}
		cancel()
	}
}
