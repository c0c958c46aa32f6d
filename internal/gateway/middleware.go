package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// finishTimeout bounds recording a dispatch outcome after the call returned.
const finishTimeout = 5 * time.Second

// finishContext is the context to record adm's dispatch outcome in: ctx
// without its cancellation, bounded by finishTimeout when adm ran through
// an approval (its Finish writes the outcome and the result to the store).
// Finish is a no-op for a call allowed without an approval
// (gate.Admission.Finish), so such a call gets no timer (issue 13: an
// allowed call's hot path).
func finishContext(ctx context.Context, adm *gate.Admission) (context.Context, context.CancelFunc) {
	if adm.ApprovalID == "" {
		return context.WithoutCancel(ctx), func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
}

// A dispatch is what the middleware hands the tool handler for an admitted
// call: the catalog entry it was admitted for, its progress channel and
// its origin (where the upstream's messages about it go).
type dispatch struct {
	tool     Tool
	progress *callProgress
	args     json.RawMessage // the exact bytes to send upstream
	// outcome, set by the tool handler when the way the call failed decides
	// it (callfail.go), is the dispatch outcome to record; empty: decided
	// from the result.
	outcome approval.Outcome
	origin  *origin
	// preset, when set, is the result to answer instead of dispatching (a
	// multi round-trip round of a call waiting for its approval): it goes
	// through the SDK's tool-call path so that it gets its resultType.
	preset *mcp.CallToolResult
	// relay is what a 2026-07-28 round forwards upstream (relay2026.go);
	// nil for other requests.
	relay *relayRound
	// call is the admitted call (its wrapped requestState binds it); the
	// caller's, not changed while the dispatch runs (a pointer: a copy
	// was 288 bytes per call; issue 13).
	call *gate.Call
}

type dispatchKey struct{}

// middleware is the one receiving middleware of the downstream server. It
// answers the lists (tools, prompts, resources, templates) with what the
// caller may use, and prompts/get, resources/read and completion/complete
// from the upstreams (prompts.go, resources.go). For tools/call it
// resolves the exposed name in the catalog, asks the Gatekeeper with the
// real (server, tool) pair and the raw argument bytes, and either returns
// the refusal as an isError result (never a JSON-RPC error for a policy
// outcome) or runs the tool handler, which dispatches upstream, and then
// records the outcome with Admission.Finish. An unknown tool is a
// JSON-RPC invalid-params error (MCP 2025-11-25, tools: error handling),
// unless it may be a tool of an upstream that is down (downtool.go).
func (g *Gateway) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/call" {
			// No deferred recovery in this frame, which a held call is
			// parked under: answerCall and the gate's holdOn recover
			// what follows the admission (a defer here kept each held
			// SDK-path call's stack 8 KiB larger; docs/performance.md,
			// "attack13").
			return g.callTool(ctx, method, req, next)
		}
		return g.serveOther(ctx, method, req, next)
	}
}

