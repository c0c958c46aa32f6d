package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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
// Events larger than max pass through untouched (and unprocessed).
type sseTee struct {
	io.ReadCloser
	s      *slot // nil: nothing to capture
	id     json.RawMessage
	max    int
	routes *progressRoutes // nil: progress is not relayed
	up     *upstream       // nil: log messages and requests are left to the SDK
	owner  *agentConn
	origin *origin

	out     []byte // bytes ready for the SDK
	line    []byte // the current partial line, raw
	event   []byte // the raw lines of the current event
	data    []byte // the joined data of the current event
	through bool   // the current event is too large: its bytes go straight out
	midLine bool   // through: the bytes sent last did not end a line
	done    bool   // the slot was filled
	err     error  // the body's read error, returned once out is drained
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
			// An unterminated last event goes out as it came.
			t.out = append(t.out, t.event...)
			t.out = append(t.out, t.line...)
			t.event, t.line = nil, nil
		}
	}
	n := copy(p, t.out)
	t.out = t.out[n:]
	if len(t.out) == 0 && t.err != nil {
		return n, t.err
	}
	return n, nil
}

func (t *sseTee) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if t.through {
				t.out = append(t.out, b...)
				t.midLine = true
				return
			}
			t.line = append(t.line, b...)
			t.overflow()
			return
		}
		raw := b[:i+1]
		b = b[i+1:]
		if t.through {
			t.out = append(t.out, raw...)
			if len(bytes.TrimRight(raw, "\r\n")) == 0 && !t.midLine {
				t.through = false // the blank line ended the event
			}
			t.midLine = false
			continue
		}
		t.line = append(t.line, raw...)
		if t.overflow() {
			continue
		}
		t.endLine()
	}
}

// overflow switches the current event to pass-through when it grew past
// max, flushing what was held back; it reports whether it did.
func (t *sseTee) overflow() bool {
	if len(t.event)+len(t.line) <= t.max {
		return false
	}
	t.out = append(t.out, t.event...)
	t.out = append(t.out, t.line...)
	complete := bytes.HasSuffix(t.line, []byte("\n"))
	ended := complete && len(bytes.TrimRight(t.line, "\r\n")) == 0
	t.event, t.line, t.data = t.event[:0], t.line[:0], t.data[:0]
	t.through, t.midLine = !ended, !complete
	return true
}

// endLine handles the complete line in t.line.
func (t *sseTee) endLine() {
	raw := t.line
	line := bytes.TrimRight(raw, "\r\n")
	t.event = append(t.event, raw...)
	t.line = t.line[:0]
	if len(line) > 0 {
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) == "data" {
			if len(t.data) > 0 {
				t.data = append(t.data, '\n')
			}
			t.data = append(t.data, bytes.TrimSpace(value)...)
		}
		return
	}
	// The blank line: the event is complete.
	t.out = append(t.out, t.endEvent()...)
	t.event, t.data = t.event[:0], t.data[:0]
}

// endEvent acts on the complete event and returns the bytes the SDK gets
// for it.
func (t *sseTee) endEvent() []byte {
	if len(t.data) == 0 || t.done {
		return t.event // nothing follows a POST's result
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(t.data, &m) != nil {
		return t.event
	}
	switch {
	case m.Method == "":
		if t.s != nil && !t.done && len(m.ID) > 0 && bytes.Equal(bytes.TrimSpace(m.ID), bytes.TrimSpace(t.id)) {
			if len(m.Result) > 0 {
				t.s.set(m.Result)
			}
			t.done = true
		}
	case len(m.ID) == 0 && m.Method == methodProgress:
		if t.routes != nil {
			t.routes.relayWire(m.Params)
		}
	case len(m.ID) == 0 && m.Method == methodLog:
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
