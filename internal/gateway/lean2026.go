package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/mcpwire"
)

// The lean front for 2026-07-28 requests (issue 13). A plain tools/call
// POST of the current revision (no session: each request stands alone) is
// decoded once and decided by the one gate (Gate.AdmitUnlessHeld) without
// the SDK's stateless handler (serveStateless: an ephemeral server session
// per POST, its reader goroutine, a jsonrpc2 connection and the request
// decoded into maps). An allowed call is dispatched as the tool handler
// dispatches a 2026-07-28 agent's call (the upstream's session for such
// agents, modernconn.go, with the agent's client capabilities as the relay
// round), a denied one refused; both answered with the status, headers and
// bytes the SDK path writes (TestLeanModernAnswersAsTheSDK). A call the gate
// would hold is held by the front (leanhold.go, leanpark.go), or, with a
// Gatekeeper that cannot admit in place, handed to the SDK path with the
// decision taken (carrier.prior); everything that is not plain goes to
// the SDK path: see plainModern. A call with a progress token gets its
// progress on its own response (lean2026prog_test.go).
// See docs/architecture.md, "The lean front".

// serveLeanModern answers the 2026-07-28 POST r (body read already) of
// principal p when it is a plain tools/call (served true); a call the gate
// would hold is returned as held, for ServeHTTP to hold and answer
// (leanHold), when the Gatekeeper admits in place. Otherwise nothing is
// written: prior is the gate's hand-off when the gate was asked (a call it
// would hold), for the SDK path to use instead of asking again.
func (f *httpFront) serveLeanModern(w http.ResponseWriter, r *http.Request, body []byte, p approval.Principal) (served bool, prior *gate.HandOff, held *leanHold) {
	la, isLean := f.g.gk.(leanAdmitter)
	if !isLean || f.g.root.Err() != nil || !modernLeanHeaders(r) {
		f.note(false)
		return false, nil, nil
	}
	m, t, relay, tok, ok := f.plainModern(r.Header, body)
	if !ok {
		f.note(false)
		return false, nil, nil
	}
	// With PropagateRequestCancellation the SDK ends the handler's context
	// as soon as the POST ends: the caller's cancellation (context.Canceled),
	// recorded as such, with no grace as on a 2025 session.
	ctx, cancel := context.WithCancelCause(context.WithValue(leanModernBase(r), modernKey{}, true))
	stop := context.AfterFunc(r.Context(), func() { cancel(context.Canceled) })
	var hw *heartbeatWriter
	var prog *callProgress
	if tok != nil {
		// The agent's progress (keep-alives while held, the upstream's
		// once dispatched) goes on this POST's response as an event
		// stream, as the SDK's stateless handler sends it; an answer with
		// nothing before it goes alone as application/json
		// (writeModernJSON). Never armed: no SSE comments on 2026 POSTs.
		hw = newHeartbeatWriter(w, f.opts.HeartbeatFirst, f.opts.Heartbeat)
		hw.deferStream()
		w = hw
		// A failed write is the client gone: cancelled at once, as the
		// POST's end cancels it.
		prog = newLeanProgress(ctx, hw, tok, f.g.log, func() { cancel(context.Canceled) }) //nolint:contextcheck // as AdmitUnlessHeld below: the call's own context (leanModernBase)
	}
	call := f.g.toolCall(p, t, m.Params.Arguments, prog)
	adm := new(gate.Admission)
	// Decided unless held; an agent session's call after its session's
	// policy is read (admitbound.go).
	h := f.g.admitUnlessHeld(ctx, la, &call, adm, nil) //nolint:contextcheck // the call's own context: r's span without r's other values (leanModernBase)
	if h != nil && !f.holdsLean() {
		stop()
		cancel(nil)
		f.note(false)
		return false, h, nil
	}
	f.note(true)
	// As bindRequest does for the SDK path: Close and shutdown cancel it.
	untrack := f.g.calls.add("", p.ID, cancel)
	if f.g.root.Err() != nil {
		cancel(ErrShutdown)
	}
	// Without a token nothing is written until the answer, which is all
	// the response carries: it goes as application/json
	// (writeModernJSON), so no header is set before it. With one, only
	// the agent's progress may go before it (see above).
	if h != nil {
		// The gate would hold it: the front holds it (leanhold.go; parked
		// off the connection on HTTP/1.1, leanpark.go), with the decision
		// AdmitUnlessHeld took. No SSE comments on 2026 POSTs: without a
		// token nothing is written until the answer, with one the gate's
		// keep-alives.
		call.Prior = h
		// Held, it keeps of the request only the id to answer with (the
		// arguments are the call's; the _meta, name and method strings go).
		l := &leanHold{f: f, ctx: ctx, mw: w, p: p, m: leanRequest{ID: m.ID}, t: t, call: &call, relay: relay, modern: true,
			later: leanCleanups{untrack: untrack, stop: stop, cancel: cancel}}
		if hw != nil {
			// Its keep-alives stream (parked: leanstream.go).
			l.mw, l.w, l.prog = nil, hw, prog
		}
		return true, nil, l
	}
	writeModernAnswer(w, f.g.impl, m.ID, f.g.answerModernSafe(ctx, p, t, &call, adm, relay, prog)) //nolint:contextcheck // as above
	untrack()
	stop()
	cancel(nil)
	return true, nil, nil
}

