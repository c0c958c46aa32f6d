package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server→client requests and upstream log messages (issue 10).
//
// An upstream may ask its client for sampling, elicitation (form or URL
// mode) or the roots list while it serves a request. toolgate forwards
// each such request to the agent session that made the request it belongs
// to, and sends the agent's answer back; it never answers for an agent, and
// never lets one agent answer for another:
//
//   - HTTP upstreams send these messages on the event stream of the POST
//     they belong to. The RoundTripper (rawcap.go) sees that stream before
//     the SDK and stamps each server→client request with the route token of
//     the POST's origin (routeMetaKey in params._meta).
//   - A per-agent upstream session (servers.<name>.sessions: per_agent)
//     belongs to one agent session, so whatever arrives on it is that
//     agent's.
//   - Anything else (a shared stdio session, a shared HTTP session's
//     standalone stream) cannot be tied to a request: requests are refused
//     with an error, log messages go to toolgate's log.

// routeMetaKey is the _meta key under which the HTTP tap stamps a
// server→client request with its origin's route token. It is removed
// before the request reaches an agent.
const routeMetaKey = "toolgate/route"

// Methods of server→client requests and notifications.
const (
	methodCreateMessage = "sampling/createMessage"
	methodElicit        = "elicitation/create"
	methodListRoots     = "roots/list"
	methodLog           = "notifications/message"
)

// codeNotSupported answers a server→client request that toolgate cannot
// forward: the agent that made the call did not declare the capability,
// or no agent can be told apart. It is the code a go-sdk client without
// an elicitation handler answers with (invalid params); "method not
// found" would lose the message on the way (the SDK rewrites it).
const codeNotSupported = jsonrpc.CodeInvalidParams

// receivingMiddleware returns the receiving middleware of an upstream
// client: it forwards server→client requests to the agent they belong to.
// owner is the agent session the client serves alone (per-agent sessions),
// or nil for the shared client. The owner is bound here, before the client
// connects, because a server may ask (roots/list) as soon as it is
// initialized, before Connect has returned the session toolgate could look
// it up by.
func (u *upstream) receivingMiddleware(owner *agentConn) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case methodCreateMessage, methodElicit, methodListRoots:
				return u.relayRequest(ctx, method, req, owner)
			}
			return next(ctx, method, req)
		}
	}
}

// routeOf finds the origin of a server→client request that arrived on cs:
// the stamped route token, else the agent session that owns the client
// (owner, bound when the client was made) or cs. It removes the stamp
// from params.
func (u *upstream) routeOf(cs *mcp.ClientSession, params mcp.Params, owner *agentConn) *origin {
	var tok string
	if isNilParams(params) {
		params = nil
	}
	if params == nil {
		// no stamp
	} else if meta := params.GetMeta(); meta != nil {
		tok, _ = meta[routeMetaKey].(string)
		delete(meta, routeMetaKey)
		if len(meta) == 0 {
			params.SetMeta(nil)
		}
	}
	if o := u.g.origins.get(tok); o != nil && o.server == u.name {
		return o
	}
	if owner != nil {
		return owner.route()
	}
	if ac := u.agentConnOf(cs); ac != nil {
		return ac.route()
	}
	return nil
}