// serveOther is the middleware for every method but tools/call. A panic
// in it is answered as a JSON-RPC internal error (recoverHandler).
func (g *Gateway) serveOther(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (res mcp.Result, err error) {
	defer g.recoverHandler(ctx, method, &res, &err)
	switch method {
	case "tools/list":
		return g.listTools(ctx, method, req, next)
	case "prompts/list":
		return g.listPrompts(ctx, req)
	case "prompts/get":
		return g.getPrompt(ctx, req)
	case "resources/list":
		return g.listResources(ctx, req)
	case "resources/templates/list":
		return g.listTemplates(ctx, req)
	case "resources/read":
		return g.readResource(ctx, req)
	case "completion/complete":
		return g.complete(ctx, req)
	case "initialize":
		return g.initialize(ctx, method, req, next)
	case "logging/setLevel":
		return g.setLevel(ctx, method, req, next)
	default:
		return next(ctx, method, req)
	}
}

// callTool is the middleware's tools/call (see middleware).
func (g *Gateway) callTool(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	creq, ok := req.(*mcp.CallToolRequest)
	if !ok {
		return next(ctx, method, req)
	}
	if creq.Params == nil {
		return nil, errInvalidParams("tools/call without params")
	}
	if err := checkArguments(creq.Params.Arguments); err != nil {
		return nil, err
	}
	bctx, p, release, err := g.bindRequest(ctx, creq)
	if err != nil {
		return ownAnswer(ctx, req, errorResult(err.Error())), nil
	}
	ctx = bctx
	defer release()

	name := creq.Params.Name
	if name == PolicyToolName {
		if !g.policyToolOn(p) {
			return nil, errUnknownTool(name)
		}
		return ownAnswer(ctx, req, g.callPolicyTool(ctx, p, creq.Params.Arguments)), nil
	}
	t, ok := g.catalog.lookup(name)
	if !ok {
		if res, down := g.downTool(ctx, p, name, creq.Params.Arguments); down {
			return ownAnswer(ctx, req, res), nil
		}
		return nil, errUnknownTool(name)
	}
	prog := newRequestProgress(ctx, creq, g.log)
	call := g.toolCall(p, t, creq.Params.Arguments, prog)
	args := call.Arguments
	call.Resume = namedApproval(creq.Params.Meta)
	call.Prior = g.priorOf(creq)
	var relay *relayRound
	relayed := false
	if isModernRequest(ctx) {
		if relay, relayed, err = g.relayRoundFor(ctx, roundParams{creq.Params.Meta, creq.Params.InputResponses, creq.Params.RequestState}, call); err != nil {
			return nil, err
		}
	}
	mrtr := g.mrtrFor(ctx, creq)
	switch st := creq.Params.RequestState; {
	case relayed:
	case mrtr && st != "":
		id, err := g.opts.MRTR.OpenRequestState(ctx, st, call)
		if err != nil {
			return nil, errRequestState(err)
		}
		call.Resume = id
	case mrtr && call.Resume == "":
		call.Defer = true
	case st != "":
		// Neither a relayed round's nor (for this caller) an approval
		// round's: tampered, or from elsewhere (toolgate gives a 2025
		// agent none). Fail closed.
		return nil, errRequestState(gate.ErrBadRequestState)
	}
	return g.answerCall(ctx, method, req, next, creq, &call, t, prog, args, relay, g.admitCounted(ctx, creq, &call), mrtr)
}

// toolCall is the gate.Call of principal p calling catalog tool t with the
// agent's argument bytes raw (rewritten by Options.Rewrite), waiting as a
// caller with progress prog (nil: none) can.
func (g *Gateway) toolCall(p approval.Principal, t Tool, raw json.RawMessage, prog *callProgress) gate.Call {
	args := raw
	if g.opts.Rewrite != nil {
		args = g.opts.Rewrite(t.Server, t.Tool, raw)
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
		call.Outgoing = func() json.RawMessage { return g.opts.Rewrite(t.Server, t.Tool, raw) }
	}
	if prog != nil {
		call.KeepAlive = prog.keepAlive
	} else {
		call.MaxHold = g.opts.MaxHold
	}
	return call
}

// priorOf is the gate's hand-off the lean front took for the POST carrying
// req (the policy decision of a call it would hold), or nil. It comes from
// the gateway's own carrier registry, never from the client.
func (g *Gateway) priorOf(req mcp.Request) *gate.HandOff {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		if post := g.carriers.get(ex.Header.Get(carrierHeader)); post != nil {
			return post.prior
		}
	}
	return nil
}

// admitCall asks the Gatekeeper about call: with one that admits in two
// steps (admitterSplit: the gate), the admission under one of the
// gateway's admission slots (admitOrHold, admitbound.go), then the wait
// for a held call's decision without it. A held call waits for its
// decision below this frame, for minutes: the middleware's work before
// and after the wait is in frames that have returned or not yet started
// (callTool, answerCall), so the parked goroutine's stack stays small
// enough for the runtime to shrink it (docs/performance.md, "Held calls
// at scale").
//
//go:noinline // see above
func (g *Gateway) admitCall(ctx context.Context, call *gate.Call) *gate.Admission {
	adm := new(gate.Admission)
	if sp, ok := g.gk.(admitterSplit); ok {
		// Admitted under one of the gateway's admission slots
		// (admitbound.go), then held without it.
		hctx, held := g.admitOrHold(ctx, sp, call, adm)
		if !held {
			return adm
		}
		return sp.WaitHold(hctx, adm.TakeHold())
	}
	if to, ok := g.gk.(admitterTo); ok {
		to.AdmitTo(ctx, call, adm) // the call and its answer stay off this frame
	} else {
		g.admitByValue(ctx, call, adm)
	}
	return adm
}