// leanModernBase is the base of a lean call's own context (2026-07-28,
// and a 2025-era session's since branch held24):
// r's span, when it has one, and none of r's other values, which nothing
// on the call's path reads (the principal is passed as such). On
// context.WithoutCancel(r.Context()) a held call kept net/http's request
// and connection contexts (their cancelCtx and Done channels, the local
// address, the principal's value: ≈ 0.6 KB) for as long as it was held
// (docs/performance.md, "heldmem4").
func leanModernBase(r *http.Request) context.Context {
	if span := trace.SpanFromContext(r.Context()); span.SpanContext().IsValid() {
		return trace.ContextWithSpan(context.Background(), span)
	}
	return context.Background()
}

// modernLeanHeaders reports whether r's headers are ones the SDK's
// stateless handler accepts without a word for a tools/call whose body
// the front checks next: the DNS-rebinding check it makes on a loopback
// listener, JSON in, JSON and event streams accepted,
// MCP-Protocol-Version 2026-07-28, no Last-Event-ID, and exactly one
// Mcp-Method (tools/call) and one Mcp-Name (checked against the body in
// plainModern) and no Mcp-Param-* headers (SEP-2243).
func modernLeanHeaders(r *http.Request) bool {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && addrLoopback(la, sdkLoopback) && !sdkLoopback(r.Host) {
		return false
	}
	h := r.Header
	if baseMedia(h.Get("Content-Type")) != "application/json" || !acceptsJSONAndEvents(h.Values("Accept")) {
		return false
	}
	if vs := h.Values("Mcp-Protocol-Version"); len(vs) != 1 || vs[0] != modernVersion {
		return false
	}
	if len(h.Values("Last-Event-ID")) != 0 || len(h.Values("Mcp-Name")) != 1 {
		return false
	}
	if vs := h.Values("Mcp-Method"); len(vs) != 1 || vs[0] != "tools/call" {
		return false
	}
	for k := range h {
		if strings.HasPrefix(k, mcpwire.HeaderParamPrefix) {
			return false
		}
	}
	return true
}

