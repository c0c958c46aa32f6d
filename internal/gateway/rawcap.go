package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sync"

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

// A slot receives the raw result of one tools/call.
type slot struct {
	mu             sync.Mutex
	raw            json.RawMessage // guarded by mu
	sessionMissing bool            // guarded by mu: the upstream answered 404 for our session id
}

type slotKey struct{}

func withSlot(ctx context.Context) (context.Context, *slot) {
	s := &slot{}
	return context.WithValue(ctx, slotKey{}, s), s
}

func slotFrom(ctx context.Context) *slot {
	s, _ := ctx.Value(slotKey{}).(*slot)
	return s
}

func (s *slot) set(raw json.RawMessage) {
	s.mu.Lock()
	s.raw = raw
	s.mu.Unlock()
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

// captureTransport wraps a stdio transport so that its connection fills
// slots and relays progress.
type captureTransport struct {
	mcp.Transport
	routes *progressRoutes
}

func (t captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &captureConn{Connection: c, routes: t.routes}, nil
}

// captureConn records the id of each outgoing tools/call whose context has
// a slot, and fills the slot with the raw result before the SDK sees the
// response. It queues each notifications/progress it reads for its route
// before returning it to the SDK.
type captureConn struct {
	mcp.Connection
	routes  *progressRoutes
	pending sync.Map // jsonrpc.ID → *slot
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() && r.Method == "tools/call" {
		if s := slotFrom(ctx); s != nil {
			id := r.ID
			c.pending.Store(id, s)
			context.AfterFunc(ctx, func() { c.pending.Delete(id) })
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	switch r := m.(type) {
	case *jsonrpc.Response:
		if r.Error == nil {
			if s, ok := c.pending.LoadAndDelete(r.ID); ok {
				s.(*slot).set(r.Result)
			}
		}
	case *jsonrpc.Request:
		if !r.IsCall() && r.Method == methodProgress && c.routes != nil {
			c.routes.relayWire(r.Params)
		}
	}
	return m, err
}

// methodProgress is the method of a progress notification.
const methodProgress = "notifications/progress"

// captureRoundTripper adds the configured headers to every request to an
// HTTP upstream, fills slots from tools/call responses (JSON or SSE),
// relays the progress on a tools/call's event stream, and marks a slot when
// the upstream answered 404 to our session id.
type captureRoundTripper struct {
	base    http.RoundTripper
	headers map[string]string
	max     int             // bytes; the longest response or event captured
	routes  *progressRoutes // nil: progress is left to the SDK's handler
}

func (t *captureRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	s := slotFrom(req.Context())
	var id json.RawMessage
	if s != nil && req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		id = toolsCallID(body)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || id == nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") != "" {
		s.markSessionMissing()
		return resp, nil
	}
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch media {
	case "application/json":
		resp.Body = &jsonTee{ReadCloser: resp.Body, s: s, id: id, max: t.max}
	case "text/event-stream":
		resp.Body = &sseTee{ReadCloser: resp.Body, s: s, id: id, max: t.max, routes: t.routes}
	}
	return resp, nil
}

// toolsCallID returns the id of body if it is a single tools/call request.
func toolsCallID(body []byte) json.RawMessage {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "tools/call" || len(m.ID) == 0 {
		return nil
	}
	return m.ID
}

// captureMessage fills s from data if data is the response with id, and
// reports whether it was. A progress notification in data goes to routes
// (if not nil).
func captureMessage(s *slot, id json.RawMessage, data []byte, routes *progressRoutes) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	if len(m.ID) == 0 {
		if m.Method == methodProgress && routes != nil {
			routes.relayWire(m.Params)
		}
		return false
	}
	if !bytes.Equal(bytes.TrimSpace(m.ID), bytes.TrimSpace(id)) {
		return false
	}
	if len(m.Result) > 0 {
		s.set(m.Result)
	}
	return true
}

// jsonTee captures a single JSON response body as it is read.
type jsonTee struct {
	io.ReadCloser
	s    *slot
	id   json.RawMessage
	max  int
	buf  []byte
	over bool
	done bool
}

func (t *jsonTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if !t.over && !t.done {
		if len(t.buf)+n > t.max {
			t.over, t.buf = true, nil
		} else {
			t.buf = append(t.buf, p[:n]...)
		}
	}
	if errors.Is(err, io.EOF) && !t.over && !t.done {
		t.done = true
		captureMessage(t.s, t.id, t.buf, nil)
		t.buf = nil
	}
	return n, err
}

// sseTee parses the server-sent events passing through it, relays the
// progress notifications among them and captures the data of the event
// that answers id. Each event is handled when its blank line passes, before
// the SDK, which reads the same bytes, can act on it.
type sseTee struct {
	io.ReadCloser
	s        *slot
	id       json.RawMessage
	max      int
	routes   *progressRoutes // nil: progress is not relayed
	line     []byte          // the current partial line
	lineOver bool            // the current line is too long to capture
	data     []byte          // the data of the current event
	over     bool            // the current event is too large to capture
	done     bool
}

func (t *sseTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if !t.done {
		t.feed(p[:n])
	}
	return n, err
}

func (t *sseTee) feed(b []byte) {
	for len(b) > 0 && !t.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !t.lineOver && len(t.line)+len(b) > t.max {
				t.lineOver, t.line = true, t.line[:0]
			} else if !t.lineOver {
				t.line = append(t.line, b...)
			}
			return
		}
		if !t.lineOver && len(t.line)+i <= t.max {
			t.line = append(t.line, b[:i]...)
			t.endLine(bytes.TrimSuffix(t.line, []byte("\r")))
		} else {
			t.over = true // a line of this event was too long to capture
		}
		t.line, t.lineOver = t.line[:0], false
		b = b[i+1:]
	}
}

func (t *sseTee) endLine(line []byte) {
	if len(line) == 0 { // end of event
		if !t.over && len(t.data) > 0 && captureMessage(t.s, t.id, t.data, t.routes) {
			t.done = true
		}
		t.data, t.over = t.data[:0], false
		return
	}
	if t.over {
		return
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	if string(field) != "data" {
		return
	}
	value = bytes.TrimPrefix(value, []byte(" "))
	if len(t.data)+len(value)+1 > t.max {
		t.over, t.data = true, t.data[:0]
		return
	}
	if len(t.data) > 0 {
		t.data = append(t.data, '\n')
	}
	t.data = append(t.data, value...)
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
		res.StructuredContent = sc
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
			res.Meta[k] = v
		}
	}
	return &res, nil
}