// admitByValue sets *adm to the Gatekeeper's Admit of *call.
//
//go:noinline // its copies of the call and the answer stay off admitCall's frame
func (g *Gateway) admitByValue(ctx context.Context, call *gate.Call, adm *gate.Admission) {
	*adm = g.gk.Admit(ctx, *call)
}

// admitterTo is a Gatekeeper that writes its answer in place
// ([gate.Gate.AdmitTo]).
type admitterTo interface {
	AdmitTo(ctx context.Context, c *gate.Call, adm *gate.Admission)
}

// answerCall answers the tools/call req that the Gatekeeper decided with
// admp (call is what it decided; relay, for a relayed 2026-07-28 round,
// what goes upstream with it): a ledger replay, a multi round-trip round, a
// refusal, or the dispatch of an admitted call through next (whose outcome
// it records).
//
// A panic while answering (the dispatch, its record) fails closed as on
// the lean paths (answerfail.go): the go-sdk runs this on a goroutine of
// its own with nothing above it to recover, so a panic ended the process,
// every held call with it (attack13). It is answered an internal error,
// with outcome "unknown" recorded unless one was (FinishOnce).
//
//go:noinline // see admitCall
func (g *Gateway) answerCall(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler, creq *mcp.CallToolRequest,
	call *gate.Call, t Tool, prog *callProgress, args json.RawMessage, relay *relayRound, admp *gate.Admission, mrtr bool) (res mcp.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, g.answerPanicked(ctx, t, admp, v).err
		}
	}()
	adm := *admp
	if adm.Replay != nil {
		res, err := replayResult(adm)
		if err != nil {
			return nil, err
		}
		return ownAnswer(ctx, req, res), nil
	}
	if adm.Pending && mrtr {
		res, err := g.inputRequired(adm)
		if err == nil {
			return next(context.WithValue(ctx, dispatchKey{}, &dispatch{tool: t, preset: res}), method, req)
		}
		g.log.WarnContext(ctx, "cannot make a multi round-trip round for a pending approval; answering it as pending", "approval", adm.ApprovalID, "err", err)
	}
	if !adm.Allowed {
		return ownAnswer(ctx, req, refusalResult(adm)), nil
	}
	if adm.Arguments != nil {
		args = adm.Arguments
	}
	d := &dispatch{tool: t, progress: prog, args: args, origin: g.newOrigin(ctx, creq.Session, call.Principal, t.Server), relay: relay, call: call}
	res, err = next(context.WithValue(ctx, dispatchKey{}, d), method, req)
	fctx, cancel := finishContext(ctx, &adm)
	defer cancel()
	o := d.outcome
	if o == approval.OutcomeNone {
		o = outcome(res, err)
	}
	admp.FinishOnce(fctx, o, recorded(adm, res, err)) // once: the recovery above records nothing after it
	return res, err
}

// ownAnswer is res, a tools/call result toolgate answers itself without
// the tool handler (a refusal, the max-hold pending answer, a ledger
// replay, the policy tool's answer), with resultType "complete" when req
// is answered as a 2026-07-28 request (answersModern): that revision's
// clients refuse a result without it (the TypeScript SDK v2 fails the
// call: "missing required resultType"), and the SDK sets it only on its
// tool handlers' results. A nil res (a JSON-RPC error answer) stays nil.
func ownAnswer(ctx context.Context, req mcp.Request, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || !answersModern(ctx, req) {
		return res
	}
	return markComplete(res)
}

// answersModern reports whether req's result is a 2026-07-28 one, which
// carries resultType (SEP-2322): a stateless 2026-07-28 HTTP request
// (isModernRequest), or a request of an MCP session whose revision is
// 2026-07-28 or later. The latter is a stdio agent's that speaks it: it
// sends no initialize, and the SDK takes the session's revision from the
// _meta of its first request (go-sdk v1.8.0, ServerSession.handle). The
// SDK gives its tool handlers' results their resultType by the same
// session test (clientSupportsMultiRoundTrip), so what toolgate answers
// itself on such a session matches what the upstream's results get.
func answersModern(ctx context.Context, req mcp.Request) bool {
	if isModernRequest(ctx) {
		return true
	}
	return sessionModern(agentSession(req))
}

