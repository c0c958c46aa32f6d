package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// Raw tools/call on stdio upstream sessions (issue 13). The go-sdk client
// encodes each request through its jsonrpc2 machinery and decodes each
// answer four to five times, each decode allocating a 32 KiB buffer
// (docs/performance.md). On a stdio session toolgate therefore writes
// tools/call itself, as one line on the child's stdin, under an id the SDK
// never uses (a string "tg-<n>"; the SDK numbers its requests with
// integers), and the stdout guard (upstreamguard.go), which sees every line
// before the SDK, hands the answer line with such an id to the waiting call
// instead of to the SDK. Everything else the upstream sends (progress, log
// messages, server→client requests, list changes, answers to the SDK's own
// requests) still goes to the SDK unchanged.
//
// Wire order: what the upstream sent before an answer (a log message, a
// progress notification) reaches the call's agent before the result, as on
// the SDK's path. The guard counts the lines it hands to the SDK
// (rawCalls.passed) and the capture connection the messages the SDK has read
// through it (rawCalls.sdkRead, after routing each): an answer that arrives
// while lines before it are still on their way through the SDK is parked
// until they have been read.
//
// The raw path is not taken for sessions that speak 2026-07-28 or for a
// relayed round (relay2026.go): those go through the SDK's CallTool as
// before. HTTP upstreams have a raw path of their own (rawhttpcall.go),
// taken by callRaw.

// rawIDPrefix starts the string ids of raw calls; rawIDMarker is how it
// appears on the wire, which a line must contain to be looked at further.
const rawIDPrefix = "tg-"

var rawIDMarker = []byte(`"` + rawIDPrefix)

// errUpstreamGone is why waiting raw calls fail when the session's stdout
// ended or the session was closed.
var errUpstreamGone = errors.New("the upstream session ended")

// A rawAnswer is what a raw call got: its result (a JSON object, copied out
// of the line) or the JSON-RPC error to fail it with.
type rawAnswer struct {
	result json.RawMessage
	err    error // the upstream's *jsonrpc.Error, or the gateway's *verdictError
}

// A rawWaiter is one raw call waiting for its answer.
type rawWaiter struct {
	ch     chan rawAnswer // cap 1; receives the answer once
	origin *origin        // the agent request it serves; may be nil
	timer  *time.Timer    // call_timeout's, made once and reused with the waiter; stopped when idle
}

// rawBounds are what ends a raw call besides its caller's context and the
// session's end: the gateway's shutdown (ErrShutdown) and call_timeout
// (errCallTimeout). They stand in for a derived context per call (what
// upstream.callContext makes: two contexts, a timer context and an
// AfterFunc on the gateway's root, all registered with and removed from
// their parents), which the raw path does not need (issue 13).
type rawBounds struct {
	shutdown <-chan struct{} // closed when the gateway shuts down; nil: never
	timeout  time.Duration   // call_timeout; 0: none
}

// rawCalls are the raw calls of one stdio upstream session. Its methods
// are safe for concurrent use.
type rawCalls struct {
	w   io.Writer // the child's stdin (process.Write: one line per Write, serialised)
	max int       // bytes: limits.max_result_bytes
	log *slog.Logger

	passed atomic.Uint64 // lines the stdout guard handed to the SDK

	madeMarks // the guard's verdicts in place of answers the SDK reads (verdict.go)

	// free keeps the waiters of answered calls for the next ones: a
	// waiter whose answer was received is no longer in waiting and gets
	// no other send (deliver sends once, to a waiter it took out of
	// waiting), so its channel is empty and can be reused.
	free sync.Pool

	mu      sync.Mutex
	next    uint64                // guarded by mu: the number of the last id used
	pings   uint64                // guarded by mu: how many of those ids were health pings (ping)
	waiting map[uint64]*rawWaiter // guarded by mu
	read    uint64                // guarded by mu: messages the SDK has read (sdkRead)
	parked  []parkedAnswer        // guarded by mu: answers waiting for earlier lines, by after
	goneErr error                 // guarded by mu; set once, when gone is closed
	gone    chan struct{}         // closed when the session ended
}

