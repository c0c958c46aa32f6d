package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Raw tools/call on Streamable HTTP upstream sessions (issue 13). The
// go-sdk client encodes each request through its jsonrpc2 machinery, runs
// a goroutine per response body and decodes each answer several times
// (docs/performance.md). On a 2025-era HTTP session toolgate therefore
// POSTs tools/call itself, under an id the SDK never uses ("tg-h<n>"; the
// SDK numbers its requests with integers), with the headers the SDK would
// send on that session (MCP spec 2025-11-25, "Streamable HTTP"):
// Content-Type and Accept, Mcp-Session-Id of the session (when the
// upstream gave one), MCP-Protocol-Version as negotiated, and, added by the
// session's captureRoundTripper, the configured headers. The POST goes
// through the session's own http.Client, so it shares the connection pool
// sized for the upstream (upstreamIdleConns) and the tap on event streams
// (sseTee): progress is relayed, log messages are routed to the call's
// agent and an event over limits.max_result_bytes is replaced by an error
// answer before this file reads the stream.
//
// Read here: the JSON body (at most limits.max_result_bytes) or the events
// of the stream up to the answer with the call's id. The answer's result
// bytes pass through unchanged; a JSON-RPC error is the upstream's error,
// as on the SDK path. A server→client request on the stream (sampling,
// elicitation, roots) is put to the call's agent (origin.ask, as the SDK
// path's relayRequest does) and the answer POSTed back; list-change,
// resource-update and elicitation-complete notifications go where the
// SDK's handlers send them.
//
// Not raw (callRaw reports ok=false and nothing was sent): sessions that
// speak 2026-07-28 (multi round-trip results), relayed rounds, 2026-07-28
// agents. A 404 to the session id means the upstream never processed the
// call: callRaw reports ok=false as well, and upstream.call's 404
// handling re-initialises the session and sends it again.

// rawHTTPIDPrefix starts the ids of raw HTTP calls.
const rawHTTPIDPrefix = rawIDPrefix + "h"

// cancelNotifyTimeout bounds the POST of notifications/cancelled after a
// raw HTTP call was cancelled, and of the answer to a server→client
// request.
const cancelNotifyTimeout = 5 * time.Second

// errSessionMissing404 reports that the upstream answered 404 to the
// session id: nothing was processed.
var errSessionMissing404 = errors.New("the upstream answered 404 to the session id")

// rawHTTPApplies reports whether a tools/call in ctx on c goes the raw HTTP
// way: c is an HTTP session opened by toolgate at a 2025 protocol version,
// and the call is no relayed round.
func rawHTTPApplies(ctx context.Context, c *upConn) bool {
	return c.hc != nil && c.url != "" && relayRoundFrom(ctx) == nil && !c.modernEra() && c.cs.InitializeResult() != nil
}

