package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// Prompts (issue 10) are named like tools ("<server>__<prompt>", or
// unprefixed with tool_prefix: false), listed to whoever may use them, and
// prompts/get passes the gate like a tools/call (kind prompt_get, the
// prompt arguments bound like tool arguments, the definition digest like a
// tool's). completion/complete is routed by its ref.

// listPrompts answers prompts/list.
func (g *Gateway) listPrompts(ctx context.Context, req mcp.Request) (mcp.Result, error) {
	lr, _ := req.(*mcp.ListPromptsRequest)
	var cursor string
	if lr != nil && lr.Params != nil {
		cursor = lr.Params.Cursor
	}
	p, use := g.usable(ctx, req)
	visible := g.visiblePrompts(use)
	items, next, err := page(visible, func(p Prompt) string { return p.Name }, cursor, g.opts.ListPageSize)
	if err != nil {
		return nil, err
	}
	out := &mcp.ListPromptsResult{Prompts: make([]*mcp.Prompt, 0, len(items)), NextCursor: next, Cacheable: privateCache}
	for _, pr := range items {
		def := *pr.Definition
		def.Name = pr.Name
		out.Prompts = append(out.Prompts, &def)
	}
	g.recordView(req, p, viewPrompts, fingerprintOf(visible, func(p Prompt) string { return p.Name + "\x00" + p.Digest }))
	return out, nil
}

func (g *Gateway) visiblePrompts(use func(kind, server, name string) bool) []Prompt {
	var out []Prompt
	for _, p := range g.exposure().prompts {
		if use(approval.KindPromptGet, p.Server, p.Prompt) {
			out = append(out, p)
		}
	}
	return out
}

// getPrompt answers prompts/get: resolve the name, pass the gate, get the
// prompt upstream. An unknown name is invalid params (-32602). A panic
// after the admission fails closed (recoverAnswer).
func (g *Gateway) getPrompt(ctx context.Context, req mcp.Request) (result mcp.Result, rerr error) {
	gr, ok := req.(*mcp.GetPromptRequest)
	if !ok || gr.Params == nil || gr.Params.Name == "" {
		return nil, errInvalidParams("prompts/get needs params.name")
	}
	ctx, p, release, err := g.bindRequest(ctx, req)
	if err != nil {
		return nil, &jsonrpc.Error{Code: CodeRefused, Message: err.Error()}
	}
	defer release()
	pr, ok := g.exposure().prompt(gr.Params.Name)
	if !ok || g.ups[pr.Server] == nil {
		return nil, errInvalidParams("unknown prompt: " + gr.Params.Name)
	}
	args := json.RawMessage(`{}`)
	if len(gr.Params.Arguments) > 0 {
		if args, err = json.Marshal(gr.Params.Arguments); err != nil {
			return nil, err
		}
	}
	call := gate.Call{Principal: p, Kind: approval.KindPromptGet, Server: pr.Server, Tool: pr.Prompt, Arguments: args, ToolDigest: pr.Digest}
	prog := newRequestProgress(ctx, req, g.log)
	if prog != nil {
		call.KeepAlive = prog.keepAlive
	} else {
		call.MaxHold = g.opts.MaxHold
	}
	var relay *relayRound
	if isModernRequest(ctx) {
		var opened bool
		relay, opened, err = g.relayRoundFor(ctx, roundParams{gr.Params.Meta, gr.Params.InputResponses, gr.Params.RequestState}, call)
		if err != nil {
			return nil, err
		}
		if gr.Params.RequestState != "" && !opened {
			return nil, errRequestState(gate.ErrBadRequestState)
		}
	}
	adm := *g.admitCounted(ctx, req, &call)
	if !adm.Allowed {
		return nil, refusalError(adm)
	}
	defer g.recoverAnswer(ctx, pr.Server, pr.Prompt, &adm, &result, &rerr)
	defer g.relayProgress(prog)()
	u := g.ups[pr.Server]
	var res *mcp.GetPromptResult
	o := g.newOrigin(ctx, gr.Session, p, u.name)
	var upErr error // the upstream request's error, toolgate's verdict marked (requestOutcome)
	err = g.forward(ctx, u, o, func(ctx context.Context, c *upConn, ac *agentConn) error {
		params := &mcp.GetPromptParams{Name: pr.Prompt, Arguments: gr.Params.Arguments, Meta: upstreamMeta(gr.Params.Meta)}
		if relay != nil && ac == nil && c.modernEra() {
			// A 2026-07-28 upstream may answer input_required: the round
			// goes over its session for such agents (forward; relay2026.go).
			relay.applyPrompt(params)
		}
		var err error
		cctx := withAnswerCheck(ctx, "prompts/get")
		cctx, params.Meta = u.sendRelayProgress(cctx, c, prog, params.Meta)
		res, err = c.cs.GetPrompt(cctx, params)
		upErr = sdkVerdict(c, slotFrom(cctx), err)
		return err
	})
	if err == nil && relay != nil {
		res, err = g.relayPrompt(call, res)
	}
	g.finishRequest(ctx, &adm, err, upErr)
	if err != nil {
		return nil, err
	}
	delete(res.Meta, mcp.MetaKeyServerInfo)
	if answersModern(ctx, req) {
		if res.InputRequests != nil {
			return markResultType(res, "input_required"), nil
		}
		return markComplete(res), nil
	}
	return res, nil
}