// A parkedAnswer waits until the SDK has read the after lines that came
// before it.
type parkedAnswer struct {
	id    uint64
	a     rawAnswer
	after uint64
}

func newRawCalls(w io.Writer, max int, log *slog.Logger) *rawCalls {
	return &rawCalls{w: w, max: max, log: log, waiting: map[uint64]*rawWaiter{}, gone: make(chan struct{})}
}

// end fails every waiting call, and every later one, with
// errUpstreamGone (wrapping cause when there is one). It is idempotent.
// Answers that were parked are delivered first: they did arrive.
func (r *rawCalls) end(cause error) {
	r.mu.Lock()
	parked := r.parked
	r.parked = nil
	r.mu.Unlock()
	for _, p := range parked {
		r.deliver(p.id, p.a)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.goneErr != nil {
		return
	}
	r.goneErr = errUpstreamGone
	if cause != nil && !errors.Is(cause, io.EOF) {
		r.goneErr = fmt.Errorf("%w: %w", errUpstreamGone, cause)
	}
	close(r.gone)
}

// answer hands a to the call waiting for id once the SDK has read every
// line the guard passed it before a's line (see "Wire order" above). It
// reports whether a was handed over now to the only call that waited
// (deliver); false when it was parked.
func (r *rawCalls) answer(id uint64, a rawAnswer) (alone bool) {
	after := r.passed.Load()
	r.mu.Lock()
	if r.read < after {
		r.parked = append(r.parked, parkedAnswer{id: id, a: a, after: after})
		r.mu.Unlock()
		return false
	}
	r.mu.Unlock()
	return r.deliver(id, a)
}

// sdkRead records that the SDK has read (and toolgate has routed) one more
// message of the session, and delivers the answers that waited for it.
func (r *rawCalls) sdkRead() {
	r.mu.Lock()
	r.read++
	i := 0
	for i < len(r.parked) && r.parked[i].after <= r.read {
		i++
	}
	if i == 0 {
		r.mu.Unlock()
		return
	}
	ready := slices.Clone(r.parked[:i])
	r.parked = slices.Delete(r.parked, 0, i)
	r.mu.Unlock()
	for _, p := range ready {
		r.deliver(p.id, p.a)
	}
}

// count returns how many raw calls were sent (or tried).
func (r *rawCalls) count() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next - r.pings
}

// anyOrigin returns the agent request of some raw call waiting now, or nil.
func (r *rawCalls) anyOrigin() *origin {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.waiting {
		if w.origin != nil {
			return w.origin
		}
	}
	return nil
}

// call sends tools/call tool with the arguments args (a JSON object; empty
// means {}) and waits for its answer: the raw result object, or an error
// that is a *jsonrpc.Error (the upstream's, or a malformed or oversized
// answer's), the session's end (errUpstreamGone), or context.Cause(ctx).
// When ctx ends first it sends notifications/cancelled for the call; an
// answer that comes later is dropped. o is the agent request the call
// serves (for routing the upstream's log messages); it may be nil.
// progressToken, unless "", is sent as the call's _meta.progressToken; the
// upstream's progress for it is relayed from the wire (rawcap.go) before
// the answer is delivered.
func (r *rawCalls) call(ctx context.Context, tool string, args json.RawMessage, progressToken string, o *origin) (json.RawMessage, error) {
	return r.callBounded(ctx, rawBounds{}, tool, args, progressToken, o)
}

// callBounded is call, also ended by b: by the gateway's shutdown with the
// error ErrShutdown and by call_timeout with errCallTimeout (either way
// the upstream is sent notifications/cancelled, with the reason a
// cancelled or timed-out context gives: context.Canceled,
// context.DeadlineExceeded).
func (r *rawCalls) callBounded(ctx context.Context, b rawBounds, tool string, args json.RawMessage, progressToken string, o *origin) (json.RawMessage, error) {
	l, err := rawRequestLine(tool, args, progressToken)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	stepMark(18)
	return r.sendBounded(ctx, b, l.line, o, false)
}