// isNilParams reports whether p is nil or a nil pointer (a request sent
// without params, such as roots/list).
func isNilParams(p mcp.Params) bool {
	if p == nil {
		return true
	}
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// relayRequest forwards one server→client request to its agent and
// returns the agent's answer. owner is the client's agent session, or nil
// for the shared client.
func (u *upstream) relayRequest(ctx context.Context, method string, req mcp.Request, owner *agentConn) (mcp.Result, error) {
	capability := map[string]string{methodCreateMessage: CapabilitySampling, methodElicit: CapabilityElicitation, methodListRoots: CapabilityRoots}[method]
	if !u.cfg.offers(capability) {
		return nil, &jsonrpc.Error{Code: codeNotSupported, Message: fmt.Sprintf("toolgate does not offer %s to upstream %q (servers.%s.client_capabilities)", capability, u.name, u.name)}
	}
	cs, _ := req.GetSession().(*mcp.ClientSession)
	o := u.routeOf(cs, req.GetParams(), owner)
	if o == nil || o.ss == nil {
		msg := u.unroutedMessage(method)
		u.log.WarnContext(ctx, "server→client request refused: it cannot be tied to an agent request", "method", method, "why", msg)
		return nil, &jsonrpc.Error{Code: codeNotSupported, Message: msg}
	}
	return o.ask(ctx, method, req.GetParams(), func(id string) { u.g.elicitations.put(u.name, id, o.ss) })
}

// unroutedMessage says why a server→client request of method that no
// agent's request can be told apart for is refused. On a per-agent server
// such a request came on a session toolgate keeps for itself (the shared
// one that lists its tools, prompts and resources, also serving 2026-07-28
// requests), outside any agent's request it can tell apart: the server
// asks there at start (roots/list, as the everything and filesystem
// servers do), and no setting changes that; 2025 agents' requests go to
// sessions of their own. Before branch newuser47 it said to set
// servers.<name>.sessions: per_agent, which such a server already had.
func (u *upstream) unroutedMessage(method string) string {
	if u.cfg.perAgent() {
		return fmt.Sprintf("toolgate cannot tell which agent %s is for: upstream %q sent it on a session toolgate keeps for itself (the one that lists its tools, or the one serving 2026-07-28 requests), not while serving an agent's request that can be told apart; on each 2025 agent session's own session with the server such requests reach that agent",
			method, u.name)
	}
	return fmt.Sprintf("toolgate cannot tell which agent %s is for: upstream %q shares one session among agents and the request did not arrive while serving an agent's request that can be told apart (use servers.%s.sessions: per_agent)",
		method, u.name, u.name)
}

// ask puts one server→client request (sampling, elicitation or roots, by
// its params) to o's agent session and returns its answer: a JSON-RPC
// error when the agent did not declare the capability (or the form of it
// the request needs), the agent's own error, or its result. ctx is the
// upstream's side of the request: ending it withdraws the question. urlID,
// when not nil, is told the id of a URL-mode elicitation before it is
// sent. It is the one place that asks agents, so the 2026-07-28 era's
// multi round-trip relay can put each of a result's inputRequests through
// it.
func (o *origin) ask(ctx context.Context, method string, params mcp.Params, urlID func(string)) (mcp.Result, error) {
	// The agent's handler context carries the stream to use; the upstream's
	// cancels it (and so does the end of the agent's request, unless the
	// origin is borrowed: then the question does not belong to it).
	base := o.ctx
	if o.borrowed {
		base = context.WithoutCancel(o.ctx)
	}
	fctx, cancel := context.WithCancel(base)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	var caps *mcp.ClientCapabilities
	if ip := o.ss.InitializeParams(); ip != nil {
		caps = ip.Capabilities
	}
	missing := func(what string) error {
		return &jsonrpc.Error{Code: codeNotSupported, Message: fmt.Sprintf("the agent that made this request (%s) does not support %s", o.principal.ID, what)}
	}
	var (
		res mcp.Result
		err error
	)
	switch p := params.(type) {
	case *mcp.CreateMessageWithToolsParams:
		switch {
		case caps == nil || caps.Sampling == nil:
			return nil, missing("sampling")
		case p != nil && len(p.Tools) > 0 && caps.Sampling.Tools == nil:
			return nil, missing("sampling with tools")
		}
		if lr, ok, lerr := o.askLean(fctx, method, p); ok {
			res, err = lr, lerr
		} else {
			res, err = o.viaSDK(fctx, ctx, method, func(c context.Context) (mcp.Result, error) { return o.ss.CreateMessageWithTools(c, p) })
		}
	case *mcp.ElicitParams:
		if p == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + " without params"}
		}
		mode := p.Mode
		if mode == "" {
			mode = "form"
		}
		switch {
		case caps == nil || caps.Elicitation == nil:
			return nil, missing("elicitation")
		case mode == "url" && caps.Elicitation.URL == nil:
			return nil, missing("URL mode elicitation")
		case mode == "form" && caps.Elicitation.Form == nil && caps.Elicitation.URL != nil:
			return nil, missing("form mode elicitation")
		}
		if mode == "url" && p.ElicitationID != "" && urlID != nil {
			urlID(p.ElicitationID)
		}
		if lr, ok, lerr := o.askLean(fctx, method, p); ok {
			res, err = lr, lerr
		} else {
			res, err = o.viaSDK(fctx, ctx, method, func(c context.Context) (mcp.Result, error) { return o.ss.Elicit(c, p) })
		}
	case *mcp.ListRootsParams: // may be nil: roots/list has no required params
		if caps == nil || caps.RootsV2 == nil {
			return nil, missing("roots")
		}
		if lr, ok, lerr := o.askLean(fctx, method, p); ok {
			res, err = lr, lerr
		} else {
			res, err = o.viaSDK(fctx, ctx, method, func(c context.Context) (mcp.Result, error) { return o.ss.ListRoots(c, p) })
		}
	default:
		return nil, &jsonrpc.Error{Code: codeNotSupported, Message: "toolgate does not forward " + method}
	}
	if err != nil {
		var wire *jsonrpc.Error
		switch {
		case errors.As(err, &wire):
			return nil, wire
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case !o.borrowed && (o.ctx.Err() != nil || errors.Is(err, errLeanCallEnded)):
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the agent's request ended before it answered " + method}
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the agent did not answer %s: %v", method, err)}
	}
	return res, nil
}