// rawHTTPOnce sends tools/call tool with the arguments args on the HTTP
// session c without the SDK (progressToken, unless "", as its
// _meta.progressToken) and returns the raw result object. sent is
// false when the upstream answered 404 to the session id (nothing ran; the
// caller falls back to upstream.call, which re-initialises). The errors
// are those of callOnce (callError).
func (u *upstream) rawHTTPOnce(ctx context.Context, c *upConn, tool string, args json.RawMessage, progressToken string) (raw json.RawMessage, sent bool, err error) {
	l, err := rawRequest(rawHTTPIDPrefix, tool, args, progressToken)
	if err != nil {
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	cctx, done := u.callContext(ctx)
	defer done()
	n := u.rawHTTPSeq.Add(1)
	id := rawHTTPIDPrefix + strconv.FormatUint(n, 10)
	body := l.line(n)
	raw, err = u.postRawCall(cctx, c, id, body)
	switch {
	case errors.Is(err, errSessionMissing404) && ctx.Err() == nil:
		return nil, false, nil
	case err != nil:
		if cctx.Err() != nil {
			// In the background: an upstream slow to accept it does not
			// hold the call's answer past call_timeout.
			why := context.Cause(cctx)
			u.background(func() { u.sendRawCancel(ctx, c, id, why) })
		}
		return nil, true, u.callError(ctx, context.Cause(cctx), c, tool, err)
	}
	return raw, true, nil
}

// A rawHTTPHead is what every raw POST on one upstream session shares,
// built once per session (upConn.rawHead): the endpoint parsed once and the
// headers the SDK's client sends on that session. Its URL and Header are
// never changed once built, and every request of the session refers to
// them: the round trippers under the session copy a request before they
// change it (captureRoundTripper, as the http.RoundTripper contract
// requires), and http.Client copies the headers it sets (the upstream's
// client has no cookie jar, the one thing that would add headers to the
// request itself: newUpstreamHTTPClient). Per call, a POST
// used to parse the endpoint and build the header map anew (11
// allocations).
type rawHTTPHead struct {
	url    *url.URL
	host   string
	header http.Header
	// lean: the session's POSTs to url go over an h1Transport
	// (rawhttpconn.go), whose answers' bodies end with the call
	// (postRawCall).
	lean bool
}

// rawHTTPHeadOf returns c's rawHTTPHead, building it at the first call.
// The session's id and protocol version are fixed once it is initialised
// (rawHTTPApplies).
func rawHTTPHeadOf(c *upConn) (*rawHTTPHead, error) {
	if h := c.rawHead.Load(); h != nil {
		return h, nil
	}
	u, err := url.Parse(c.url)
	if err != nil {
		return nil, err
	}
	hdr := http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json, text/event-stream"},
	}
	if ir := c.cs.InitializeResult(); ir != nil {
		hdr["Mcp-Protocol-Version"] = []string{ir.ProtocolVersion}
	}
	if sid := c.cs.ID(); sid != "" {
		hdr["Mcp-Session-Id"] = []string{sid}
	}
	// As http.NewRequest: the Host header is the URL's host without an
	// empty port.
	h := &rawHTTPHead{url: u, host: strings.TrimSuffix(u.Host, ":"), header: hdr}
	if t := h1Under(c.hc); t != nil {
		h.lean = t.leanURL(u)
	}
	c.rawHead.Store(h)
	return h, nil
}

// A rawPostBody is the body of a raw POST: its bytes, readable again
// (GetBody) for h1Transport's retry of a request none of which was sent.
type rawPostBody struct{ bytes.Reader }

func (*rawPostBody) Close() error { return nil }

// newRawHTTPRequest builds a POST of body to c's endpoint with the headers
// the SDK's client sends on c's session; lean reports that it goes over an
// h1Transport.
func newRawHTTPRequest(ctx context.Context, c *upConn, body []byte) (_ *http.Request, lean bool, _ error) {
	h, err := rawHTTPHeadOf(c)
	if err != nil {
		return nil, false, err
	}
	rb := &rawPostBody{}
	rb.Reset(body)
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           h.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h.header,
		Body:          rb,
		ContentLength: int64(len(body)),
		GetBody: func() (io.ReadCloser, error) {
			r := &rawPostBody{}
			r.Reset(body)
			return r, nil
		},
		Host: h.host,
	}).WithContext(ctx)
	return req, h.lean, nil
}

// rejected is the verdict on a POST that never reached the upstream, as the
// SDK reports it (callError: "nothing was run"; verdict.go).
func rejected(err error) error {
	return &verdictError{kind: verdictRejected, msg: rejectedMessage, cause: err}
}

// postRawCall POSTs the tools/call body with id and reads its answer.
//
// Over an h1Transport (lean) the request runs in ctx itself: a body read
// to its end (a JSON answer, or an event stream whose end came with the
// answer) has given its connection back already; otherwise the rest of the
// body (the end of the event stream) is left to the connection's next
// request (h1Body.park). If ctx ends first, h1Transport breaks the
// connection's reads and closes it.
//
// Otherwise (net/http's Transport: TLS, a proxy) the request has a context
// of its own, cancelled with ctx until the answer is read: after it, the
// rest of the body is read in the background (drain), so that the
// connection goes back to the pool instead of being closed.
func (u *upstream) postRawCall(ctx context.Context, c *upConn, id string, body []byte) (json.RawMessage, error) {
	req, lean, err := newRawHTTPRequest(ctx, c, body)
	if err != nil {
		return nil, rejected(err)
	}
	if lean {
		return u.postRawCallLean(ctx, c, req, id)
	}
	reqCtx, cancelReq := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancelReq)
	req = req.WithContext(reqCtx)
	resp, err := c.hc.Do(req) //nolint:gosec // G704: servers.<name>.url, the operator's configuration
	if err != nil {
		stop()
		cancelReq()
		if reached(err) {
			// Written (rawhttpconn.go, httpreached.go): the upstream
			// may have run it.
			return nil, err
		}
		return nil, rejected(err)
	}
	raw, complete, err := u.readRawAnswer(ctx, c, req, resp, id)
	switch hb := h1BodyOf(resp.Body); {
	case !stop() || complete:
		_ = resp.Body.Close()
		cancelReq()
	case hb != nil:
		// The connection's next request reads the rest (rawhttpconn.go).
		hb.park()
		cancelReq()
	default:
		u.drain(resp.Body, cancelReq)
	}
	return raw, err
}