// send is call with the request line mk writes for an id.
func (r *rawCalls) send(ctx context.Context, mk func(n uint64) []byte, o *origin) (json.RawMessage, error) {
	return r.sendBounded(ctx, rawBounds{}, mk, o, false)
}

// ping sends a ping (health.go) and waits for its answer, as call does.
// It is not counted as a call (count).
func (r *rawCalls) ping(ctx context.Context) error {
	_, err := r.sendBounded(ctx, rawBounds{}, rawPingLine, nil, true)
	return err
}

// rawPingLine is the ping request line with the raw id n.
func rawPingLine(n uint64) []byte {
	b := append(make([]byte, 0, 48), `{"jsonrpc":"2.0","id":"`+rawIDPrefix...)
	b = strconv.AppendUint(b, n, 10)
	return append(b, `","method":"ping"}`+"\n"...)
}

// sendBounded is send, also ended by b (see callBounded); ping says the
// line is a health ping.
func (r *rawCalls) sendBounded(ctx context.Context, b rawBounds, mk func(n uint64) []byte, o *origin, ping bool) (json.RawMessage, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	w, _ := r.free.Get().(*rawWaiter)
	if w == nil {
		w = &rawWaiter{ch: make(chan rawAnswer, 1)}
	}
	w.origin = o
	r.mu.Lock()
	if r.goneErr != nil {
		err := r.goneErr
		r.mu.Unlock()
		return nil, err
	}
	r.next++
	id := r.next
	if ping {
		r.pings++
	}
	r.waiting[id] = w
	r.mu.Unlock()

	var timeout <-chan time.Time
	if b.timeout > 0 {
		if w.timer == nil {
			w.timer = time.NewTimer(b.timeout)
		} else {
			w.timer.Reset(b.timeout) // stopped: see below
		}
		timeout = w.timer.C
	}
	// w.stopTimer on every way out, before w may go back to free (since
	// Go 1.23 a stopped timer's channel holds no stale value, so a reused
	// waiter's Reset starts clean). Not deferred: a deferred Stop could
	// run after another call took w from free and armed it.
	stepMark(19)
	if err := r.writeLine(ctx, b, mk(id), timeout); err != nil {
		w.stopTimer()
		if r.forget(id) && errors.Is(err, errLinePartlySent) {
			why := error(context.DeadlineExceeded)
			if ctx.Err() != nil {
				why = context.Cause(ctx)
			}
			r.cancel(id, why) // after the rest of the line (WriteAfterRest)
		}
		if ctx.Err() != nil && (errors.Is(err, errLineNotSent) || errors.Is(err, errLinePartlySent)) {
			return nil, context.Cause(ctx)
		}
		what := "tools/call"
		if ping {
			what = "ping"
		}
		return nil, fmt.Errorf("write %s to the upstream: %w", what, err)
	}
	stepMark(20)
	// A lean call's watches from now on, while it waits (leansent.go).
	o.armWatch()
	select {
	case a := <-w.ch:
		// Answered: deliver took w out of waiting and sent its one
		// answer, so w is free (only here: on the other ways out an
		// answer may still be on its way to w.ch).
		stepMark(21)
		w.origin = nil
		w.stopTimer()
		r.free.Put(w)
		if a.err != nil {
			return nil, a.err
		}
		return a.result, nil
	case <-r.gone:
		w.stopTimer()
		r.forget(id)
		select {
		case a := <-w.ch: // it was answered just before the end
			if a.err != nil {
				return nil, a.err
			}
			return a.result, nil
		default:
		}
		r.mu.Lock()
		err := r.goneErr
		r.mu.Unlock()
		return nil, err
	case <-ctx.Done():
		w.stopTimer()
		if r.forget(id) {
			r.cancel(id, ctx.Err())
		}
		return nil, context.Cause(ctx)
	case <-b.shutdown:
		w.stopTimer()
		if r.forget(id) {
			r.cancel(id, context.Canceled)
		}
		return nil, ErrShutdown
	case <-timeout:
		if r.forget(id) {
			r.cancel(id, context.DeadlineExceeded)
		}
		return nil, errCallTimeout
	}
}

