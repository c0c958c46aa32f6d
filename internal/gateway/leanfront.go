package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// The lean front answers a plain, allowed (or denied) tools/call on a
// 2025-era session itself, without the SDK's server side: the request is
// decoded once (the SDK decodes it four to five times, each with a 32 KiB
// buffer; docs/performance.md), goes through the one gate
// ([gate.Gate.AdmitUnlessHeld]) and is dispatched through upstream.call
// like the tool handler's. Everything else — batches, other methods, a
// _meta other than a lone progress token (leanprog.go; approval resume,
// protocol metadata), task,
// inputResponses or requestState, the policy tool, an unknown tool, a
// session not (yet) usable, a header the SDK would check — is handed to
// the SDK path unchanged. A plain call the gate would hold is held by the
// front itself (leanhold.go), or, with a Gatekeeper that cannot admit in
// place, handed to the SDK path with the policy decision already taken
// (carrier.prior). Plain 2026-07-28 requests (no session) are served by
// lean2026.go. See docs/architecture.md, "The lean front".

// A leanRequest is what the lean front decodes of a POST body.
type leanRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  *leanParams     `json:"params"`
}

// leanParams are the params of a leanRequest.
type leanParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	Meta           json.RawMessage `json:"_meta"`
	Task           json.RawMessage `json:"task"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
}

// leanAdmitter is a Gatekeeper that can decide a call unless it would hold
// it ([gate.Gate.AdmitUnlessHeld]).
type leanAdmitter interface {
	AdmitUnlessHeld(ctx context.Context, c *gate.Call, adm *gate.Admission) *gate.HandOff
}

// leanHook, when set (tests), is told of each POST the lean front answered
// (true) or handed to the SDK path (false) after reading its body.
type leanHook func(served bool)

// serveLean answers the POST r of principal p on session s when it is a
// plain tools/call (served true); a call the gate would hold is returned
// as held, for ServeHTTP to hold and answer (leanHold). Otherwise the
// request goes to the SDK path (ServeHTTP puts its body back: lb.restore),
// and prior is the gate's hand-off when the gate was asked.
// lb holds r's body.
func (f *httpFront) serveLean(w *heartbeatWriter, r *http.Request, lb *leanBody, p approval.Principal, s *leanSession) (served bool, prior *gate.HandOff, held *leanHold) {
	if !leanHeaders(r.Header, s.version) || !s.isInitialized() || s.principal != p.ID {
		return false, nil, nil
	}
	stepMark(5)
	body, err := lb.get()
	if err != nil {
		answerBodyError(w, err)
		return true, nil, nil
	}
	stepMark(6)
	m, t, tok, ok := f.plainCall(body)
	stepMark(7)
	la, isLean := f.g.gk.(leanAdmitter)
	if !ok || !isLean || f.g.root.Err() != nil {
		f.note(false)
		return false, nil, nil
	}
	key := canonicalID(m.ID)
	// The deferred cleanups are the held call's when the front holds it:
	// they run once it is answered (leanCleanups.settle).
	var later leanCleanups
	defer func() { later.settle(held) }()
	// The call's own context keeps r's span and nothing else of r's
	// (leanModernBase): a held call no longer keeps net/http's request and
	// connection contexts (docs/performance.md, "held24").
	ctx, cancel := context.WithCancelCause(leanModernBase(r))
	later.cancel = cancel
	untrackID, ok := s.track(key, cancel)
	if !ok {
		f.note(true)
		writeRPCError(w, http.StatusBadRequest, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "duplicate in-flight request ID " + string(bytes.TrimSpace(m.ID))})
		return true, nil, nil
	}
	later.untrackID = untrackID
	stepMark(8)
	// As bindRequest does for the SDK path: a POST that ends before its
	// call means the client went away (after the grace an explicit cancel
	// gets to arrive in). Armed, with the heartbeats, once the call can
	// wait (leansent.go).
	watch := leanWatch{end: r.Context(), cancel: cancel, grace: f.opts.DropGrace, hb: w}
	stepMark(9)
	var prog *callProgress
	if tok != nil {
		// The agent's progress goes on this POST's stream, written by the
		// front (leanprog.go); a failed write is the client gone, as the
		// POST's end is.
		prog = newLeanProgress(ctx, w, tok, f.g.log, func() { //nolint:contextcheck // the call's own context: r's span without r's other values (leanModernBase)
			time.AfterFunc(f.opts.DropGrace, func() { cancel(ErrClientGone) })
		})
	}
	call := f.g.toolCall(p, t, m.Params.Arguments, prog)
	adm := new(gate.Admission)
	stepMark(10)
	// Decided unless held; an agent session's call after its session's
	// policy is read (admitbound.go), with the watch on the POST's end
	// armed first: a client that leaves while the read waits cancels it.
	h := f.g.admitUnlessHeld(ctx, la, &call, adm, watch.watchEnd) //nolint:contextcheck // as above
	stepMark(11)
	if h != nil && !f.holdsLean() {
		if watch.stop != nil {
			watch.stop()
		}
		f.note(false)
		return false, h, nil
	}
	f.note(true)
	// The headers wait for the first write: an answer that is all the
	// response carries goes as application/json (heartbeatWriter.answerJSON),
	// anything before it starts the event stream.
	w.deferStream()
	// As bindRequest does for the SDK path: tracked per session (DELETE,
	// Close and shutdown cancel it).
	later.untrack = f.g.calls.add(s.ss.ID(), p.ID, cancel)
	if f.g.root.Err() != nil {
		cancel(ErrShutdown)
	}
	if h != nil {
		// The gate would hold it: the front holds it on this goroutine
		// (leanhold.go), with the decision AdmitUnlessHeld took.
		call.Prior = h
		watch.watchEnd()
		later.stop = watch.stop
		return true, nil, &leanHold{f: f, ctx: ctx, w: w, p: p, s: s, m: m, t: t, call: &call, prog: prog}
	}
	stepMark(12)
	f.answerLean(ctx, w, p, s, m, t, &call, adm, prog, &watch) //nolint:contextcheck // as above
	later.stop = watch.stop
	// A JSON answer leaves now, its id free first; the other cleanups
	// after it (leanflush.go).
	later.freeID()
	w.sendJSON()
	stepMark(23)
	return true, nil, nil
}

// note tells the test hook, if any, whether a POST whose body was read is
// served by the lean front, before it is answered.
func (f *httpFront) note(served bool) {
	if f.hook != nil {
		f.hook(served)
	}
}

// plainCall decodes body and reports whether it is one plain tools/call
// of a tool in the catalog (see serveLean); tok is its progress token, as
// sent, when its _meta carries one and nothing else (leanProgressToken;
// only for a body the scanner read, whose keys are all exact), nil when it
// has no _meta.
func (f *httpFront) plainCall(body []byte) (m leanRequest, t Tool, tok json.RawMessage, ok bool) {
	return f.g.plainCall(body)
}

// plainCall is httpFront.plainCall; the stdio lean front (stdiolean.go)
// asks it too.
func (g *Gateway) plainCall(body []byte) (m leanRequest, t Tool, tok json.RawMessage, ok bool) {
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return leanRequest{}, Tool{}, nil, false
	}
	m, scanned, err := decodeLeanRequestScanned(body)
	stepMark(24)
	if err != nil || m.JSONRPC != "2.0" || m.Method != "tools/call" || m.Params == nil ||
		classifyID(m.ID) != idOK || m.Params.Task != nil ||
		m.Params.InputResponses != nil || m.Params.RequestState != nil || checkArguments(m.Params.Arguments) != nil ||
		m.Params.Name == PolicyToolName {
		return m, Tool{}, nil, false
	}
	if m.Params.Meta != nil {
		if !scanned {
			return m, Tool{}, nil, false
		}
		if tok, ok = leanProgressToken(m.Params.Meta); !ok {
			return m, Tool{}, nil, false
		}
	}
	stepMark(25)
	t, ok = g.catalog.lookup(m.Params.Name)
	stepMark(26)
	if !ok {
		return m, t, nil, false
	}
	if u := g.ups[t.Server]; u == nil || u.answersRounds() {
		return m, t, nil, false
	}
	return m, t, tok, true
}

// answersRounds reports whether a call to u may be answered with a
// 2026-07-28 input_required round (its session speaks that revision), or
// whether u has no session now. Only the SDK path turns such a round into
// a 2025 agent's classic requests and keeps the upstream's requestState
// inside toolgate (relay2026.go), so those calls are not lean.
func (u *upstream) answersRounds() bool {
	c, err := u.session()
	return err != nil || c.modernEra()
}

// asksForInput reports whether an upstream's tools/call result is an
// input_required round (it carries inputRequests or a requestState).
func asksForInput(res *mcp.CallToolResult, raw json.RawMessage) bool {
	if res != nil {
		return res.InputRequests != nil || res.RequestState != ""
	}
	if !bytes.Contains(raw, []byte(`"inputRequests"`)) && !bytes.Contains(raw, []byte(`"requestState"`)) {
		return false
	}
	var r struct {
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  json.RawMessage `json:"requestState"`
	}
	return json.Unmarshal(raw, &r) != nil || r.InputRequests != nil || r.RequestState != nil
}

// errAskedForInput is the answer of a lean call whose upstream asked for
// input anyway (a session that changed revision under the call, or an
// upstream breaking its revision): the round and its state are not passed
// on, as the SDK path would not pass them on to a 2025 agent.
const errAskedForInput = "the upstream asked for more input during this call, which toolgate cannot relay on this path; nothing of its request was passed on. Send the call again"

// leanHeaders reports whether a POST's headers are ones the SDK path would
// accept without a word for a session that negotiated version: JSON in,
// JSON and event streams accepted, the negotiated MCP-Protocol-Version, and
// none of the headers it checks against the body (Mcp-Method, Mcp-Name) or
// refuses on a POST (Last-Event-ID).
//
// The headers are looked up by their canonical keys, as net/http stores
// them (h.Get with another spelling canonicalises it, an allocation per
// POST), and the common Content-Type is compared before it is parsed.
func leanHeaders(h http.Header, version string) bool {
	if ct := h["Content-Type"]; len(ct) == 0 || ct[0] != "application/json" {
		var v string
		if len(ct) > 0 {
			v = ct[0]
		}
		if mt, _, err := mime.ParseMediaType(v); err != nil || mt != "application/json" {
			return false
		}
	}
	if !acceptsJSONAndEvents(h["Accept"]) {
		return false
	}
	pv := h["Mcp-Protocol-Version"]
	return version != "" && len(pv) > 0 && pv[0] == version && version < modernVersion &&
		len(h["Mcp-Method"]) == 0 && len(h["Mcp-Name"]) == 0 && len(h["Last-Event-Id"]) == 0
}

// acceptsJSONAndEvents reports whether the Accept header values accept
// both JSON and event streams by the rule the SDK's Streamable HTTP handler
// (go-sdk v1.8.0) applies: comma-separated media ranges, parameters and
// case ignored, application/json or application/* for JSON,
// text/event-stream or text/* for event streams, */* for both.
func acceptsJSONAndEvents(values []string) bool {
	var jsonOK, eventsOK bool
	for _, v := range values {
		for r := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(r, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "*/*":
				jsonOK, eventsOK = true, true
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				eventsOK = true
			}
		}
	}
	return jsonOK && eventsOK
}

// startLeanStream sets the headers of the event stream a lean call is
// answered on, as the SDK's Streamable HTTP handler sets them.
func startLeanStream(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Connection", "keep-alive")
}

// answerLean answers the lean call m (decided by the gate as *adm, at once
// or after holding it): a refusal (a denial, or a held call's rejection,
// expiry, cancellation or max-hold pending answer, with the approval's
// _meta), or the dispatch upstream, whose outcome it records.
//
// prog, when not nil, is the agent's progress channel (leanprog.go): the
// upstream's progress for the call is relayed on it, under the agent's
// token, before the answer, as on the SDK path (handle).
//
// watch, when not nil, holds the call's watches not armed yet: a
// dispatched call arms them once it can wait (leansent.go), and watch
// says on return whether they were (its stop). With nil, the heartbeats
// are armed before the dispatch.
func (f *httpFront) answerLean(ctx context.Context, w *heartbeatWriter, p approval.Principal,
	s *leanSession, m leanRequest, t Tool, call *gate.Call, adm *gate.Admission, prog *callProgress, watch *leanWatch) {
	g := f.g
	defer func() {
		// A panic of the answer fails closed, as on the 2026-07-28 path
		// (answerfail.go): net/http would recover it by dropping the
		// connection, leaving the record without an outcome.
		if v := recover(); v != nil {
			writeLeanResult(w, m.ID, nil, g.answerPanicked(ctx, t, adm, v).err)
		}
	}()
	if adm.Replay != nil {
		// As answerCall does (only a call naming its approval gets one;
		// a plain call names none).
		res, err := replayResult(*adm)
		writeLeanResult(w, m.ID, res, err)
		return
	}
	if !adm.Allowed {
		writeLeanResult(w, m.ID, refusalResult(*adm), nil)
		return
	}
	// The call's origin, log writer, stream, dispatch and watches, in one
	// allocation (issue 13: they were five, with the level's closure).
	parts := new(leanCallParts)
	if watch != nil {
		// Heartbeats while it runs, as bindRequest arms them for the SDK
		// path, from when it can wait (leansent.go).
		parts.watch = *watch
		defer func() { *watch = parts.watch }()
	} else {
		w.arm()
	}
	stepMark(13)
	// What the gate decided on (Options.Rewrite may have changed the
	// agent's bytes), as the SDK path dispatches it.
	args := call.Arguments
	if adm.Arguments != nil {
		args = adm.Arguments
	}
	o := &parts.origin
	g.initOrigin(o, ctx, s.ss, p, t.Server)
	if watch != nil {
		o.watch = &parts.watch
	}
	parts.stream = leanStream{w: w, s: s}
	parts.log = leanLog{w: w, levels: g.levels, ss: s.ss, stream: &parts.stream}
	o.lean = &parts.log
	d := &parts.dispatch
	d.tool, d.args, d.origin, d.call, d.progress = t, args, o, call, prog
	stepMark(14)
	if g.dispatchHook != nil {
		g.dispatchHook()
	}
	if prog != nil {
		g.routes.start(prog)
		defer prog.finishOnce(g.routes) // a panic of the dispatch: its relay still stops
	}
	raw, res, err := g.dispatchLean(ctx, d)
	stepMark(27)
	o.finish()
	if prog != nil {
		// What the upstream sent before its result goes out before it.
		prog.finishOnce(g.routes)
	}
	o.lean.stream.close()
	raw, res, err = g.recordLean(ctx, t, adm, d, raw, res, err)
	if raw != nil {
		writeLeanRaw(w, m.ID, raw)
		return
	}
	writeLeanResult(w, m.ID, res, err)
}

// recordLean records the outcome of the lean call d, admitted as adm and
// dispatched (dispatchLean) with the answer raw, or res and err, and
// returns the answer to give the agent: raw, the upstream's result bytes
// as they came, when it has them; else res or err. A result that is an
// input round (asksForInput) is answered with an isError result instead
// and recorded as a tool error.
func (g *Gateway) recordLean(ctx context.Context, t Tool, adm *gate.Admission, d *dispatch,
	raw json.RawMessage, res *mcp.CallToolResult, err error) (json.RawMessage, *mcp.CallToolResult, error) {
	if err == nil && asksForInput(res, raw) {
		g.log.WarnContext(ctx, "upstream answered a lean call with an input round; refused", "server", t.Server, "tool", t.Tool)
		raw, res, d.outcome = nil, errorResult(errAskedForInput), approval.OutcomeToolError
	}
	fctx, fcancel := finishContext(ctx, adm)
	defer fcancel()
	if raw != nil {
		// The upstream's result bytes pass through as they came.
		oc := approval.OutcomeOK
		if rawIsError(raw) {
			oc = approval.OutcomeToolError
		}
		var rec gate.Recorded
		if adm.ApprovalID != "" {
			rec.Result = raw
		}
		stepMark(28)
		adm.FinishOnce(fctx, oc, rec) // once: a panic in it must not make the caller's recovery write it again
		stepMark(22)
		return raw, nil, nil
	}
	oc := d.outcome
	if oc == approval.OutcomeNone {
		oc = outcome(res, err)
	}
	adm.FinishOnce(fctx, oc, recorded(*adm, res, err))
	return nil, res, err
}

// dispatchLean sends the admitted lean call d upstream, as the tool
// handler does (handle). A stdio or HTTP upstream's answer comes back as
// the result's raw bytes (upstream.callRaw), passed through without a
// decode; otherwise (callRaw does not apply, or any failure) as
// upstream.call gives it.
func (g *Gateway) dispatchLean(ctx context.Context, d *dispatch) (json.RawMessage, *mcp.CallToolResult, error) {
	u := g.ups[d.tool.Server]
	if u == nil {
		return nil, nil, errUnknownTool(d.tool.Name)
	}
	ctx = withOrigin(ctx, d.origin)
	stepMark(15)
	raw, ok, err := u.callRawProgress(ctx, d.tool.Tool, d.args, d.progress)
	if ok {
		if err == nil {
			return repairUTF8(raw), nil, nil // rawutf8.go
		}
		res, err := dispatched(d, nil, err)
		return nil, res, err
	}
	d.origin.armWatch() // the SDK's way can wait (leansent.go)
	res, err := u.call(ctx, d.tool.Tool, d.args, d.progress)
	res, err = dispatched(d, res, err)
	return nil, res, err
}

// rawIsError reports whether a raw tools/call result says isError: true
// as the SDK's decoder reads it: the member named exactly "isError"
// (escapes resolved, the last of repeated keys winning) is true, in a
// valid JSON object. A result with no "isError" and no \u escape (the
// only other way to write the key) is answered from its bytes without
// reading it; others are read by the scanner (rawscan.go), without a
// decode.
func rawIsError(raw json.RawMessage) bool {
	if !bytes.Contains(raw, []byte(`"isError"`)) && !bytes.Contains(raw, []byte(`\u`)) {
		return false
	}
	r, err := resultMembersOf(raw)
	return err == nil && string(r.isError) == "true"
}

// writeLeanRaw writes the answer to id with the upstream's raw result, as
// writeLeanResult does for a decoded one.
func writeLeanRaw(w http.ResponseWriter, id json.RawMessage, raw json.RawMessage) {
	id = bytes.TrimSpace(id)
	if bytes.ContainsAny(raw, "\r\n") {
		// A line end inside the JSON (whitespace a stdio line may carry)
		// would end the SSE data line: compact it, as a re-encode would.
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err == nil {
			raw = c.Bytes()
		}
	}
	// The whole event in one buffer (writeLastSSE's frame around the
	// response), written once, from eventBufs: a ResponseWriter keeps
	// none of what it is given (io.Writer's rule), so the buffer is free
	// again once written (issue 13: one allocation of the result's size
	// per call before).
	bp, _ := eventBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := slices.Grow((*bp)[:0], len(sseMessagePrefix+sseMessageSuffix)+rawResponseSize(id, raw))
	b = append(b, sseMessagePrefix...)
	b = appendRawResponse(b, id, raw)
	b = append(b, sseMessageSuffix...)
	writeLastEvent(w, b)
	*bp = b
	putEventBuf(bp)
}

// rawResponseSize is the length of appendRawResponse's response.
func rawResponseSize(id, raw json.RawMessage) int {
	return len(`{"jsonrpc":"2.0","id":,"result":}`) + len(id) + len(raw)
}

// appendRawResponse appends the JSON-RPC response to id (trimmed) whose
// result is raw, as is, to b.
func appendRawResponse(b []byte, id, raw json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, raw...)
	return append(b, '}')
}

// writeLeanResult writes the answer to id as the SDK writes it on an event
// stream: one "message" event with the JSON-RPC response (errors as the
// SDK turns a handler's error into one).
func writeLeanResult(w http.ResponseWriter, id json.RawMessage, res *mcp.CallToolResult, err error) {
	writeLastSSE(w, leanResponse(id, res, err))
}

// leanResponse is the JSON-RPC response to id with res, or err as the SDK
// turns a handler's error into one, encoded as the SDK encodes it.
func leanResponse(id json.RawMessage, res *mcp.CallToolResult, err error) []byte {
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: bytes.TrimSpace(id)}
	if err != nil {
		resp.Error = wireError(err)
	} else {
		resp.Result = res
	}
	b, merr := json.Marshal(resp)
	if merr != nil {
		resp.Result, resp.Error = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "cannot encode the result: " + merr.Error()}
		b, _ = json.Marshal(resp)
	}
	return b
}

// sseMessagePrefix and sseMessageSuffix frame a JSON-RPC message as one
// "message" event of an event stream.
const (
	sseMessagePrefix = "event: message\ndata: "
	sseMessageSuffix = "\n\n"
)

// writeLastSSE writes data, a call's JSON-RPC response, as the response's
// last message (writeLastEvent).
func writeLastSSE(w http.ResponseWriter, data []byte) {
	b := make([]byte, 0, len(sseMessagePrefix+sseMessageSuffix)+len(data))
	b = append(b, sseMessagePrefix...)
	b = append(b, data...)
	b = append(b, sseMessageSuffix...)
	writeLastEvent(w, b)
}

// writeLastEvent writes ev, a call's JSON-RPC response framed as a
// "message" event (sseMessagePrefix, the response, sseMessageSuffix), as
// the response's last message. When nothing of the response went out yet
// (a heartbeatWriter still undecided: deferStream), the response alone is
// the whole answer, as application/json with its Content-Length
// (heartbeatWriter.answerJSON); else it is the event stream's last event.
// Either way it is not flushed: the handler returns right after, and
// net/http then sends a short response in one write with its
// Content-Length (a flush first would make it a chunked stream: two
// writes and a terminating chunk).
func writeLastEvent(w http.ResponseWriter, ev []byte) {
	if hw, ok := w.(*heartbeatWriter); ok && hw.answerJSON(ev[len(sseMessagePrefix):len(ev)-len(sseMessageSuffix)]) {
		return
	}
	_, _ = w.Write(ev) //nolint:gosec // G705: a JSON-RPC event served as text/event-stream (startLeanStream), never HTML
}

// writeSSE writes data as one "message" event and flushes.
func writeSSE(w http.ResponseWriter, data []byte) {
	var buf bytes.Buffer
	buf.Grow(len(sseMessagePrefix+sseMessageSuffix) + len(data))
	buf.WriteString(sseMessagePrefix)
	buf.Write(data)
	buf.WriteString(sseMessageSuffix)
	_, _ = w.Write(buf.Bytes())
	_ = http.NewResponseController(w).Flush()
}

// wireError is the JSON-RPC error the SDK answers for a handler's err: the
// error itself when it is one, else its text with the code of a wrapped
// one (0 when none).
func wireError(err error) *jsonrpc.Error {
	if je, ok := err.(*jsonrpc.Error); ok { //nolint:errorlint // the error itself, as the SDK's toWireError; a wrapped one below
		return je
	}
	we := &jsonrpc.Error{Message: err.Error()}
	var wrapped *jsonrpc.Error
	if errors.As(err, &wrapped) {
		we.Code = wrapped.Code
	}
	return we
}

// writeRPCError answers a POST with status and a JSON-RPC error to id, as
// the SDK does for the errors it finds before serving a request.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *jsonrpc.Error) {
	// The id as JSON (a []byte would be encoded as a base64 string: the
	// duplicate in-flight id's error named "MQ==" for id 1); nil is null.
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(bytes.TrimSpace(id)), "error": e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// A leanBody is the body of a POST of a lean session, read at most once
// by the lean front's handlers (cancelLean, replyLean, serveLean) however
// many of them look at it, and put back on the request only when it goes
// on to the SDK path (restore).
type leanBody struct {
	w   http.ResponseWriter
	r   *http.Request
	max int64 // bytes: limits.max_request_bytes

	read bool
	body []byte
	err  error
}

// answerBodyError answers a POST whose body could not be read (err from
// leanBody.get) as the SDK answers it (it would read the same bytes).
func answerBodyError(w http.ResponseWriter, err error) {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		return
	}
	http.Error(w, "failed to read body", http.StatusBadRequest)
}

// leanBodyPrealloc bounds, in bytes, the buffer leanBody.get makes from a
// request's Content-Length before any of the body has come: a client's
// word alone must not cost the gateway more (a larger body grows as it
// arrives, as io.ReadAll grows it).
const leanBodyPrealloc = 64 << 10

// get returns the body, read on the first call through
// http.MaxBytesReader (max bytes; a longer body is an *http.MaxBytesError),
// in one buffer of its Content-Length when that is known and at most
// leanBodyPrealloc. On an error the body is the bytes read before it.
func (b *leanBody) get() ([]byte, error) {
	if b.read {
		return b.body, b.err
	}
	b.read = true
	if n := b.r.ContentLength; n >= 0 && n <= min(b.max, leanBodyPrealloc) {
		// At most its Content-Length, which is within max: the body
		// itself, without the MaxBytesReader (its allocation) that could
		// not fire.
		b.body = make([]byte, n)
		var k int
		k, b.err = io.ReadFull(b.r.Body, b.body)
		b.body = b.body[:k]
	} else {
		b.body, b.err = io.ReadAll(http.MaxBytesReader(b.w, b.r.Body, b.max))
	}
	if b.err == nil {
		// Read to its end: closed, net/http need not read the rest of it
		// before the answer (its response's discard copy, issue 13).
		_ = b.r.Body.Close()
	}
	return b.body, b.err
}

// restore puts the body, if it was read, back on the request for the SDK
// path: its bytes, then the error reading it ended with, if any.
func (b *leanBody) restore() {
	switch {
	case !b.read:
	case b.err != nil:
		b.r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b.body), errReader{b.err}))
	default:
		b.r.Body = io.NopCloser(bytes.NewReader(b.body))
	}
}

// errReader is a reader that fails with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// A leanLog sends an upstream's log messages about a lean call on the
// call's own event stream, at the level the agent session asked for (none
// until it asked, as the SDK does).
type leanLog struct {
	w http.ResponseWriter
	// The agent session's own logging level: level when set (tests),
	// else levels' for ss.
	level  func() (mcp.LoggingLevel, bool)
	levels *levels
	ss     *mcp.ServerSession
	// stream carries the upstream's requests to the agent about the call
	// (leanask.go).
	stream *leanStream
}

// leanCallParts is what answerLean keeps for one dispatched call.
type leanCallParts struct {
	origin   origin
	log      leanLog
	stream   leanStream
	dispatch dispatch
	watch    leanWatch
}

func (l *leanLog) send(p *mcp.LoggingMessageParams) {
	var lvl mcp.LoggingLevel
	var ok bool
	if l.level != nil {
		lvl, ok = l.level()
	} else {
		lvl, ok = l.levels.explicit(l.ss)
	}
	if !ok || levelRank(p.Level) < levelRank(lvl) {
		return
	}
	if b, err := marshalWire(struct {
		JSONRPC string                    `json:"jsonrpc"`
		Method  string                    `json:"method"`
		Params  *mcp.LoggingMessageParams `json:"params"`
	}{"2.0", "notifications/message", p}); err == nil {
		writeSSE(l.w, b)
	}
}