// postRawCallLean is postRawCall's request req over an h1Transport.
func (u *upstream) postRawCallLean(ctx context.Context, c *upConn, req *http.Request, id string) (json.RawMessage, error) {
	resp, err := c.hc.Do(req) //nolint:gosec // G704: servers.<name>.url, the operator's configuration
	if err != nil {
		if errors.Is(err, errH1Sent) {
			// Written (rawhttpconn.go): the upstream may have run it.
			return nil, err
		}
		return nil, rejected(err)
	}
	raw, complete, err := u.readRawAnswer(ctx, c, req, resp, id)
	if hb := h1BodyOf(resp.Body); hb != nil && !complete {
		// The connection's next request reads the rest; closed instead
		// if ctx has ended (h1Transport.release).
		hb.park()
	} else {
		// Read to its end (its connection is back in the pool), or not
		// the h1Transport's after all (a redirect elsewhere): closed.
		_ = resp.Body.Close()
	}
	return raw, err
}

// Draining the rest of a raw call's response body: at most drainMax bytes,
// for at most drainWait (a server that keeps the stream open after the
// answer gets its connection closed).
const (
	drainMax  = 64 << 10
	drainWait = time.Second
)

// drain reads body to its end in the background, bounded by drainMax,
// drainWait and the gateway's shutdown, then closes it and calls cancel
// (the request's context). upstream.run waits for the drains; once it has
// begun to (endDrains), the body is closed at once instead.
func (u *upstream) drain(body io.ReadCloser, cancel context.CancelFunc) {
	if !u.background(func() {
		stopRoot := context.AfterFunc(u.g.root, cancel)
		t := time.AfterFunc(drainWait, cancel)
		_, _ = io.Copy(io.Discard, io.LimitReader(body, drainMax))
		t.Stop()
		stopRoot()
		_ = body.Close()
		cancel()
	}) {
		_ = body.Close()
		cancel()
	}
}

// background runs fn in a goroutine upstream.run waits for (endDrains):
// a drain, or the notifications/cancelled of a raw call. It reports false,
// and fn does not run, once run has begun to wait.
func (u *upstream) background(fn func()) bool {
	u.drainMu.Lock()
	if u.drainsEnded {
		u.drainMu.Unlock()
		return false
	}
	u.drains.Add(1)
	u.drainMu.Unlock()
	u.drainsStarted.Add(1)
	go func() {
		defer u.drains.Done()
		fn()
	}()
	return true
}

// endDrains waits for the drains (and the other work of background) and
// makes later ones close at once.
func (u *upstream) endDrains() {
	u.drainMu.Lock()
	u.drainsEnded = true
	u.drainMu.Unlock()
	u.drains.Wait()
}