// baseMedia is a Content-Type's media type as the SDK reads it: before any
// ";", trimmed, lower-cased.
func baseMedia(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// sdkLoopback reports whether addr (host or host:port) is a loopback
// address by the rule of the SDK's DNS-rebinding check (go-sdk v1.8.0,
// internal/util.IsLoopback).
func sdkLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// plainModern decodes body and reports whether it is one plain 2026-07-28
// tools/call of a catalog tool: Mcp-Name equal to the tool's name, a
// _meta with only the protocol version (2026-07-28), the client's
// capabilities and info and a progress token the front gives back as the
// SDK path does (tok: modernToken; no log level, approval resume or other
// key), no task, inputResponses or requestState, a client that
// declared neither the Tasks extension nor (on a gateway answering held
// calls with rounds) URL elicitation, a tool that runs as a task only or
// binds headers to parameters, or the policy tool. relay carries the client's
// capabilities upstream, as the middleware's relay round does.
func (f *httpFront) plainModern(h http.Header, body []byte) (m leanRequest, t Tool, relay *relayRound, tok json.RawMessage, ok bool) {
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return m, Tool{}, nil, nil, false
	}
	// The scanner's struct is the decode's (leanscan.go); scanned says
	// every key of the body was exact, which a progress token needs.
	m, scanned, err := decodeLeanRequestScanned(body)
	if err != nil || m.JSONRPC != "2.0" || m.Method != "tools/call" || m.Params == nil ||
		classifyID(m.ID) != idOK || m.Params.Meta == nil || m.Params.Task != nil ||
		m.Params.InputResponses != nil || m.Params.RequestState != nil || checkArguments(m.Params.Arguments) != nil ||
		m.Params.Name == PolicyToolName || h.Get("Mcp-Name") != m.Params.Name {
		return m, Tool{}, nil, nil, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(m.Params.Meta, &meta) != nil {
		return m, Tool{}, nil, nil, false
	}
	var version string
	for k, v := range meta {
		switch k {
		case mcpwire.MetaProtocolVersion:
			if json.Unmarshal(v, &version) != nil || version != modernVersion {
				return m, Tool{}, nil, nil, false
			}
		case mcpwire.MetaClientCapabilities, mcpwire.MetaClientInfo:
			if b := bytes.TrimSpace(v); len(b) == 0 || b[0] != '{' {
				return m, Tool{}, nil, nil, false
			}
		case progressTokenKey:
			// Taken as leanprog.go takes a 2025 call's (modernToken).
			if tok, ok = modernToken(scanned, m.Params.Meta); !ok {
				return m, Tool{}, nil, nil, false
			}
		default:
			return m, Tool{}, nil, nil, false
		}
	}
	rawCaps, ok := meta[mcpwire.MetaClientCapabilities]
	if version == "" || !ok {
		return m, Tool{}, nil, nil, false
	}
	caps, err := mcpwire.ParseClientCapabilities(rawCaps)
	if err != nil || caps.Has(mcpwire.TasksExtension) || (caps.ElicitationURL && f.g.opts.MRTR != nil) {
		return m, Tool{}, nil, nil, false
	}
	t, ok = f.g.catalog.lookup(m.Params.Name)
	if !ok || t.TaskSupport == TaskSupportRequired || t.headerParams {
		return m, t, nil, nil, false
	}
	if f.g.ups[t.Server] == nil {
		return m, t, nil, nil, false
	}
	// The capabilities as the agent sent them (valid JSON: the body
	// decoded; their own copy, made by the decode of meta), not decoded
	// into maps: a held call keeps its relay
	// round until it is answered, and the round only re-encodes them
	// upstream (a json.RawMessage marshals as itself, as the rounds of a
	// direct task carry them: continueDirectTask).
	return m, t, &relayRound{caps: rawCaps}, tok, true
}

// progressTokenKey is the _meta member of a request's progress token.
const progressTokenKey = "progressToken"

// modernToken returns the progress token of a 2026-07-28 call's _meta,
// meta (its bytes as sent), when the lean front gives it back exactly as
// the SDK path would: the body was read by the validating scanner (every
// key of it exact: scanned), no key of meta is escaped, "progressToken"
// is not repeated, and its value is one leanTokenValue takes. ok false
// keeps the call on the SDK path.
func modernToken(scanned bool, meta json.RawMessage) (json.RawMessage, bool) {
	if !scanned {
		return nil, false
	}
	return metaToken(meta, false)
}

// answerModern is the answer to the lean 2026-07-28 call (decided as
// *adm), as the middleware (answerCall) and the tool handler (handle)
// make it: a refusal, or the dispatch upstream with the relay round, whose
// outcome it records. On a 2025-era upstream session the call goes the raw
// way and a plain result is answered from its bytes (modernraw.go). A
// decoded result is returned with its resultType unset: writeModernResult
// adds it, as the SDK does.
//
// prog, when not nil, is the agent's progress channel (a call with a
// progress token): the upstream's progress for the call is relayed on it,
// under the agent's token, before the answer, as on the SDK path (handle).
func (g *Gateway) answerModern(ctx context.Context, p approval.Principal, t Tool, call *gate.Call, adm *gate.Admission, relay *relayRound, prog *callProgress) modernAnswer {
	if adm.Replay != nil {
		// As answerCall does (only a call naming its approval gets one;
		// a plain call names none).
		res, err := replayResult(*adm)
		return modernAnswer{res: res, err: err}
	}
	if !adm.Allowed {
		return modernAnswer{res: refusalResult(*adm)}
	}
	args := call.Arguments
	if adm.Arguments != nil {
		args = adm.Arguments
	}
	if g.dispatchHook != nil {
		g.dispatchHook()
	}
	u := g.ups[t.Server]
	o := g.newOrigin(ctx, nil, p, t.Server)
	d := &dispatch{tool: t, args: args, origin: o, relay: relay, call: call, progress: prog}
	if prog != nil {
		g.routes.start(prog)
		defer prog.finishOnce(g.routes) // a panic of the dispatch: its relay still stops
	}
	if ans, raw, ok := g.dispatchModernRaw(ctx, u, d); ok {
		o.finish()
		if prog != nil {
			// What the upstream sent before its result goes out before it.
			prog.finishOnce(g.routes)
		}
		oc := d.outcome
		if oc == approval.OutcomeNone {
			oc = outcome(ans.res, ans.err)
		}
		rec := recorded(*adm, ans.res, ans.err)
		if ans.result != nil {
			// The upstream's bytes, as answerLean keeps a raw result.
			rec = gate.Recorded{}
			if adm.ApprovalID != "" {
				rec.Result = raw
			}
		}
		finishModern(ctx, adm, oc, rec)
		return ans
	}
	res, err := u.call(withRelayRound(withOrigin(ctx, o), relay), t.Tool, args, prog)
	o.finish()
	if prog != nil {
		prog.finishOnce(g.routes)
	}
	if err == nil {
		res, err = g.relayResult(*d.call, res)
	}
	res, err = dispatched(d, res, err)
	oc := d.outcome
	if oc == approval.OutcomeNone {
		oc = outcome(res, err)
	}
	finishModern(ctx, adm, oc, recorded(*adm, res, err))
	return modernAnswer{res: res, err: err}
}

// finishModern records outcome oc of the call decided as *adm, with rec
// (empty unless it ran under an approval).
func finishModern(ctx context.Context, adm *gate.Admission, oc approval.Outcome, rec gate.Recorded) {
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer fcancel()
	adm.FinishOnce(fctx, oc, rec)
}

// writeModernResult writes the answer to id of a 2026-07-28 tools/call as
// the SDK's stateless handler writes it (go-sdk v1.8.0): the result with
// the server's impl in _meta (withServerInfo) and its resultType ("input_required" when it carries inputRequests, else
// "complete"; a result with both content and inputRequests is the SDK's
// internal error) as the JSON-RPC response the stream's one "message"
// event carries, written alone as application/json (writeModernJSON:
// nothing goes before it); a JSON-RPC error likewise, except that method-not-found, invalid-params, unsupported
// protocol version and missing client capability get the SEP-2575 status
// (404 or 400) and the error as a plain JSON body.
func writeModernResult(w http.ResponseWriter, impl *mcp.Implementation, id json.RawMessage, res *mcp.CallToolResult, err error) {
	if err == nil && res == nil {
		err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "no result"}
	}
	if err == nil && res.InputRequests != nil && len(res.Content) > 0 {
		res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
	}
	if err != nil {
		we := wireError(err)
		b, merr := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *jsonrpc.Error  `json:"error"`
		}{"2.0", bytes.TrimSpace(id), we})
		if merr != nil {
			b = []byte(`{"jsonrpc":"2.0","id":` + string(bytes.TrimSpace(id)) + `,"error":{"code":-32603,"message":"cannot encode the error"}}`)
		}
		if status := modernErrorStatus(we.Code); status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(b) //nolint:gosec // G705: a JSON-RPC error encoded by json.Marshal, served as application/json
			return
		}
		writeModernJSON(w, b)
		return
	}
	rb, merr := json.Marshal(withServerInfo(answerResult(res), impl))
	if merr != nil || len(rb) < 2 || rb[len(rb)-1] != '}' {
		writeModernResult(w, impl, id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "cannot encode the result"})
		return
	}
	writeModernResultBytes(w, id, rb, res.InputRequests != nil)
}