// stopTimer stops w's call_timeout timer, if it has one.
func (w *rawWaiter) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// forget stops waiting for id and reports whether it was still waited for.
func (r *rawCalls) forget(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.waiting[id]
	delete(r.waiting, id)
	return ok
}

// cancel tells the upstream that raw call id was cancelled (why), as the
// SDK does for its own requests. It is best effort: an error is only
// logged.
func (r *rawCalls) cancel(id uint64, why error) {
	b, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": rawIDPrefix + strconv.FormatUint(id, 10), "reason": why.Error()},
	})
	if err == nil {
		if aw, ok := r.w.(afterRestWriter); ok && aw.WriteAfterRest(append(b, '\n')) {
			// The rest of a partly written line holds the write lock:
			// this line goes right after it, nobody waiting for it.
			return
		}
		if bw, ok := r.w.(boundedLineWriter); ok {
			// Best effort and bounded: a child that stopped reading
			// must not hold the cancelled call's caller (attack28).
			t := time.NewTimer(cancelBound)
			err = bw.WriteBounded(append(b, '\n'), time.Now().Add(cancelBound), nil, t.C)
			t.Stop()
		} else {
			_, err = r.w.Write(append(b, '\n'))
		}
	}
	if err != nil {
		r.log.Debug("notifications/cancelled for a raw call not sent", "err", err)
	}
}

// cancelBound is how long cancel waits for the child to take its line.
const cancelBound = 500 * time.Millisecond

// An afterRestWriter queues a line after the rest of a partly written one
// (process.WriteAfterRest, boundedwrite.go).
type afterRestWriter interface {
	WriteAfterRest(line []byte) bool
}

// A boundedLineWriter writes one line by a deadline (process.WriteBounded,
// boundedwrite.go).
type boundedLineWriter interface {
	WriteBounded(line []byte, deadline time.Time, stop <-chan struct{}, timeout <-chan time.Time) error
}

// writeLine writes a raw call's line within its bounds when r.w can
// (boundedLineWriter): by call_timeout (timeout is its timer's channel,
// nil without one) or ctx's deadline, waiting for the write lock at most
// until then or until ctx is done. Else it is one Write.
func (r *rawCalls) writeLine(ctx context.Context, b rawBounds, line []byte, timeout <-chan time.Time) error {
	bw, ok := r.w.(boundedLineWriter)
	if !ok {
		_, err := r.w.Write(line)
		return err
	}
	var deadline time.Time
	if b.timeout > 0 {
		deadline = time.Now().Add(b.timeout)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	return bw.WriteBounded(line, deadline, ctx.Done(), timeout)
}

// deliver hands a to the call waiting for id; an answer nobody waits for
// (it came after its call was cancelled, or it names no call) is dropped.
// It reports whether a went to a call that was the only one waiting: no
// other raw call of the session waits for an answer now.
func (r *rawCalls) deliver(id uint64, a rawAnswer) (alone bool) {
	r.mu.Lock()
	w := r.waiting[id]
	delete(r.waiting, id)
	alone = w != nil && len(r.waiting) == 0
	r.mu.Unlock()
	if w == nil {
		r.log.Debug("upstream answer to a raw call nobody waits for dropped (cancelled, or an unknown id)", "id", rawIDPrefix+strconv.FormatUint(id, 10))
		return false
	}
	w.ch <- a
	return alone
}

// divert takes the stdout line l when it answers a raw call (a response
// whose id is a "tg-" string), and reports whether it did (taken); every
// other line is left to the SDK. alone is whether the answer went at once
// to the only call that waited (answer). It parses only what it needs: a
// line that does not contain `"tg-` is not looked at further.
func (r *rawCalls) divert(l jsonLine) (taken, alone bool) {
	var scan idScanner
	if l.over {
		scan = l.scan
	} else {
		if !bytes.Contains(l.data, rawIDMarker) {
			return false, false
		}
		scan.feed(trimSpace(l.data))
	}
	if scan.method {
		return false, false // a request or notification of the upstream's
	}
	id, ok := parseRawID(scan.id)
	if !ok {
		return false, false
	}
	if l.over {
		r.log.Warn("upstream result larger than limits.max_result_bytes discarded; its call fails",
			"bytes", l.size, "limit", r.max, "id", string(scan.id))
		return true, r.answer(id, rawAnswer{err: resultTooLargeError(l.size, r.max)})
	}
	a, why := parseRawAnswer(trimSpace(l.data))
	if why != "" {
		r.log.Warn("upstream stdout: a malformed answer to a call; the call fails", "reason", why, "bytes", l.size)
	}
	return true, r.answer(id, a)
}

// parseRawID returns n for the raw JSON string "tg-<n>" (n a decimal
// uint64 without escapes).
func parseRawID(raw json.RawMessage) (uint64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < len(rawIDPrefix)+3 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return 0, false
	}
	s := raw[1 : len(raw)-1]
	if !bytes.HasPrefix(s, []byte(rawIDPrefix)) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s[len(rawIDPrefix):]), 10, 64)
	return n, err == nil
}