// readRawAnswer reads the answer of the raw call with id from resp (it
// does not close its body); complete reports that the body was read to
// its end.
func (u *upstream) readRawAnswer(ctx context.Context, c *upConn, req *http.Request, resp *http.Response, id string) (_ json.RawMessage, complete bool, _ error) {
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") != "":
		return nil, false, errSessionMissing404
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		// Refused before it was processed. (A 502 or 504 is a proxy's
		// that passed the call on: it may have run, as after a 500;
		// httpreached.go.)
		return nil, false, rejected(fmt.Errorf("HTTP %d", code))
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		// Refused before it was processed (MCP spec 2025-11-25,
		// "Authorization"): the operator must fix the credentials.
		err := fmt.Errorf("HTTP %d: the upstream refused the request's credentials (servers.%s.headers)", code, u.name)
		u.log.WarnContext(ctx, "HTTP upstream refused a call's credentials; nothing was run", "status", code)
		return nil, false, rejected(err)
	case code < 200 || code > 299:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if a, why := parseRawAnswer(bytes.TrimSpace(b)); why == "" && a.err != nil {
			return nil, false, a.err // the upstream's JSON-RPC error, as the SDK surfaces it
		}
		if mayHaveRunStatus(code) {
			return nil, false, fmt.Errorf("the upstream answered HTTP %d", code)
		}
		// As the SDK path says it (brokenStatus): a malformed answer.
		u.log.WarnContext(ctx, "upstream HTTP: a malformed answer to a call; the call fails", "status", code)
		return nil, false, brokenAnswerError(fmt.Sprintf("HTTP status %d", code))
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case mediaTypeIs(ct, mediaJSON):
		return u.readRawJSON(resp, id)
	case mediaTypeIs(ct, mediaEventStream):
		raw, err := u.readRawStream(ctx, c, resp.Body, id)
		return raw, false, sseTeeOf(resp.Body).verdictFor(id, err) // toolgate's own verdict (verdict.go)
	default:
		// As the SDK path says it (brokenStatus): a malformed answer.
		media, _, _ := mime.ParseMediaType(ct)
		u.log.WarnContext(ctx, "upstream HTTP: a malformed answer to a call; the call fails", "content_type", media)
		return nil, false, brokenAnswerError(fmt.Sprintf("HTTP %d that is neither JSON nor an event stream", resp.StatusCode))
	}
}

// readRawJSON reads the JSON answer body of a raw call with id, at most
// limits.max_result_bytes; complete reports that it was read to its end.
func (u *upstream) readRawJSON(resp *http.Response, id string) (_ json.RawMessage, complete bool, _ error) {
	max := u.g.opts.MaxResultBytes
	if resp.ContentLength > int64(max) {
		u.log.Warn("upstream result larger than limits.max_result_bytes discarded; its call fails", "bytes", resp.ContentLength, "limit", max, "id", id)
		return nil, false, resultTooLargeError(resp.ContentLength, max)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(max)+1))
	if err != nil {
		return nil, false, fmt.Errorf("read the upstream's answer: %w", err)
	}
	if len(b) > max {
		u.log.Warn("upstream result larger than limits.max_result_bytes discarded; its call fails", "bytes", resp.ContentLength, "limit", max, "id", id)
		return nil, false, resultTooLargeError(resp.ContentLength, max)
	}
	raw, err := u.rawAnswerFor(bytes.TrimSpace(b), id)
	return raw, true, err
}

// rawAnswerFor returns the result of the JSON-RPC response msg, which must
// answer id; anything else is a malformed answer.
func (u *upstream) rawAnswerFor(msg []byte, id string) (json.RawMessage, error) {
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &head) == nil && len(head.ID) > 0 && string(bytes.TrimSpace(head.ID)) != strconv.Quote(id) {
		u.log.Warn("upstream answered a call with another id; the call fails", "id", id, "bytes", len(msg))
		return nil, brokenAnswerError("an answer to another id")
	}
	return u.rawAnswer(msg)
}

// rawAnswer returns the result of the JSON-RPC response msg, known to
// answer the call; anything else is a malformed answer.
func (u *upstream) rawAnswer(msg []byte) (json.RawMessage, error) {
	a, why := parseRawAnswer(msg)
	if why != "" {
		u.log.Warn("upstream HTTP: a malformed answer to a call; the call fails", "reason", why, "bytes", len(msg))
	}
	if a.err != nil {
		return nil, a.err
	}
	return a.result, nil
}

// A rawStreamBuf is the read buffer and the event buffer of one raw
// call's event stream, reused across calls (rawStreamBufs): a call used
// to allocate the 4 KiB reader and grow its event buffer anew.
type rawStreamBuf struct {
	r    *bufio.Reader
	data []byte
}

// rawStreamKeep bounds the event buffer a rawStreamBuf keeps for the next
// call: a larger one (a large answer) is left to the garbage collector.
const rawStreamKeep = 64 << 10

