package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
)

// sseTee sits on the body of every event stream an HTTP upstream sends
// (the stream of a POST, or the standalone GET stream) and hands the SDK
// the same events, each once its blank line arrived, after acting on it:
//
//   - the event answering a tools/call with a slot fills the slot (raw
//     result bytes, notes §6);
//   - notifications/progress is queued for its route (progress.go);
//   - notifications/message is routed to the agent request whose POST
//     carries it (origin), else to the agent session of a per-agent
//     session (owner), else to toolgate's log; the SDK gets the event
//     without its data (it skips such events);
//   - a server→client request is stamped with the route token of origin
//     in params._meta[routeMetaKey] (any value the upstream put there is
//     removed), so the client middleware forwards it to that agent.
//
// An event larger than max (limits.max_result_bytes) is read to its end
// without being kept (an idScanner picks its id on the way): if it answers
// a request, the SDK gets in its place a small JSON-RPC error response to
// that request (resultTooLargeResponse), so only that request fails; any
// other is dropped and logged. Left to the SDK, an event over its limit
// ends the whole upstream session, shared by every agent.
type sseTee struct {
	io.ReadCloser
	s      *slot // nil: nothing to capture
	id     json.RawMessage
	max    int
	routes *progressRoutes // nil: progress is not relayed
	up     *upstream       // nil: log messages and requests are left to the SDK
	owner  *agentConn
	origin *origin
	log    *slog.Logger
	// post: the stream answers a POST, whose call (nil: none with a
	// progress token) alone may have progress on it; else scope is the
	// HTTP session of the standalone stream (nil: unknown).
	post  bool
	call  *callProgress
	scope *progressScope

	verdicts []teeVerdict // without a slot: the verdicts put in place of answers (verdict.go)

	out   []byte // bytes ready for the SDK
	line  []byte // the current partial line, raw
	event []byte // the raw lines of the current event
	data  []byte // the joined data of the current event
	done  bool   // the slot was filled
	named bool   // the current event has a name other than "message"
	err   error  // the body's read error, returned once out is drained

	// The current event is larger than max: it is scanned, not kept.
	over      bool
	overSize  int64  // its bytes so far
	lineStart bool   // over: the next bytes start a line
	inData    bool   // over: the current line is a data line
	head      []byte // over: the first bytes of the current line, while too few to tell its field
	scan      idScanner

	// bufs start out, line, event and data (useBufs): a stream's
	// buffers grew from nothing, 4–6 allocations per POST's stream.
	bufs [4][sseTeeBuf]byte
}

// sseTeeBuf is the room each buffer of a sseTee starts with: a tools/call
// answer of a few hundred bytes fits; a larger event grows it as before.
const sseTeeBuf = 384

// useBufs points t's buffers at its own room (t.bufs). t must not be
// copied afterwards.
func (t *sseTee) useBufs() *sseTee {
	t.out, t.line, t.event, t.data = t.bufs[0][:0], t.bufs[1][:0], t.bufs[2][:0], t.bufs[3][:0]
	return t
}

func (t *sseTee) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(t.out) == 0 && t.err == nil {
		// p is the read buffer: feed copies what it keeps.
		n, err := t.ReadCloser.Read(p)
		t.feed(p[:n])
		if err != nil {
			t.err = err
			t.end() // sdkbreak.go
		}
	}
	n := copy(p, t.out)
	if n == len(t.out) {
		t.out = t.out[:0] // its buffer serves the next events
	} else {
		t.out = t.out[n:]
	}
	if len(t.out) == 0 && t.err != nil {
		return n, t.err
	}
	return n, nil
}

func (t *sseTee) feed(b []byte) {
	for len(b) > 0 {
		chunk := b
		i := bytes.IndexByte(b, '\n')
		if i >= 0 {
			chunk = b[:i+1]
		}
		b = b[len(chunk):]
		if t.over {
			t.overChunk(chunk)
			continue
		}
		t.line = append(t.line, chunk...)
		if t.overflow() || i < 0 {
			continue
		}
		t.endLine()
	}
}

