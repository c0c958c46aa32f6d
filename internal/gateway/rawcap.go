package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Go SDK client decodes structuredContent and _meta of a result into
// float64, so integers past 2^53 change and 1e400 fails the whole call
// (notes §6). The gateway therefore captures the raw bytes of each
// tools/call result on the way in, keyed by a slot in the call's context:
// a Connection wrapper for stdio, an http.RoundTripper for Streamable HTTP
// (wrapping that Connection would hide the SDK's unexported session hook).
//
// The same two taps hand notifications/progress to the progress routes in
// wire order. The SDK delivers a response straight from its read loop but
// runs notification handlers on a separate queue, so a CallTool can return
// before the handlers of the progress that preceded its result have run;
// queued here, that progress is known to the call before its result is.

// A slot receives the raw result of one tools/call, or, made by
// withListSlot, hands the raw result of each tools/list page to a function.
type slot struct {
	mu             sync.Mutex
	raw            json.RawMessage       // guarded by mu
	sessionMissing bool                  // guarded by mu: the upstream answered 404 for our session id
	posted         bool                  // guarded by mu: the tools/call's POST went to the HTTP transport
	ranStatus      bool                  // guarded by mu: the upstream answered it with a status after which it may have run (mayHaveRunStatus)
	each           func(json.RawMessage) // tools/list slots: called with each page's result, under mu
	check          string                // answer-check slots (withAnswerCheck): the request's method
	verdict        *verdictError         // guarded by mu: the gateway's own verdict put in place of the answer (verdict.go)
}

type slotKey struct{}

func withSlot(ctx context.Context) (context.Context, *slot) {
	s := &slot{}
	return context.WithValue(ctx, slotKey{}, s), s
}

// withListSlot returns ctx with a slot that calls each with the raw result
// of every tools/list the upstream answers in ctx (one per page), in order.
func withListSlot(ctx context.Context, each func(json.RawMessage)) context.Context {
	return context.WithValue(ctx, slotKey{}, &slot{each: each})
}

// withAnswerCheck returns ctx with a slot that has the answer to each
// request of method (resources/read, prompts/get, completion/complete,
// ping; the pages of prompts/list, resources/list and
// resources/templates/list; resources/subscribe and unsubscribe,
// logging/setLevel: attack18) sent in ctx checked as a tools/call's is
// (sdkbreak.go): a broken answer fails that request only, instead of
// ending the SDK's session with every call in flight on it (branch
// sdkbreak2). Its result is kept in the slot and not used. Only these
// requests pay for the check (their body is read once more to find the
// id); tools/call and tools/list have their own slots.
func withAnswerCheck(ctx context.Context, method string) context.Context {
	return context.WithValue(ctx, slotKey{}, &slot{check: method})
}

// captures reports whether s takes the result of a request of method.
func (s *slot) captures(method string) bool {
	switch {
	case s.each != nil:
		return method == "tools/list"
	case s.check != "":
		return method == s.check
	}
	return method == "tools/call"
}

func slotFrom(ctx context.Context) *slot {
	s, _ := ctx.Value(slotKey{}).(*slot)
	return s
}

func (s *slot) set(raw json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.each != nil {
		s.each(raw)
		return
	}
	s.raw = raw
}

func (s *slot) result() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw
}

func (s *slot) markSessionMissing() {
	s.mu.Lock()
	s.sessionMissing = true
	s.mu.Unlock()
}

func (s *slot) wasSessionMissing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionMissing
}

func (s *slot) markPosted() {
	s.mu.Lock()
	s.posted = true
	s.mu.Unlock()
}

// markRanStatus records that the upstream answered the call's POST with
// an HTTP status after which the call may have run (mayHaveRunStatus).
func (s *slot) markRanStatus() {
	s.mu.Lock()
	s.ranStatus = true
	s.mu.Unlock()
}

// wasRanStatus reports whether markRanStatus was called.
func (s *slot) wasRanStatus() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ranStatus
}

// wasPosted reports whether the call's POST was handed to the HTTP
// transport: if not, the upstream cannot have run it.
func (s *slot) wasPosted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posted
}

// captureTransport wraps a stdio transport so that its connection fills
// slots, relays progress and routes log messages.
type captureTransport struct {
	mcp.Transport
	routes *progressRoutes
	up     *upstream  // nil: log messages are left to the SDK's handler
	owner  *agentConn // the agent session a per-agent session belongs to; nil if shared
	raw    *rawCalls  // the session's raw calls, whose requests are in flight too; may be nil
	// w is the transport's writer to the child; each message is written
	// by its bound: its context's deadline, or bound (call_timeout) from
	// now (sdkwrite.go). Nil: the transport's writes are unbounded.
	w     *sdkWriter
	bound time.Duration
}

func (t captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var scope *progressScope
	if t.raw != nil {
		scope = &progressScope{raw: t.raw}
	}
	return &captureConn{Connection: c, routes: t.routes, up: t.up, owner: t.owner, raw: t.raw, scope: scope, w: t.w, bound: t.bound}, nil
}