var rawStreamBufs = sync.Pool{New: func() any { return &rawStreamBuf{r: bufio.NewReaderSize(nil, 4<<10)} }}

// A sseMessage is the part of a JSON-RPC message on a raw call's stream
// that decides what is done with it.
type sseMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// readRawStream reads the event stream of a raw call with id until the
// answer to it. sseTee (the session's round tripper) has already relayed
// progress, routed log messages (their events come without data) and
// replaced over-large events; each event here is at most about
// limits.max_result_bytes.
func (u *upstream) readRawStream(ctx context.Context, c *upConn, body io.Reader, id string) (json.RawMessage, error) {
	sb := rawStreamBufs.Get().(*rawStreamBuf)
	sb.r.Reset(body)
	var data, long []byte // long: a line longer than r's buffer, so far
	data = sb.data[:0]
	defer func() {
		// Nothing returned refers to these buffers: an answer's result
		// and error are copies (parseRawAnswer), as is every decode.
		sb.r.Reset(nil)
		if cap(data) <= rawStreamKeep {
			sb.data = data[:0]
			rawStreamBufs.Put(sb)
		}
	}()
	r := sb.r
	max := u.g.opts.MaxResultBytes + sdkLimitSlack
	// The id as JSON, on the stack for the usual short id (a string was
	// an allocation per call; docs/performance.md, "http47").
	var quotedBuf [64]byte
	quoted := strconv.AppendQuote(quotedBuf[:0], id)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			if len(data)+len(long) > max {
				return nil, resultTooLargeError(int64(len(data)+len(long)), u.g.opts.MaxResultBytes)
			}
			continue
		}
		if len(long) > 0 {
			long = append(long, line...)
			line, long = long, long[:0]
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("the upstream's event stream ended before the call's answer")
			}
			return nil, fmt.Errorf("read the upstream's event stream: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
				if len(data) > max {
					return nil, resultTooLargeError(int64(len(data)), u.g.opts.MaxResultBytes)
				}
			}
			continue
		}
		// The blank line ends the event.
		if len(data) == 0 {
			continue
		}
		msg := bytes.TrimSpace(data)
		data = data[:0]
		if mid, method, ok := scanEventHead(msg); ok && !method {
			// A response, read by the scanner (as the decode below
			// would read it): the call's answer, or not ours.
			if bytes.Equal(mid, quoted) {
				return u.rawAnswer(msg)
			}
			continue
		}
		var m sseMessage
		if err := json.Unmarshal(msg, &m); err != nil {
			// The SDK would fail the whole session; only this call fails.
			u.log.Warn("upstream SSE: an event that is not a JSON-RPC message; the call fails", "bytes", len(msg))
			return nil, brokenAnswerError("an event that is not a JSON-RPC message")
		}
		switch {
		case m.Method == "" && bytes.Equal(bytes.TrimSpace(m.ID), quoted):
			// Its id was read with the event: decoded once more, not twice.
			return u.rawAnswer(msg)
		case m.Method == "":
			// An answer to another request on this stream: not ours.
		case len(m.ID) > 0:
			if err := u.answerServerRequest(ctx, c, m); err != nil {
				return nil, err
			}
		default:
			u.rawNotification(ctx, c, m)
		}
	}
}

// rawNotification does with an upstream notification on a raw call's
// stream what the SDK client's handlers (newClientWith) do with it.
// Progress and log messages were handled by sseTee.
func (u *upstream) rawNotification(ctx context.Context, c *upConn, m sseMessage) {
	switch m.Method {
	case "notifications/tools/list_changed":
		u.changedOn(c.cs, true)
	case "notifications/prompts/list_changed", "notifications/resources/list_changed":
		u.changedOn(c.cs, false)
	case "notifications/resources/updated":
		var p mcp.ResourceUpdatedNotificationParams
		if json.Unmarshal(m.Params, &p) == nil {
			u.resourceUpdated(c.cs, &p)
		}
	case "notifications/elicitation/complete":
		var p mcp.ElicitationCompleteParams
		if json.Unmarshal(m.Params, &p) == nil {
			u.elicitationComplete(&p)
		}
	default:
		u.log.DebugContext(ctx, "upstream notification on a raw call's stream ignored", "method", m.Method)
	}
}