// writeModernResultBytes writes the answer to id whose result is rb (a
// JSON object without resultType) as writeModernResult does:
// resultType "input_required" when inputRequired, else "complete", after
// the result's own members.
func writeModernResultBytes(w http.ResponseWriter, id json.RawMessage, rb []byte, inputRequired bool) {
	rt := `"resultType":"complete"}`
	if inputRequired {
		rt = `"resultType":"input_required"}`
	}
	id = bytes.TrimSpace(id)
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":,}`)+len(id)+len(rb)+len(rt))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	// The SDK encodes resultType after the result's own fields.
	b = append(b, rb[:len(rb)-1]...)
	if len(rb) > 2 {
		b = append(b, ',')
	}
	b = append(b, rt...)
	b = append(b, '}')
	writeModernJSON(w, b)
}

// writeModernJSON writes msg, the JSON-RPC response to a lean 2026-07-28
// call, which is all its POST's response carries (nothing is written
// before it on these paths), as the SDK's handler answers with
// StreamableHTTPOptions.JSONResponse: 200, application/json, no-cache,
// and with its Content-Length, in one write. (The SDK's stateless handler
// answers as an event stream with the message as its one event: the same
// JSON-RPC bytes, which a client must take either way.)
//
// On the response of a call with a progress token (a heartbeatWriter,
// left undecided) the answer goes that way only when nothing was written
// before it; after keep-alives or the upstream's progress it is the event
// stream's last event, as the SDK's handler writes it (writeLastSSE).
func writeModernJSON(w http.ResponseWriter, msg []byte) {
	if _, ok := w.(*heartbeatWriter); ok {
		writeLastSSE(w, msg)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(msg)))
	_, _ = w.Write(msg) //nolint:gosec // G705: a JSON-RPC response served as application/json, never HTML
}