// parseRawAnswer reads the answer line of a raw call: its result, which
// must be an object, or its error, which must have an integer code and a
// string message (the rules the SDK's decoder applies, sdkDecodable).
// Anything else is a malformed answer, which fails only that call with
// the error the SDK path gets (brokenAnswerError); why then says what is
// wrong with it.
func parseRawAnswer(line []byte) (a rawAnswer, why string) {
	if r, ok := scanRawAnswer(line); ok {
		return rawAnswer{result: r}, ""
	}
	return parseRawAnswerDecoded(line)
}

// parseRawAnswerDecoded is parseRawAnswer by a decode with encoding/json:
// the answer for every line, and the only one for an error, a malformed
// answer or a line scanRawAnswer leaves to it.
func parseRawAnswerDecoded(line []byte) (a rawAnswer, why string) {
	malformed := func(why string) (rawAnswer, string) {
		return rawAnswer{err: brokenAnswerError(why)}, why
	}
	if jsonDepth(line) > maxJSONDepth {
		return malformed(fmt.Sprintf("nested deeper than %d levels", maxJSONDepth))
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    *int64          `json:"code"`
			Message *string         `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		if !json.Valid(line) {
			return malformed("not valid JSON")
		}
		return malformed("not a JSON-RPC response: " + err.Error())
	}
	if m.JSONRPC != "2.0" {
		return malformed(`"jsonrpc" is not "2.0"`)
	}
	if m.Error != nil {
		if m.Error.Code == nil || m.Error.Message == nil {
			return malformed("the error has no integer code or no string message")
		}
		return rawAnswer{err: &jsonrpc.Error{Code: *m.Error.Code, Message: *m.Error.Message, Data: m.Error.Data}}, ""
	}
	if len(m.Result) == 0 || m.Result[0] != '{' {
		return malformed("the result is not an object")
	}
	return rawAnswer{result: m.Result}, ""
}

// rawRequestLine checks args and returns the rawLine whose line writes the
// tools/call line of the raw call with id n: one line, ending in "\n",
// with _meta.progressToken unless progressToken is """.
// Arguments that span lines are compacted; arguments that are not a JSON
// object are refused (nothing is sent).
func rawRequestLine(tool string, args json.RawMessage, progressToken string) (rawLine, error) {
	return rawRequest(rawIDPrefix, tool, args, progressToken)
}

// rawRequest is rawRequestLine with the ids "<prefix><n>".
func rawRequest(prefix, tool string, args json.RawMessage, progressToken string) (rawLine, error) {
	var meta []byte
	if progressToken != "" {
		meta = appendJSONString([]byte(`{"progressToken":`), progressToken)
		meta = append(meta, '}')
	}
	return rawRequestMeta(prefix, tool, args, meta)
}

// rawRequestMeta is rawRequest with meta (a compact JSON object, or nil:
// none) as the call's _meta.
func rawRequestMeta(prefix, tool string, args json.RawMessage, meta []byte) (rawLine, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if args[0] != '{' || !json.Valid(args) {
		return rawLine{}, errors.New("the arguments are not a JSON object; nothing was sent")
	}
	if bytes.ContainsAny(args, "\r\n") {
		var b bytes.Buffer
		if err := json.Compact(&b, args); err != nil {
			return rawLine{}, err
		}
		args = b.Bytes()
	}
	return rawLine{prefix: prefix, tool: tool, args: args, meta: meta}, nil
}

// A rawLine is what the tools/call request line of one raw call is made
// of (rawRequestMeta): the id's prefix, the tool's name, the compact
// arguments object and the _meta object (nil: none). A value, not a
// closure over them: its line method, passed on as a method value, stays
// on the caller's stack (issue 13: the closure was one allocation per
// call).
type rawLine struct {
	prefix, tool string
	args         json.RawMessage
	meta         []byte
}

// line is the request line with the id "<prefix><n>", ending in '\n', in
// one allocation.
func (l rawLine) line(n uint64) []byte {
	// The line's fixed text is 103 bytes with the longest id and the
	// name's quotes, plus `,"_meta":` with meta: sized so that no append
	// below grows it (an escaped name aside).
	b := make([]byte, 0, 112+len(l.prefix)+len(l.tool)+len(l.args)+len(l.meta))
	b = append(b, `{"jsonrpc":"2.0","id":"`...)
	b = append(b, l.prefix...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, `","method":"tools/call","params":{"name":`...)
	b = appendJSONString(b, l.tool)
	b = append(b, `,"arguments":`...)
	b = append(b, l.args...)
	if l.meta != nil {
		b = append(b, `,"_meta":`...)
		b = append(b, l.meta...)
	}
	return append(b, "}}\n"...)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// rawApplies reports whether a tools/call in ctx on c goes the raw way: c
// is a stdio session that does not speak 2026-07-28, and the call is no
// relayed round.
func rawApplies(ctx context.Context, c *upConn) bool {
	return c.raw != nil && relayRoundFrom(ctx) == nil && !c.modernEra()
}

// callRaw sends tools/call tool with the raw arguments args to u without
// the SDK, on a stdio upstream (rawOnce) or a Streamable HTTP one
// (rawHTTPOnce; shared or per-agent session either way), and returns the
// raw result object as the upstream sent it, with the upstream's own
// server-info _meta entry dropped (notes §6). ok is false when the raw path
// does not apply (a session that speaks 2026-07-28, a 2026-07-28 agent, a
// relayed round) or an HTTP upstream answered 404 to the session id; then
// nothing ran and the caller uses upstream.call. The errors are those of
// upstream.call: the upstream's JSON-RPC error as a *jsonrpc.Error, every
// other failure (unavailable, timeout, cancelled, shutdown, an oversized
// or malformed answer) as a *callFailure carrying its dispatch outcome.
func (u *upstream) callRaw(ctx context.Context, tool string, args json.RawMessage) (result json.RawMessage, ok bool, err error) {
	return u.callRawProgress(ctx, tool, args, nil)
}

// callRawProgress is callRaw with prog's gateway token, when prog is not
// nil, sent as the call's _meta.progressToken: the upstream's progress for
// it is relayed from the wire, rawcap.go and ssetee.go, before the result
// is returned, from the session it was sent on alone (progress.go).
func (u *upstream) callRawProgress(ctx context.Context, tool string, args json.RawMessage, prog *callProgress) (result json.RawMessage, ok bool, err error) {
	o := originFrom(ctx)
	if (o != nil && o.modern) || relayRoundFrom(ctx) != nil {
		return nil, false, nil
	}
	var c *upConn
	ac, err := u.agentConnFor(o)
	switch {
	case err != nil:
		return nil, true, u.unavailable(ctx, tool, u.errText(err)+"; nothing was sent to it", approval.OutcomeTransportError, err)
	case ac != nil:
		o.armWatch() // opening its session can wait (leansent.go)
		defer ac.track(o)()
		if c, err = ac.session(ctx); err != nil {
			return nil, true, u.unopened(ctx, tool, "its session for this agent could not be opened; nothing was sent to it", err)
		}
	default:
		if c, err = u.session(); err != nil {
			return nil, true, u.unavailable(ctx, tool, u.errText(err)+"; nothing was sent to it", approval.OutcomeTransportError, err)
		}
	}
	stepMark(16)
	var raw json.RawMessage
	var progressToken string
	if prog != nil && (rawHTTPApplies(ctx, c) || rawApplies(ctx, c)) {
		ctx, progressToken = u.sendingProgress(ctx, c, prog), prog.upstreamToken
	}
	switch {
	case rawHTTPApplies(ctx, c):
		o.armWatch() // the POST can wait from its first byte (leansent.go)
		var sent bool
		if raw, sent, err = u.rawHTTPOnce(ctx, c, tool, args, progressToken); !sent {
			return nil, false, nil // 404: upstream.call re-initialises and sends it
		}
	case rawApplies(ctx, c):
		stepMark(17)
		raw, err = u.rawOnce(ctx, c, tool, args, progressToken)
	default:
		return nil, false, nil
	}
	if raw, ok, err = u.rawResult(tool, raw, err); err == nil {
		// Passed on unread: refused when the SDK path would refuse it
		// (resultshape.go).
		if why := callResultShape(raw); why != "" {
			return nil, true, u.notCallResult(ctx, tool, errors.New(why))
		}
	}
	return raw, ok, err
}

// rawResult is the end of a raw call of tool that sent it (callRaw,
// callModernRaw): err as it came, else the result without the upstream's
// server info in _meta (dropServerInfo; a result it cannot read fails
// the call as a tool error).
func (u *upstream) rawResult(tool string, raw json.RawMessage, err error) (json.RawMessage, bool, error) {
	if err != nil {
		return nil, true, err
	}
	if bytes.Contains(raw, []byte(mcp.MetaKeyServerInfo)) {
		if raw, err = dropServerInfo(raw); err != nil {
			return nil, true, &callFailure{msg: fmt.Sprintf("upstream %q: tool %q: the result could not be read: %s", u.name, tool, u.errText(err)), outcome: approval.OutcomeToolError, cause: err}
		}
	}
	return raw, true, nil
}

// rawOnce is callOnce's raw path: it sends the call on c's raw calls with
// call_timeout and the gateway's shutdown applied, and turns a failure into
// what callError makes of it.
func (u *upstream) rawOnce(ctx context.Context, c *upConn, tool string, args json.RawMessage, progressToken string) (json.RawMessage, error) {
	// Bounded without a derived context (rawBounds): the error of a call
	// ended by shutdown or call_timeout is its cause, as callContext's
	// context would have had it.
	raw, err := c.raw.callBounded(ctx, u.rawBounds(), tool, args, progressToken, originFrom(ctx))
	if err != nil {
		return nil, u.callError(ctx, err, c, tool, err)
	}
	return raw, nil
}

// rawBounds are the bounds of a raw call on u: the gateway's shutdown and
// call_timeout (as callContext applies them).
func (u *upstream) rawBounds() rawBounds {
	return rawBounds{shutdown: u.g.root.Done(), timeout: u.cfg.CallTimeout}
}

// dropServerInfo returns the result object raw without the server-info
// entry of its _meta (and without _meta when that was its only entry).
func dropServerInfo(raw json.RawMessage) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	meta, ok := fields["_meta"]
	if !ok || string(meta) == "null" {
		return raw, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil {
		return nil, err
	}
	if _, ok := m[mcp.MetaKeyServerInfo]; !ok {
		return raw, nil
	}
	delete(m, mcp.MetaKeyServerInfo)
	if len(m) == 0 {
		delete(fields, "_meta")
	} else {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		fields["_meta"] = b
	}
	return json.Marshal(fields)
}

// decodeCallResult builds the CallToolResult of the raw result object raw
// with one decode of encoding/json (the SDK's decoder allocates 32 KiB per
// decode; docs/performance.md): structuredContent and the values of _meta
// stay raw JSON, so their numbers pass through unchanged (1e400, 2^63; notes
// §6), and the upstream's own server-info _meta entry is dropped, as
// withRawNumbers and decodeResult do. Text content, nearly all content in
// practice, is built here; a content list with any other type is decoded
// by the SDK (one more decode, of the list alone). Members are read by
// their exact keys, as the SDK's decoder reads them (resultMembersOf; a
// content item with a key encoding/json would match case-insensitively is
// left to the SDK too). An error means raw is not a tools/call result.
func decodeCallResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	w, err := resultMembersOf(raw)
	if err != nil {
		return nil, err
	}
	res := &mcp.CallToolResult{}
	switch string(w.isError) {
	case "", "null", "false":
	case "true":
		res.IsError = true
	default:
		return nil, errors.New("isError is not a boolean")
	}
	if len(w.structuredContent) > 0 && string(w.structuredContent) != "null" {
		res.StructuredContent = json.RawMessage(w.structuredContent)
	}
	if len(w.meta) > 0 && string(w.meta) != "null" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(w.meta, &m); err != nil {
			return nil, fmt.Errorf("_meta: %w", err)
		}
		res.Meta = rawMeta(m)
	}
	if len(w.content) == 0 || string(w.content) == "null" {
		// The SDK's decode makes an absent or null list an empty one,
		// which its encoder writes as [] (the schema wants a list).
		res.Content = []mcp.Content{}
		return res, nil
	}
	content, err := decodeContent(w.content)
	if err != nil {
		return nil, err
	}
	res.Content = content
	return res, nil
}

// rawMeta is m as an mcp.Meta of raw JSON values without the server-info
// entry; nil when nothing remains.
func rawMeta(m map[string]json.RawMessage) mcp.Meta {
	var meta mcp.Meta
	for k, v := range m {
		if k == mcp.MetaKeyServerInfo {
			continue
		}
		if meta == nil {
			meta = mcp.Meta{}
		}
		meta[k] = v
	}
	return meta
}

// decodeContent decodes the content list raw of a tools/call result (see
// decodeCallResult).
func decodeContent(raw json.RawMessage) ([]mcp.Content, error) {
	var items []struct {
		Type        string                     `json:"type"`
		Text        string                     `json:"text"`
		Annotations *mcp.Annotations           `json:"annotations"`
		Meta        map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	folds := contentKeysFold(raw)
	out := make([]mcp.Content, 0, len(items))
	for _, it := range items {
		if it.Type != "text" || folds {
			// Another type, or a key only encoding/json would match: the
			// SDK knows how each is built.
			var r mcp.CallToolResult
			b := make([]byte, 0, len(raw)+12)
			b = append(append(append(b, `{"content":`...), raw...), '}')
			if err := json.Unmarshal(b, &r); err != nil {
				return nil, err
			}
			return r.Content, nil
		}
		var meta mcp.Meta
		for k, v := range it.Meta {
			if meta == nil {
				meta = mcp.Meta{}
			}
			meta[k] = v
		}
		out = append(out, &mcp.TextContent{Text: it.Text, Annotations: it.Annotations, Meta: meta})
	}
	return out, nil
}