// sessionModern reports whether ss's revision, from its initialize
// params, is 2026-07-28 or later; false for nil or a session not yet
// initialized.
func sessionModern(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= modernVersion
}

// namedApproval is the approval a re-send names in
// _meta["toolgate/approval"]: the id itself, or the object toolgate put
// in a pending answer's _meta (its "id"). "" when none is named. Only an
// explicit name resumes an approval; equal arguments alone never do.
func namedApproval(meta mcp.Meta) approval.ID {
	switch v := meta[approvalMetaKey].(type) {
	case string:
		return approval.ID(v)
	case map[string]any:
		if id, ok := v["id"].(string); ok {
			return approval.ID(id)
		}
	}
	return ""
}

// approvalMetaKey is the _meta key naming a call's approval, in toolgate's
// answers and in a re-send that continues it.
const approvalMetaKey = "toolgate/approval"

// recorded is what the result ledger keeps of a dispatch admitted through
// an approval (nothing for calls allowed outright: they are not replayed,
// and marshalling their result would cost every allowed call).
func recorded(adm gate.Admission, res mcp.Result, err error) gate.Recorded {
	if adm.ApprovalID == "" {
		return gate.Recorded{}
	}
	return recordOf(res, err)
}

// recordOf is what the result ledger keeps of a dispatch that gave res or
// err: the result, or the JSON-RPC error object.
func recordOf(res mcp.Result, err error) gate.Recorded {
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: CodeUpstreamUnavailable, Message: err.Error()}
		}
		b, merr := json.Marshal(je)
		if merr != nil {
			return gate.Recorded{}
		}
		return gate.Recorded{Error: b}
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		return gate.Recorded{}
	}
	return gate.Recorded{Result: b}
}

// replayResult answers a re-send of a consumed approval with the result
// the ledger kept (or the JSON-RPC error the run failed with); nothing runs.
func replayResult(adm gate.Admission) (*mcp.CallToolResult, error) {
	if rp := adm.Replay; rp.Error != nil {
		var je jsonrpc.Error
		if err := json.Unmarshal(rp.Error, &je); err != nil {
			return errorResult(fmt.Sprintf("approval %s was used already; its recorded error cannot be read; it is not run again", adm.ApprovalID)), nil
		}
		return nil, &je
	}
	res, err := decodeResult(adm.Replay.Result)
	if err != nil {
		return errorResult(fmt.Sprintf("approval %s was used already; its recorded result cannot be read; it is not run again", adm.ApprovalID)), nil
	}
	return res, nil
}

// handle is the tool handler of every exposed tool. It only dispatches calls
// the middleware admitted; anything else is refused (fail closed).
func (g *Gateway) handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	d, _ := ctx.Value(dispatchKey{}).(*dispatch)
	if d == nil || d.tool.Name != req.Params.Name {
		return errorResult("call not admitted by the gate"), nil
	}
	if d.preset != nil {
		return d.preset, nil
	}
	u := g.ups[d.tool.Server]
	if u == nil {
		return nil, errUnknownTool(req.Params.Name)
	}
	if d.progress != nil {
		g.routes.start(d.progress)
		defer g.routes.finish(d.progress)
	}
	// Log messages of the call are delivered before its result, and before
	// its progress stops (deferred calls run last-in first-out).
	defer d.origin.finish()
	relay := d.relay
	if relay == nil && (req.Params.InputResponses != nil || req.Params.RequestState != "") {
		// A 2025 agent's call, invoked again by the SDK after it put the
		// upstream's input requests to the agent as classic requests
		// (relay2026.go): the answers and the upstream's state go back
		// to the upstream. The middleware refused any requestState of the
		// agent's own, so this one is the upstream's, never left toolgate.
		relay = &relayRound{responses: req.Params.InputResponses, state: req.Params.RequestState}
	}
	res, err := u.call(withRelayRound(withOrigin(ctx, d.origin), relay), d.tool.Tool, d.args, d.progress)
	if err == nil && d.relay != nil {
		res, err = g.relayResult(*d.call, res)
	}
	return dispatched(d, res, err)
}

// unknownToolHint ends the unknown tool error: where the caller finds the
// names it may call (toolgate's are usually <server>__<tool>, which a
// client written for the upstream alone does not send). The same words
// for every unknown name, so the error tells nothing of hidden tools.
const unknownToolHint = " (tools/list names the tools you may call)"

