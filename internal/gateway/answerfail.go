package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// A panic while answering a 2026-07-28 call (attack12). The answer of a
// parked call (answerParked) runs on a goroutine of the gateway's or of
// the gate's (heldDone), where nothing recovers: a panic in the dispatch,
// its record or the answer's encoding ended the process, every other held
// call with it, and left the call's request consumed without an outcome
// (the dispatch lease gone with the process; the sweep then said
// "unknown"). On the connection's goroutine net/http recovers the panic,
// but the call's record stayed without an outcome while its dispatch
// lease was renewed for as long as the process ran.
//
// Now such a panic is recovered where the answer is made and fails
// closed: it is logged with its stack (never the arguments), a call that
// was admitted has its outcome recorded as "unknown" (it may or may not
// have run; what was recorded first stands, FinishOnce) with the error in
// the result ledger, and the caller gets a JSON-RPC internal error.
// Nothing dispatches again. The 2025-era lean front's answer
// (answerLean, on the connection's goroutine) does the same.

// answerModernSafe is answerModern with a panic of the answer made into
// an internal error (answerPanicked).
func (g *Gateway) answerModernSafe(ctx context.Context, p approval.Principal, t Tool, call *gate.Call, adm *gate.Admission, relay *relayRound, prog *callProgress) (ans modernAnswer) {
	defer func() {
		if v := recover(); v != nil {
			ans = g.answerPanicked(ctx, t, adm, v)
		}
	}()
	return g.answerModern(ctx, p, t, call, adm, relay, prog)
}

// answerPanicked logs the panic v of the answer to the call of t admitted
// as adm, records the call's outcome "unknown" unless one is recorded
// already, and returns the internal error its caller gets.
func (g *Gateway) answerPanicked(ctx context.Context, t Tool, adm *gate.Admission, v any) modernAnswer {
	var id approval.ID
	allowed := adm != nil && adm.Allowed
	if adm != nil {
		id = adm.ApprovalID
	}
	g.log.ErrorContext(ctx, "panic while answering a tool call; answering an internal error", "server", t.Server, "tool", t.Tool,
		"approval", id, "admitted", allowed, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	msg := "internal error: the gateway failed while answering this call"
	if allowed {
		msg += "; it may or may not have run"
		if id != "" {
			msg += " (see its approval's outcome)"
		}
		e, _ := json.Marshal(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg})
		finishModern(ctx, adm, approval.OutcomeUnknown, gate.Recorded{Error: e})
	}
	return modernAnswer{err: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}}
}

// writeParked writes the answer to the parked call l into pw; a panic
// while answering or encoding is answered as an internal error in its
// place (answerPanicked), pw's headers kept and its body started over.
func (l *leanHold) writeParked(pw *parkedResponse) {
	g := l.f.g
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		pw.status = 0
		pw.body.Reset()
		ans := g.answerPanicked(l.ctx, l.t, l.adm, v)
		writeModernAnswer(pw, g.impl, l.m.ID, ans)
	}()
	writeModernAnswer(pw, g.impl, l.m.ID, g.answerModern(l.ctx, l.p, l.t, l.call, l.adm, l.relay, l.prog))
}

// recoverAnswer is deferred by an SDK-path handler other than tools/call
// (resources/read, prompts/get) once it admitted its request (of server's
// name) as *adm: a panic of its answer (the dispatch, its record) fails
// closed as answerCall's does (answerPanicked: an internal error in
// *res and *errp, outcome "unknown" unless one was recorded). The go-sdk
// runs these handlers on goroutines with no recover: the panic ended the
// process (attack13).
func (g *Gateway) recoverAnswer(ctx context.Context, server, name string, adm *gate.Admission, res *mcp.Result, errp *error) {
	if v := recover(); v != nil {
		*res, *errp = nil, g.answerPanicked(ctx, Tool{Server: server, Tool: name}, adm, v).err
	}
}

// recoverHandler is deferred by the middleware around every request the
// go-sdk serves (method): the SDK runs its handlers on goroutines with no
// recover, so a panic its more specific recoveries (answerCall,
// recoverAnswer, holdOn's) do not take, such as one before a call's
// admission, ended the process and every held call with it (attack13).
// It is logged with its stack and answered as a JSON-RPC internal error
// in *res and *errp; nothing was admitted, so there is no outcome to
// record.
func (g *Gateway) recoverHandler(ctx context.Context, method string, res *mcp.Result, errp *error) {
	v := recover()
	if v == nil {
		return
	}
	g.log.ErrorContext(ctx, "panic while serving a request; answering an internal error", "method", method,
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	*res, *errp = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the gateway failed while serving this request"}
}
