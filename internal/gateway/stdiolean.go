package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// The stdio lean front (branch stdio41): a stdio agent's plain tools/call
// line is answered by the gateway itself, as the HTTP lean front answers a
// POST (leanfront.go), instead of going through the SDK's server session,
// which decodes it several times and dispatches it through its handler
// chain. The stdin guard (stdioguard.go) offers each line it passes; a
// line the front takes never reaches the SDK. Everything else —
// initialize, lists, other methods, a call before initialize was
// answered, a _meta of any kind (approval resume, progress token, a
// 2026-07-28 request's protocol metadata), task, inputResponses or
// requestState, the policy tool, an unknown tool, a tool whose upstream
// speaks 2026-07-28, a line the decode doubts — goes to the SDK unchanged.
//
// A taken call goes through the one gate as the SDK path's does
// (Gateway.toolCall, Gateway.admitCall: the policy, the session's policy,
// the admission slots, holding it for approval, the audit record), is
// dispatched with dispatchLean (the upstream's raw result bytes passed
// through) and recorded with recordLean, on a goroutine of its own, and
// its answer is written as one line with one Write of the session's
// lockedWriter, which also carries the SDK's lines: a line is never split
// or interleaved. The upstream's log messages and its requests to the
// agent (sampling, elicitation, roots) go through the SDK's session (the
// call's origin has the session and no lean stream), whose lines the
// agent answers through the SDK as before. A notifications/cancelled
// naming a lean call in flight cancels it (context.Canceled) and goes no
// further; the end of the agent's input cancels every lean call in flight
// with the read's error, as the SDK's connection cancels its own.

// A stdioLean is the lean front of one stdio session.
type stdioLean struct {
	g *Gateway
	// ctx is the session's context (ServeStdio's, with the principal and
	// the session id) without its cancellation: each call's context
	// derives from it. As for the SDK's handlers, the end of ServeStdio's
	// ctx reaches a call through the call registry (ErrShutdown), not as
	// context.Canceled.
	ctx  context.Context //nolint:containedctx // the session's, for calls read by the guard, which has no context of its own
	p    approval.Principal
	sid  string
	out  *lockedWriter
	owed *answers // the session's answers owed (answers.go)

	ss atomic.Pointer[mcp.ServerSession] // set once Connect returned
	// noPlain: plain calls go to the SDK (Gateway.noStdioLean, tests);
	// the Tasks front still takes its lines.
	noPlain bool

	// modern: a line read so far may set the session's revision to
	// 2026-07-28 (revisionModern); only the stdin guard's reads touch it,
	// one at a time.
	modern bool

	mu    sync.Mutex
	calls map[string]context.CancelCauseFunc // guarded by mu: lean calls in flight, by canonicalID
	ended error                              // guarded by mu: the read's error once the input ended
	wg    sync.WaitGroup                     // the calls' goroutines
}

func newStdioLean(ctx context.Context, g *Gateway, p approval.Principal, sid string, out *lockedWriter, owed *answers) *stdioLean {
	return &stdioLean{g: g, ctx: context.WithoutCancel(ctx), p: p, sid: sid, out: out, owed: owed, calls: map[string]context.CancelCauseFunc{}}
}

// offer takes line, one JSON-RPC message checkMethod passed with method
// (its method as the SDK reads it, escapes decoded), when the front
// serves it: a plain tools/call (answered later, by a goroutine of
// its own), or a notifications/cancelled naming a lean call in flight. It
// reports false, having done nothing, for any other line. line is valid
// only during the call.
func (l *stdioLean) offer(line, method []byte) bool {
	if l.task(line, method, l.revisionModern(line, method)) {
		return true // the Tasks front's (stdiotasks.go)
	}
	switch string(method) {
	case "tools/call":
		return !l.noPlain && l.call(line)
	case "notifications/cancelled":
		return l.cancel(line)
	}
	return false
}

// call serves line when it is a plain tools/call of an initialized
// session (see offer).
func (l *stdioLean) call(line []byte) bool {
	g := l.g
	ss := l.ss.Load()
	// The SDK serves a call once initialize was received (go-sdk v1.8.0,
	// ServerSession.handle). A session whose revision is 2026-07-28 (taken
	// from a request's _meta, as a 2026-07-28 agent sends no initialize)
	// stays the SDK's even for a call without _meta: its results carry
	// resultType (answersModern), which the front's raw answer does not;
	// so does one the guard noted as such, which the SDK has not handled
	// yet (revisionModern: server/discover names 2026-07-28).
	if ss == nil || ss.InitializeParams() == nil || sessionModern(ss) || l.modern || g.root.Err() != nil {
		return false
	}
	// The decode keeps parts of its input (the id, the arguments): a copy
	// of the line, which the reader reuses.
	m, t, tok, ok := g.plainCall(bytes.Clone(line))
	if !ok || tok != nil {
		l.note(false)
		return false
	}
	l.note(true)
	ctx, done, ok := l.track(m.ID)
	if !ok {
		return true
	}
	l.wg.Add(1)
	go l.serve(ctx, done, ss, m, t) //nolint:contextcheck // the session's context, as the SDK's handlers get
	return true
}