// captureConn records the id of each outgoing tools/call whose context has
// a slot, and fills the slot with the raw result before the SDK sees the
// response. It queues each notifications/progress it reads for its route
// before returning it to the SDK. It hands each notifications/message to
// the upstream's log routing, in wire order, instead of to the SDK: on a
// per-agent session to the agent's request in flight (or the agent
// session), on a shared one, which cannot tell requests apart over stdio,
// to toolgate's log.
type captureConn struct {
	mcp.Connection
	routes   *progressRoutes
	up       *upstream
	owner    *agentConn
	raw      *rawCalls      // may be nil
	scope    *progressScope // the session, for its calls' progress; nil without raw
	pending  sync.Map       // jsonrpc.ID → *slot
	inflight sync.Map       // jsonrpc.ID → *origin; per-agent sessions only
	w        *sdkWriter     // may be nil; see captureTransport
	bound    time.Duration
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
		id := r.ID
		if s := slotFrom(ctx); s != nil && s.captures(r.Method) {
			c.pending.Store(id, s)
			context.AfterFunc(ctx, func() { c.pending.Delete(id) })
		}
		if o := originFrom(ctx); o != nil && c.owner != nil {
			c.inflight.Store(id, o)
			context.AfterFunc(ctx, func() { c.inflight.Delete(id) })
		}
	}
	if c.w == nil {
		return c.Connection.Write(ctx, msg)
	}
	return c.w.write(ctx, c.bound, func() error { return c.Connection.Write(ctx, msg) })
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		m, err := c.Connection.Read(ctx)
		routed := c.route(ctx, m)
		if m != nil && c.raw != nil {
			// A raw answer that came after m waited until m was routed.
			c.raw.sdkRead()
		}
		if !routed {
			return m, err
		}
	}
}

// route does what the capture connection does with m before the SDK sees
// it, and reports whether m was handled here (the SDK does not see it).
func (c *captureConn) route(ctx context.Context, m jsonrpc.Message) bool {
	switch r := m.(type) {
	case *jsonrpc.Response:
		if r.Error == nil {
			if s, ok := c.pending.LoadAndDelete(r.ID); ok {
				s.(*slot).set(r.Result)
			}
		} else if c.raw != nil {
			// The stdout guard's own verdict in place of the answer, or
			// the upstream's error (verdict.go).
			if v := c.raw.takeMade(r.ID); v != nil {
				if s, ok := c.pending.LoadAndDelete(r.ID); ok {
					s.(*slot).markVerdict(v)
				}
			}
		}
		c.inflight.Delete(r.ID)
	case *jsonrpc.Request:
		switch {
		case r.IsCall():
		case r.Method == methodProgress && c.routes != nil:
			c.routes.relayWire(c.scope, r.Params)
		case r.Method == methodLog && c.up != nil:
			c.up.routeLog(ctx, c.inflightOrigin(), c.owner, r.Params)
			return true
		}
	}
	return false
}

// inflightOrigin returns an agent request in flight on a per-agent
// session (they all belong to its agent), sent by the SDK or as a raw
// call, or nil.
func (c *captureConn) inflightOrigin() *origin {
	if c.owner == nil {
		return nil
	}
	var o *origin
	c.inflight.Range(func(_, v any) bool {
		o = v.(*origin)
		return false
	})
	if o == nil && c.raw != nil {
		o = c.raw.anyOrigin()
	}
	return o
}

// methodProgress is the method of a progress notification.
const methodProgress = "notifications/progress"

// captureRoundTripper adds the configured headers to every request to an
// HTTP upstream, fills slots from tools/call responses (JSON or SSE),
// relays the progress on every event stream, routes log messages and
// stamps server→client requests with the route of the POST whose stream
// carries them (relay.go), and marks a slot when the upstream answered 404
// to our session id.
type captureRoundTripper struct {
	base    http.RoundTripper
	headers map[string]string
	max     int             // bytes: limits.max_result_bytes (httplimit.go)
	routes  *progressRoutes // nil: progress is left to the SDK's handler
	log     *slog.Logger
	onRead  func()     // called whenever response bytes arrive (health.go); may be nil
	up      *upstream  // nil: log messages and requests are left to the SDK
	owner   *agentConn // the agent session of a per-agent session; nil if shared
}