// modernErrorStatus is the HTTP status SEP-2575 gives a 2026-07-28
// request's JSON-RPC error code (0: none; the error goes on the stream),
// as the SDK maps it (go-sdk v1.8.0 extractErrorStatus).
func modernErrorStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

// answerResult is a copy of res's exported fields, without the
// resultType the SDK's decode keeps from a 2026-era upstream's result
// (CallToolResult.MarshalJSON writes it): writeModernResultBytes adds the
// answer's own, once (TestModernAnswerOfADecodedResultHasOneResultType).
// TestAnswerResultCopiesEveryExportedField fails when the SDK adds a field.
func answerResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Meta:              res.Meta,
		Content:           res.Content,
		StructuredContent: res.StructuredContent,
		IsError:           res.IsError,
		InputRequests:     res.InputRequests,
		RequestState:      res.RequestState,
	}
}

// withServerInfo is res with impl as _meta["io.modelcontextprotocol/serverInfo"]
// unless res names one (SEP-2575: a server identifies itself in each
// result; the SDK's annotateServerInfo). res's own _meta map is not
// changed (a refusal's is the admission's).
func withServerInfo(res *mcp.CallToolResult, impl *mcp.Implementation) *mcp.CallToolResult {
	if impl == nil {
		return res
	}
	if _, ok := res.Meta[mcp.MetaKeyServerInfo]; ok {
		return res
	}
	out := *res
	out.Meta = make(mcp.Meta, len(res.Meta)+1)
	maps.Copy(out.Meta, res.Meta)
	out.Meta[mcp.MetaKeyServerInfo] = impl
	return &out
}