// overflow switches the current event to scanning when it grew past max,
// dropping what was held back; it reports whether it did.
func (t *sseTee) overflow() bool {
	if len(t.event)+len(t.line) <= t.max {
		return false
	}
	t.over, t.overSize, t.lineStart, t.inData, t.head, t.scan = true, 0, true, false, t.head[:0], idScanner{}
	kept := t.event
	for len(kept) > 0 {
		line := kept
		if i := bytes.IndexByte(kept, '\n'); i >= 0 {
			line = kept[:i+1]
		}
		kept = kept[len(line):]
		t.overChunk(line)
	}
	line := t.line
	t.event, t.line, t.data = t.event[:0], t.line[:0], t.data[:0]
	t.overChunk(line)
	return true
}

// overChunk handles a piece of one line (up to and with its line feed, if
// any) of an over-large event. The first bytes of each line are collected
// until they tell whether it is a data line.
func (t *sseTee) overChunk(chunk []byte) {
	const headLen = len("data: ")
	for len(chunk) > 0 {
		n := len(chunk)
		if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
			n = i + 1
		}
		if !t.lineStart {
			t.overSize += int64(n)
			if t.inData {
				t.scan.feed(chunk[:n]) // line ends are JSON whitespace between data lines
			}
			t.lineStart = chunk[n-1] == '\n'
			chunk = chunk[n:]
			continue
		}
		take := min(n, headLen-len(t.head))
		t.head = append(t.head, chunk[:take]...)
		chunk = chunk[take:]
		ended := t.head[len(t.head)-1] == '\n'
		if !ended && len(t.head) < headLen {
			return
		}
		head := t.head
		t.head, t.lineStart = t.head[:0], ended
		if ended && len(bytes.TrimRight(head, "\r\n")) == 0 {
			t.endOver() // the blank line
			return
		}
		t.overSize += int64(len(head))
		rest, ok := bytes.CutPrefix(head, []byte("data:"))
		t.inData = ok
		if ok {
			t.scan.feed(bytes.TrimPrefix(rest, []byte(" ")))
		}
	}
}

// endOver ends an over-large event at its blank line: a response is
// replaced by the error response to its request; anything else is dropped.
func (t *sseTee) endOver() {
	scan, size := t.scan, t.overSize
	t.over, t.overSize, t.inData, t.scan = false, 0, false, idScanner{}
	if scan.method || len(scan.id) == 0 {
		t.logger().WarnContext(context.Background(), "upstream SSE: dropped a message larger than limits.max_result_bytes that answers no request",
			"bytes", size, "limit", t.max)
		return
	}
	t.logger().WarnContext(context.Background(), "upstream result larger than limits.max_result_bytes discarded; its request fails",
		"bytes", size, "limit", t.max, "id", string(scan.id))
	t.out = append(t.out, "data: "...)
	v := resultTooLargeError(size, t.max)
	t.out = append(t.out, verdictResponse(scan.id, v)...)
	t.out = append(t.out, "\n\n"...)
	if sameID(scan.id, t.id) {
		t.done = true
		t.s.markVerdict(v)
	}
	t.markAnswer(scan.id, v)
}

func (t *sseTee) logger() *slog.Logger {
	if t.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.log
}

// endLine handles the complete line in t.line.
func (t *sseTee) endLine() {
	raw := t.line
	line := bytes.TrimRight(raw, "\r\n")
	if len(line) > 0 {
		field, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			// The SDK ends its session on a line without a colon
			// (sdkbreak.go); for SSE it names a field with an empty
			// value, which no event of MCP's has: dropped.
			t.line = t.line[:0]
			return
		}
		t.event = append(t.event, raw...)
		t.line = t.line[:0]
		switch string(field) {
		case "data":
			if len(t.data) > 0 {
				t.data = append(t.data, '\n')
			}
			t.data = append(t.data, bytes.TrimSpace(value)...)
		case "event":
			name := string(bytes.TrimSpace(value))
			t.named = name != "" && name != "message"
		}
		return
	}
	t.event = append(t.event, raw...)
	t.line = t.line[:0]
	// The blank line: the event is complete.
	t.out = append(t.out, t.endEvent()...)
	t.event, t.data, t.named = t.event[:0], t.data[:0], false
}