// errUnknownTool is the JSON-RPC error of a tools/call naming a tool the
// caller cannot see: invalid params, as MCP asks (a policy refusal is an
// isError result instead), "unknown tool: <name>" and [unknownToolHint].
func errUnknownTool(name string) error {
	return errInvalidParams("unknown tool: " + name + unknownToolHint)
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

// bindRequest finds the principal of a request (a call, or a prompts/get
// or resources/read, which may be held too), ties it to its session (so a
// DELETE, the end of ServeStdio or Close cancels it) and, for HTTP, to its
// POST (the carrier watch, notes §3), and arms the SSE heartbeat of the
// POST. release undoes it.
//
// The principal comes from the gateway's own registry entry for the POST,
// keyed by a header the HTTP front sets (any client value is overwritten),
// or, for stdio, from the session's context. A client can never name it.
func (g *Gateway) bindRequest(ctx context.Context, req mcp.Request) (_ context.Context, _ approval.Principal, release func(), _ error) {
	if g.root.Err() != nil {
		return nil, approval.Principal{}, nil, ErrShutdown
	}
	var (
		p    approval.Principal
		sid  string
		post *carrier
	)
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		post = g.carriers.get(ex.Header.Get(carrierHeader))
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
	if (post != nil && post.modern) || (post == nil && sessionModern(agentSession(req))) {
		// A 2026-07-28 request: a stateless HTTP one, or one of a stdio
		// session of that revision, which is served as HTTP serves its
		// requests (the upstream session for such agents, relayed rounds,
		// approval rounds: branch mrtr42).
		ctx = context.WithValue(ctx, modernKey{}, true)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	untrack := g.calls.add(sid, p.ID, cancel)
	if g.root.Err() != nil { // Close ran between the check above and add
		cancel(ErrShutdown)
	}
	stop := func() bool { return false }
	if post != nil {
		// Close waits for the POST's answer before closing its session.
		post.owe(&g.answers)
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

func sessionID(req mcp.Request) string {
	ss := agentSession(req)
	if ss == nil {
		return ""
	}
	return ss.ID()
}

// agentSession is req's agent session, nil when it has none.
func agentSession(req mcp.Request) *mcp.ServerSession {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return ss
}

// requestModern reports whether req is a 2026-07-28 request, as
// bindRequest marks one: a stateless HTTP request (its POST's carrier), or
// one of a stdio session of that revision (sessionModern).
func (g *Gateway) requestModern(req mcp.Request) bool {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		post := g.carriers.get(ex.Header.Get(carrierHeader))
		return post != nil && post.modern
	}
	return sessionModern(agentSession(req))
}

// modernKey marks the context of a 2026-07-28 request (bindRequest): a
// stateless HTTP request, whose MCP session lasts the request, or a
// request of a stdio session whose revision is 2026-07-28 (sessionModern),
// which cannot be asked anything back either (the SDK's Elicit, CreateMessage
// and ListRoots fail on such a session: SEP-2322 replaced them).
type modernKey struct{}

// isModernRequest reports whether ctx is a 2026-07-28 request's (see
// modernKey): its tool calls and prompts/get go through the upstream
// session for such agents (modernconn.go), an upstream's input_required is
// relayed with its state wrapped (relay2026.go), and a held call may be
// answered with approval rounds (Gateway.mrtrFor).
func isModernRequest(ctx context.Context) bool {
	v, _ := ctx.Value(modernKey{}).(bool)
	return v
}

// checkArguments refuses tools/call arguments that are present but not a
// JSON object. MCP's schema makes CallToolRequest.params.arguments an
// object; anything else is a malformed request, not a tool's input failing
// its inputSchema (which MCP answers with an isError result so the model can
// correct itself), so it gets the JSON-RPC error JSON-RPC 2.0 defines for
// it: -32602 invalid params. Nothing is forwarded or held for approval.
func checkArguments(args json.RawMessage) error {
	if len(args) == 0 {
		return nil
	}
	if b := bytes.TrimLeft(args, " \t\r\n"); len(b) > 0 && b[0] == '{' {
		return nil
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: tools/call arguments must be a JSON object (got " + jsonKind(args) + ")"}
}

// jsonKind names the JSON type of a value's first token.
func jsonKind(v json.RawMessage) string {
	b := bytes.TrimLeft(v, " \t\r\n")
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