// answerServerRequest puts a server→client request that arrived on a raw
// call's stream to the call's agent, as relayRequest does on the SDK path,
// and POSTs the answer back to the upstream. An error means the answer
// could not be sent: the call fails.
func (u *upstream) answerServerRequest(ctx context.Context, c *upConn, m sseMessage) error {
	res, werr := u.relayRawRequest(ctx, m)
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: bytes.TrimSpace(m.ID), Result: res, Error: werr}
	if werr == nil && res == nil {
		resp.Result = struct{}{}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encode the answer to %s: %w", m.Method, err)
	}
	// The answer goes even when the call ended meanwhile (the agent
	// cancelled it, werr says so), as the SDK's client answers a request
	// whose handler's context ended: an upstream handler waiting for it
	// (and an SDK server's session close, which waits for its handlers)
	// must not wait for ever on a notifications/cancelled that shutdown
	// may abort. Bounded by cancelNotifyTimeout, not by the call.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelNotifyTimeout)
	defer cancel()
	return u.postRawMessage(actx, c, b)
}

// relayRawRequest forwards one server→client request (m: sampling,
// elicitation or roots) to the agent of the raw call in ctx; the result or
// the JSON-RPC error to answer it with.
func (u *upstream) relayRawRequest(ctx context.Context, m sseMessage) (mcp.Result, *jsonrpc.Error) {
	var (
		params     mcp.Params
		capability string
	)
	switch m.Method {
	case methodCreateMessage:
		params, capability = &mcp.CreateMessageWithToolsParams{}, CapabilitySampling
	case methodElicit:
		params, capability = &mcp.ElicitParams{}, CapabilityElicitation
	case methodListRoots:
		params, capability = &mcp.ListRootsParams{}, CapabilityRoots
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + m.Method}
	}
	if !u.cfg.offers(capability) {
		return nil, &jsonrpc.Error{Code: codeNotSupported, Message: fmt.Sprintf("toolgate does not offer %s to upstream %q (servers.%s.client_capabilities)", capability, u.name, u.name)}
	}
	if p := bytes.TrimSpace(m.Params); len(p) > 0 && string(p) != "null" {
		if err := json.Unmarshal(p, params); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + err.Error()}
		}
	}
	if meta := params.GetMeta(); meta != nil {
		delete(meta, routeMetaKey) // sseTee's stamp
		if len(meta) == 0 {
			params.SetMeta(nil)
		}
	}
	o := originFrom(ctx)
	if o == nil || o.ss == nil {
		return nil, &jsonrpc.Error{Code: codeNotSupported, Message: fmt.Sprintf("toolgate cannot tell which agent %s is for", m.Method)}
	}
	res, err := o.ask(ctx, m.Method, params, func(id string) { u.g.elicitations.put(u.name, id, o.ss) })
	if err != nil {
		var wire *jsonrpc.Error
		if errors.As(err, &wire) {
			return nil, wire
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return res, nil
}

// postRawMessage POSTs a notification or a response (b) on c's session;
// the upstream accepts it with 202 (or 204).
func (u *upstream) postRawMessage(ctx context.Context, c *upConn, b []byte) error {
	req, _, err := newRawHTTPRequest(ctx, c, b)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req) //nolint:gosec // G704: servers.<name>.url, the operator's configuration
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the upstream answered HTTP %d to a message", resp.StatusCode)
	}
	return nil
}

// sendRawCancel tells the upstream that the raw call id was cancelled
// (why), as the SDK does for its requests, within cancelNotifyTimeout and
// the gateway's life. Best effort: an error is only logged.
func (u *upstream) sendRawCancel(ctx context.Context, c *upConn, id string, why error) {
	reason := "cancelled"
	if why != nil {
		reason = why.Error()
	}
	b, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": id, "reason": reason},
	})
	if err == nil {
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelNotifyTimeout)
		stopRoot := context.AfterFunc(u.g.root, cancel) //nolint:contextcheck // the gateway's lifecycle root: shutdown does not wait for it
		err = u.postRawMessage(nctx, c, b)
		stopRoot()
		cancel()
	}
	if err != nil {
		u.log.DebugContext(ctx, "notifications/cancelled for a raw HTTP call not sent", "err", u.redact(err.Error()))
	}
}