// complete answers completion/complete: a ref/prompt names an exposed
// prompt, a ref/resource an exposed resource template (or resource URI);
// the request goes to the owning server with the real name. A ref the
// caller may not use (hidden from its lists) is unknown: invalid params.
// Completion suggests argument values; it is not gated like a use.
func (g *Gateway) complete(ctx context.Context, req mcp.Request) (mcp.Result, error) {
	cr, ok := req.(*mcp.CompleteRequest)
	if !ok || cr.Params == nil || cr.Params.Ref == nil {
		return nil, errInvalidParams("completion/complete needs params.ref")
	}
	p, use := g.usable(ctx, req)
	ref := *cr.Params.Ref
	var server string
	switch ref.Type {
	case "ref/prompt":
		pr, ok := g.exposure().prompt(ref.Name)
		if !ok || !use(approval.KindPromptGet, pr.Server, pr.Prompt) {
			return nil, errInvalidParams("unknown prompt: " + ref.Name)
		}
		server, ref.Name = pr.Server, pr.Prompt
	case "ref/resource":
		if t, ok := g.exposure().template(ref.URI); ok {
			if !use(approval.KindResourceRead, t.Server, t.Real) {
				return nil, errInvalidParams("unknown resource template: " + ref.URI)
			}
			server, ref.URI = t.Server, t.Real
			break
		}
		u, real, err := g.resolveURI(ref.URI)
		if err != nil || !use(approval.KindResourceRead, u.name, real) {
			return nil, errInvalidParams("unknown resource template: " + ref.URI)
		}
		server, ref.URI = u.name, real
	default:
		return nil, errInvalidParams(fmt.Sprintf("unknown ref type %q", ref.Type))
	}
	if g.requestModern(req) {
		// Not gated, so not bound (bindRequest): a 2026-07-28 request's
		// completion goes where its other requests go (forward), never
		// to a per-agent session opened for a session that lasts one
		// request (branch stdio43).
		ctx = context.WithValue(ctx, modernKey{}, true)
	}
	u := g.ups[server]
	params := *cr.Params
	params.Ref = &ref
	params.Meta = upstreamMeta(cr.Params.Meta)
	var res *mcp.CompleteResult
	o := g.newOrigin(ctx, cr.Session, p, u.name)
	// No progress is relayed: the SDK gives completion/complete no
	// progress token (CompleteParams), and upstreamMeta drops the agent's.
	err := g.forward(ctx, u, o, func(ctx context.Context, c *upConn, _ *agentConn) error {
		var err error
		res, err = c.cs.Complete(withAnswerCheck(ctx, "completion/complete"), &params)
		return err
	})
	if err != nil {
		return nil, err
	}
	delete(res.Meta, mcp.MetaKeyServerInfo)
	return res, nil
}