// endEvent acts on the complete event and returns the bytes the SDK gets
// for it.
func (t *sseTee) endEvent() []byte {
	if len(t.data) == 0 || t.done || t.named {
		// Nothing follows a POST's result; the SDK skips events with
		// another name than "message".
		return t.event
	}
	if t.s == nil {
		// A response (no method) matters only to a slot: passed on
		// without a decode (a raw call's answer is read by
		// readRawStream, the SDK's by the SDK).
		if id, method, ok := scanEventHead(t.data); ok && !method && sdkTakesID(id) {
			return t.event
		}
	}
	var m upAnswer
	if m.decode(t.data) != nil {
		return t.brokenEvent("not a JSON-RPC message")
	}
	var method string
	if m.Method != nil {
		if json.Unmarshal(*m.Method, &method) != nil {
			return t.brokenEvent("the method is not a string")
		}
		if err := sdkDecodable(t.data); err != nil {
			return t.brokenEvent(err.Error())
		}
	} else if why := checkResponseShape(t.data, &m); why != "" {
		return t.brokenEvent(why)
	} else if classifyID(m.ID) == idNone {
		// The go-sdk ends its session on a response without an id
		// (review16): dropped.
		return t.brokenEvent("a response without an id")
	} else if !sdkTakesID(m.ID) {
		// Nor does it take an id of true, an object, an array or a
		// number past float64 (attack17): dropped.
		return t.brokenEvent("a response whose id is not a string or a number")
	}
	switch {
	case method == "":
		if t.s != nil && !t.done && len(m.ID) > 0 && sameID(m.ID, t.id) {
			if len(m.Result) > 0 {
				t.s.set(m.Result)
			}
			t.done = true
		}
	case len(m.ID) == 0 && method == methodProgress:
		switch {
		case t.routes == nil:
		case t.post:
			t.routes.relayPost(t.call, m.Params)
		default:
			t.routes.relayWire(t.scope, m.Params)
		}
	case len(m.ID) == 0 && method == methodLog:
		if t.up != nil {
			// A response body's reader has no context of its own.
			t.up.routeLog(context.Background(), t.origin, t.owner, m.Params)
			return withoutData(t.event)
		}
	case len(m.ID) > 0 && t.up != nil:
		tok := ""
		if t.origin != nil {
			tok = t.origin.routeToken()
		}
		if stamped, ok := stampRoute(t.data, tok); ok {
			return withData(t.event, stamped)
		}
	}
	return t.event
}

// stampRoute returns the JSON-RPC request msg with
// params._meta[routeMetaKey] set to tok (removed when tok is ""), and
// whether it could rewrite it. Other members keep their bytes.
func stampRoute(msg []byte, tok string) ([]byte, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(msg, &fields) != nil {
		return nil, false
	}
	params := map[string]json.RawMessage{}
	if raw, ok := fields["params"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if json.Unmarshal(raw, &params) != nil {
			return nil, false
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if json.Unmarshal(raw, &meta) != nil {
			return nil, false
		}
	}
	if tok == "" {
		if _, had := meta[routeMetaKey]; !had {
			return msg, true
		}
		delete(meta, routeMetaKey)
	} else {
		meta[routeMetaKey], _ = json.Marshal(tok)
	}
	var err error
	if len(meta) == 0 {
		delete(params, "_meta")
	} else if params["_meta"], err = json.Marshal(meta); err != nil {
		return nil, false
	}
	if fields["params"], err = json.Marshal(params); err != nil {
		return nil, false
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, false
	}
	return out, true
}

// withoutData returns the event's lines other than data (its id, so the
// stream can still resume), ended by a blank line; nothing when no other
// field is left. An event without data is skipped by SSE clients.
func withoutData(event []byte) []byte {
	var out []byte
	for _, raw := range bytes.SplitAfter(event, []byte("\n")) {
		line := bytes.TrimRight(raw, "\r\n")
		if len(line) == 0 {
			continue
		}
		if field, _, _ := bytes.Cut(line, []byte(":")); string(field) == "data" {
			continue
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	if len(out) == 0 {
		return nil
	}
	return append(out, '\n')
}

// withData returns the event with its data lines replaced by one line of
// data.
func withData(event, data []byte) []byte {
	out := withoutData(event)
	if len(out) > 0 {
		out = out[:len(out)-1] // the blank line goes after the data
	}
	out = append(out, "data: "...)
	out = append(out, data...)
	return append(out, '\n', '\n')
}