// serve admits, answers and writes the answer of the lean call m.
func (l *stdioLean) serve(ctx context.Context, done func(), ss *mcp.ServerSession, m leanRequest, t Tool) {
	defer l.wg.Done()
	defer l.owed.done() // after the write below
	b := l.answer(ctx, ss, m, t)
	// The id is free before the answer leaves (track).
	done()
	_, _ = l.out.Write(b) // a failure is the session's (lockedWriter)
}

// answer is the answer line of the lean call m: the gate's refusal, or the
// dispatch's result, recorded. A panic of it is answered as the 2025 lean
// front answers one (answerPanicked).
func (l *stdioLean) answer(ctx context.Context, ss *mcp.ServerSession, m leanRequest, t Tool) (b []byte) {
	g := l.g
	var adm *gate.Admission
	defer func() {
		if v := recover(); v != nil {
			b = appendLine(leanResponse(m.ID, nil, g.answerPanicked(ctx, t, adm, v).err))
		}
	}()
	call := g.toolCall(l.p, t, m.Params.Arguments, nil)
	adm = g.admitCall(ctx, &call)
	if adm.Replay != nil {
		res, err := replayResult(*adm)
		return appendLine(leanResponse(m.ID, res, err))
	}
	if !adm.Allowed {
		return appendLine(leanResponse(m.ID, refusalResult(*adm), nil))
	}
	// What the gate decided on (Options.Rewrite may have changed the
	// agent's bytes), as the SDK path dispatches it.
	args := call.Arguments
	if adm.Arguments != nil {
		args = adm.Arguments
	}
	o := g.newOrigin(ctx, ss, l.p, t.Server)
	d := &dispatch{tool: t, args: args, origin: o, call: &call}
	if g.dispatchHook != nil {
		g.dispatchHook()
	}
	raw, res, err := g.dispatchLean(ctx, d)
	o.finish() // the upstream's log messages go out before the answer
	raw, res, err = g.recordLean(ctx, t, adm, d, raw, res, err)
	if raw == nil {
		return appendLine(leanResponse(m.ID, res, err))
	}
	if bytes.ContainsAny(raw, "\r\n") {
		// A line end inside the JSON would end the line: compact it, as
		// a re-encode would; JSON that cannot be is not passed on.
		var c bytes.Buffer
		if json.Compact(&c, raw) != nil {
			return appendLine(leanResponse(m.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the upstream's result is not valid JSON"}))
		}
		raw = c.Bytes()
	}
	id := bytes.TrimSpace(m.ID)
	return append(appendRawResponse(make([]byte, 0, rawResponseSize(id, raw)+1), id, raw), '\n')
}

// cancel serves a notifications/cancelled line naming a lean call in
// flight (see offer), read as the SDK reads it (cancelledID); one that
// carries an id still goes on to the SDK, which answers it.
func (l *stdioLean) cancel(line []byte) bool {
	key, call, ok := cancelledID(line)
	if !ok {
		return false
	}
	l.mu.Lock()
	c := l.calls[key]
	l.mu.Unlock()
	if c == nil {
		return false
	}
	c(context.Canceled)
	// A line with an id is answered by the SDK, as without the front.
	return !call
}

// inputEnded cancels the lean calls in flight with err, the read's error
// at the end of the agent's input (io.EOF when it closed it), and every
// one taken after it, as the SDK's connection cancels its calls.
func (l *stdioLean) inputEnded(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = err
	for _, c := range l.calls {
		c(err)
	}
}

// close cancels the lean calls still in flight (cause) and waits for
// their goroutines.
func (l *stdioLean) close(cause error) {
	l.mu.Lock()
	for _, c := range l.calls {
		c(cause)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// note tells the test hook, if any, whether a tools/call line the front
// decoded is served by it.
func (l *stdioLean) note(served bool) {
	if l.g.leanHook != nil {
		l.g.leanHook(served)
	}
}

// appendLine is b with a line end.
func appendLine(b []byte) []byte { return append(b, '\n') }