// viaSDK puts a question to the agent the SDK's way: send(fctx). ctx is
// the upstream's side of the question. A borrowed origin's question can
// find the request whose stream it borrowed answered in the meantime; the
// SDK then refuses to write it ("rejected by transport: write to closed
// stream": nothing was sent), and it is sent once more on the agent
// session's standalone stream, where a question of no request belongs.
func (o *origin) viaSDK(fctx, ctx context.Context, method string, send func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	res, err := send(fctx)
	if err == nil || !o.borrowed || o.standalone == nil || !unsent(err) {
		return res, err
	}
	o.log.DebugContext(ctx, "server→client request: the agent's request it would ride on was answered; sent on the session's stream", "method", method)
	sctx, cancel := context.WithCancel(o.standalone)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	return send(sctx)
}

// unsent reports whether err is the go-sdk's refusal to write a message on
// the stream of a request already answered, which it returns before
// anything reaches the agent: its sentinel error (code -32005, codeRejected,
// with the message "rejected by transport" alone) wrapped with "write to
// closed stream" after it. An agent's answer of code -32005 is not: the
// agent's error is the innermost of err, so err's text ends with its
// message; a message of the sentinel's text alone cannot end err's text
// with "write to closed stream", and a message that ends so is not the
// sentinel's. Such an answer reached the agent (its human may have seen
// the question) and is not put to it again.
func unsent(err error) bool {
	var wire *jsonrpc.Error
	return errors.As(err, &wire) && wire.Code == codeRejected && wire.Message == sdkRejected &&
		strings.HasSuffix(err.Error(), sdkRejected+": write to closed stream")
}

// sdkRejected is the message of the go-sdk's jsonrpc2.ErrRejected.
const sdkRejected = "rejected by transport"

// routeLog delivers one upstream log message (the params of a
// notifications/message read off the wire): to the agent request o it
// belongs to, else to the agent session that owns the upstream session
// (ac), else to toolgate's log. It never blocks the upstream's reader.
//
// The message's data is kept as the upstream sent it (a json.RawMessage,
// which goes to the agent as its bytes, compacted, in valid UTF-8:
// repairUTF8): decoded into Go values it would hold many times its wire
// bytes (about 20 for empty objects) while it waits in a queue bounded by
// those bytes (relayQueueBytes).
func (u *upstream) routeLog(ctx context.Context, o *origin, ac *agentConn, params json.RawMessage) {
	var data json.RawMessage
	p := mcp.LoggingMessageParams{Data: &data} // decoded into data
	if err := json.Unmarshal(params, &p); err != nil {
		u.log.WarnContext(ctx, "upstream log message does not parse; dropped", "err", err)
		return
	}
	p.Data = nil
	size := len(params) // what the message holds while it waits
	if data != nil {
		// As a result's raw members (repairUTF8): bytes that are not
		// UTF-8 and lone surrogate escapes go as U+FFFD, which decoding
		// into Go values made of them, or a strict decoder refuses the
		// agent's whole message. U+FFFD takes 3 bytes for one.
		fixed := repairUTF8(data)
		size += len(fixed) - len(data)
		p.Data = fixed
	}
	if o != nil && o.sendLog(&p, size) {
		return
	}
	if ac != nil && ac.sendLog(&p, size) {
		return
	}
	if data != nil {
		// toolgate's own log shows the data decoded, as before.
		var v any
		if json.Unmarshal(data, &v) == nil {
			p.Data = v
		}
	}
	u.logMessage(ctx, &p)
}

// elicitationComplete forwards notifications/elicitation/complete to the
// agent session that received the URL elicitation it completes; an id
// toolgate did not forward is dropped.
func (u *upstream) elicitationComplete(p *mcp.ElicitationCompleteParams) {
	if p == nil {
		return
	}
	ss := u.g.elicitations.take(u.name, p.ElicitationID)
	if ss == nil {
		u.log.Debug("elicitation/complete for an elicitation no agent got; dropped")
		return
	}
	if err := ss.NotifyElicitationComplete(u.g.root, p); err != nil {
		u.log.Debug("elicitation/complete not delivered", "err", err)
	}
}

// maxElicitations bounds the URL elicitations remembered for their
// completion notification; the oldest are forgotten first.
const maxElicitations = 4096

// elicitations remembers which agent session got which URL elicitation,
// by (server, elicitation id). Its methods are safe for concurrent use.
type elicitations struct {
	mu    sync.Mutex
	m     map[[2]string]*mcp.ServerSession // guarded by mu
	order [][2]string                      // guarded by mu: insertion order
}

func (e *elicitations) put(server, id string, ss *mcp.ServerSession) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[[2]string]*mcp.ServerSession{}
	}
	k := [2]string{server, id}
	if _, ok := e.m[k]; !ok {
		e.order = append(e.order, k)
	}
	e.m[k] = ss
	for len(e.order) > maxElicitations {
		delete(e.m, e.order[0])
		e.order = e.order[1:]
	}
}

func (e *elicitations) take(server, id string) *mcp.ServerSession {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := [2]string{server, id}
	ss := e.m[k]
	delete(e.m, k)
	return ss
}

// forget drops every elicitation of ss (its session ended).
func (e *elicitations) forget(ss *mcp.ServerSession) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, v := range e.m {
		if v == ss {
			delete(e.m, k)
		}
	}
}
