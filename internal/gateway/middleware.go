package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// finishTimeout bounds recording a dispatch outcome after the call returned.
const finishTimeout = 5 * time.Second

// A dispatch is what the middleware hands the tool handler for an admitted
// call: the catalog entry it was admitted for and its progress channel.
type dispatch struct {
	tool     Tool
	progress *callProgress
	args     json.RawMessage // the exact bytes to send upstream
}

type dispatchKey struct{}

// middleware is the one receiving middleware of the downstream server. It
// filters tools/list to what the caller may see (see listTools). For
// tools/call it resolves the exposed name in the catalog, asks the
// Gatekeeper with the real (server, tool) pair and the raw argument bytes,
// and either returns the refusal as an isError result (never a JSON-RPC
// error for a policy outcome) or runs the tool handler, which dispatches
// upstream, and then records the outcome with Admission.Finish.
func (g *Gateway) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/list" {
			return g.listTools(ctx, method, req, next)
		}
		creq, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok {
			return next(ctx, method, req)
		}
		if creq.Params == nil {
			return errorResult("tools/call without params"), nil
		}
		ctx, p, release, err := g.bindCall(ctx, creq)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		defer release()

		name := creq.Params.Name
		if name == PolicyToolName {
			if !g.policyToolOn(p) {
				return errorResult("unknown tool " + name), nil
			}
			return g.callPolicyTool(ctx, p, creq.Params.Arguments), nil
		}
		t, ok := g.catalog.lookup(name)
		if !ok {
			return errorResult("unknown tool " + name), nil
		}
		prog := newCallProgress(ctx, creq, g.log)
		args := creq.Params.Arguments
		if g.opts.Rewrite != nil {
			args = g.opts.Rewrite(t.Server, t.Tool, creq.Params.Arguments)
		}
		call := gate.Call{
			Principal:  p,
			Server:     t.Server,
			Tool:       t.Tool,
			Arguments:  args,
			ToolDigest: t.Digest,
		}
		if g.opts.Rewrite != nil {
			// Rewrite again at dispatch: the gate checks these bytes against
			// the approved hash (case C11).
			call.Outgoing = func() json.RawMessage { return g.opts.Rewrite(t.Server, t.Tool, creq.Params.Arguments) }
		}
		if prog != nil {
			call.KeepAlive = prog.keepAlive
		}
		adm := g.gk.Admit(ctx, call)
		if !adm.Allowed {
			return refusalResult(adm), nil
		}
		if adm.Arguments != nil {
			args = adm.Arguments
		}
		res, err := next(context.WithValue(ctx, dispatchKey{}, &dispatch{tool: t, progress: prog, args: args}), method, req)
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		adm.Finish(fctx, outcome(res, err))
		return res, err
	}
}

// handle is the tool handler of every exposed tool. It only dispatches calls
// the middleware admitted; anything else is refused (fail closed).
func (g *Gateway) handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	d, _ := ctx.Value(dispatchKey{}).(*dispatch)
	if d == nil || d.tool.Name != req.Params.Name {
		return errorResult("call not admitted by the gate"), nil
	}
	u := g.ups[d.tool.Server]
	if u == nil {
		return errorResult("unknown tool " + req.Params.Name), nil
	}
	if d.progress != nil {
		g.routes.start(d.progress)
		defer g.routes.finish(d.progress)
	}
	return u.call(ctx, d.tool.Tool, d.args, d.progress)
}

func outcome(res mcp.Result, err error) approval.Outcome {
	if err != nil {
		return approval.OutcomeTransportError
	}
	if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
		return approval.OutcomeToolError
	}
	return approval.OutcomeOK
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

func refusalResult(adm gate.Admission) *mcp.CallToolResult {
	r := errorResult(adm.Message)
	if len(adm.Meta) > 0 {
		r.Meta = mcp.Meta(adm.Meta)
	}
	return r
}

// errUnauthenticated refuses a call that carries no principal; it cannot
// happen through Handler or ServeStdio.
var errUnauthenticated = errors.New("unauthenticated: no principal for this call")

// bindCall finds the principal of a call, ties the call to its session (so
// a DELETE, the end of ServeStdio or Close cancels it) and, for HTTP, to its
// POST (the carrier watch, notes §3), and arms the SSE heartbeat of the
// POST. release undoes it.
//
// The principal comes from the gateway's own registry entry for the POST,
// keyed by a header the HTTP front sets (any client value is overwritten),
// or, for stdio, from the session's context. A client can never name it.
func (g *Gateway) bindCall(ctx context.Context, req *mcp.CallToolRequest) (_ context.Context, _ approval.Principal, release func(), _ error) {
	if g.root.Err() != nil {
		return nil, approval.Principal{}, nil, ErrShutdown
	}
	var (
		p    approval.Principal
		sid  string
		post *carrier
	)
	if req.Extra != nil && req.Extra.Header != nil {
		post = g.carriers.get(req.Extra.Header.Get(carrierHeader))
		if post == nil {
			return nil, approval.Principal{}, nil, errUnauthenticated
		}
		p, sid = post.principal, sessionID(req)
	} else {
		var ok bool
		if p, ok = ctx.Value(principalKey{}).(approval.Principal); !ok {
			return nil, approval.Principal{}, nil, errUnauthenticated
		}
		sid, _ = ctx.Value(stdioSessionKey{}).(string)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	untrack := g.calls.add(sid, p.ID, cancel)
	if g.root.Err() != nil { // Close ran between the check above and add
		cancel(ErrShutdown)
	}
	stop := func() bool { return false }
	if post != nil {
		// A POST that ends before its call means the client went away. A
		// go-sdk client that cancels also aborts the POST, and its
		// notifications/cancelled arrives within the grace, so an explicit
		// cancel keeps its cause context.Canceled.
		stop = context.AfterFunc(post.ctx, func() {
			time.AfterFunc(post.grace, func() { cancel(ErrClientGone) })
		})
		if post.hb != nil {
			post.hb.arm()
		}
	}
	return ctx, p, func() {
		stop()
		untrack()
		cancel(nil)
	}, nil
}

func sessionID(req *mcp.CallToolRequest) string {
	if req.Session == nil {
		return ""
	}
	return req.Session.ID()
}