func (t *captureRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	s := slotFrom(req.Context())
	capture := s != nil && req.Method == http.MethodPost && req.Body != nil
	if len(t.headers) > 0 || capture {
		// A RoundTripper must not change req: the configured headers
		// and the body read here go on a copy. Without either (a raw
		// call to an upstream without configured headers) req goes on
		// as it came.
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	var id json.RawMessage
	if capture {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		id = slotRequestID(body, s)
		if id != nil && s.each == nil {
			s.markPosted()
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		if id != nil {
			// The SDK reports it as rejected by transport: that verdict
			// is the transport's (verdict.go).
			s.markVerdict(&verdictError{kind: verdictRejected, msg: rejectedMessage})
		}
		return resp, err
	}
	if t.onRead != nil {
		resp.Body = activityBody{ReadCloser: resp.Body, saw: t.onRead}
	}
	if id != nil && resp.StatusCode == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") != "" {
		s.markSessionMissing()
		return resp, nil
	}
	if id != nil && s.each == nil && mayHaveRunStatus(resp.StatusCode) {
		// The SDK reports these as rejected; the call may have run
		// (httpreached.go).
		s.markRanStatus()
	}
	if id != nil {
		// An answer the SDK would end its session on fails only this
		// request (sdkbreak.go).
		if r := brokenStatus(req.Context(), resp, id, s, t.log); r != nil {
			return r, nil
		}
		if r := answerForAnotherSession(req.Context(), req, resp, id, s, t.log); r != nil {
			return r, nil
		}
	} else if r := refusedNotice(req.Context(), req, resp, t.log); r != nil {
		// A refused notification or answer ends nothing (sdknotify.go).
		return r, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		// Any 2xx: the SDK reads a call's JSON or event stream answer
		// the same with 201, 202 or 204 as with 200 (review16).
		return resp, nil
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case mediaTypeIs(ct, mediaJSON):
		if id != nil {
			resp.Body = &jsonLimit{body: resp.Body, s: s, id: id, max: t.max, size: resp.ContentLength, log: t.log}
		}
	case mediaTypeIs(ct, mediaEventStream):
		if id == nil {
			s = nil
		}
		tee := &sseTee{ReadCloser: resp.Body, s: s, id: id, max: t.max, routes: t.routes,
			up: t.up, owner: t.owner, origin: originFrom(req.Context()), log: t.log}
		// Progress on a POST's stream is its request's (relayPost); on
		// the session's standalone stream, its session's (relayWire).
		if req.Method == http.MethodPost {
			tee.post, tee.call = true, progressCallFrom(req.Context())
		} else if sid := req.Header.Get("Mcp-Session-Id"); sid != "" && t.up != nil {
			tee.scope = &progressScope{up: t.up, sid: sid}
		}
		resp.Body = tee.useBufs()
	}
	return resp, nil
}

// CloseIdleConnections closes base's idle connections (http.Client's
// CloseIdleConnections reaches a transport only through this method).
func (t *captureRoundTripper) CloseIdleConnections() {
	if ci, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// slotRequestID returns the id of body if it is a single request whose
// result s takes (a tools/call, or a tools/list for a list slot).
func slotRequestID(body []byte, s *slot) json.RawMessage {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil || !s.captures(m.Method) || len(m.ID) == 0 {
		return nil
	}
	return m.ID
}

// withRawNumbers replaces structuredContent and _meta of res, the result
// as the SDK decoded it, with their bytes in raw, the same result as
// received, so that their numbers pass through unchanged; the upstream's
// server-info _meta entry is dropped (notes §6). Their bytes that are not
// UTF-8 and lone surrogate escapes become U+FFFD, as on the lean path
// (repairUTF8; attack17). Both are read by their
// exact keys, as the SDK's decoder reads them (resultMembersOf). It is
// decodeResult for a result the SDK could decode, without decoding the rest a second time
// (the SDK's decoder allocates a 32 KiB buffer per decode;
// docs/performance.md). On success it changes and returns res; on an
// error res is unchanged.
func withRawNumbers(res *mcp.CallToolResult, raw json.RawMessage) (*mcp.CallToolResult, error) {
	n, err := resultMembersOf(raw)
	if err != nil {
		return nil, err
	}
	var meta mcp.Meta
	if len(n.meta) > 0 && string(n.meta) != "null" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(n.meta, &m); err != nil {
			return nil, err
		}
		delete(m, mcp.MetaKeyServerInfo)
		for k, v := range m {
			if meta == nil {
				meta = mcp.Meta{}
			}
			meta[k] = repairUTF8(v) // as the lean path gives it (rawutf8.go; attack17)
		}
	}
	res.Meta = meta
	res.StructuredContent = nil
	if len(n.structuredContent) > 0 && string(n.structuredContent) != "null" {
		res.StructuredContent = repairUTF8(json.RawMessage(n.structuredContent))
	}
	return res, nil
}

// decodeResult builds a CallToolResult from the raw result bytes without
// ever decoding the numbers of structuredContent and _meta: those stay
// json.RawMessage and are re-emitted downstream as received (up to
// whitespace and HTML escaping). The upstream's own server-info _meta entry
// is dropped (notes §6).
func decodeResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	sc, hasSC := fields["structuredContent"]
	meta, hasMeta := fields["_meta"]
	delete(fields, "structuredContent")
	delete(fields, "_meta")
	rest, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(rest, &res); err != nil {
		return nil, err
	}
	if hasSC && string(bytes.TrimSpace(sc)) != "null" {
		res.StructuredContent = repairUTF8(sc)
	}
	if hasMeta {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(meta, &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			if k == mcp.MetaKeyServerInfo {
				continue
			}
			if res.Meta == nil {
				res.Meta = mcp.Meta{}
			}
			res.Meta[k] = repairUTF8(v)
		}
	}
	return &res, nil
}
