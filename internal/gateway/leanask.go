package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// Server→client requests during a lean call (leanfront.go).
//
// The SDK does not know a lean call, so a request an upstream sends to the
// agent while serving it (sampling/createMessage, elicitation/create,
// roots/list) would go out on the session's standalone GET stream, which a
// client need not open. MCP 2025-11-25 (Streamable HTTP) wants messages
// that relate to a request on that request's stream. So the front writes
// such a request on the lean POST's own event stream, under an id of its
// own (leanAskPrefix), and takes the agent's JSON-RPC response out of the
// POST that carries it (replyLean) before the SDK sees it.

// leanAskPrefix begins the JSON-RPC id of every request the lean front
// writes on a lean call's stream. The SDK numbers the requests it sends a
// session with integers, so a string id never collides with one of them;
// the rest of the id is random, so an agent cannot guess another's.
const leanAskPrefix = "toolgate-lean-"

// errLeanCallEnded is what a question put on a lean call's stream gets when
// the call was answered (the stream ended) before the agent answered.
var errLeanCallEnded = errors.New("the lean call's stream ended")

// errLeanSessionEnded is what a question waiting for the agent's answer
// gets when the agent session ends.
var errLeanSessionEnded = errors.New("the agent session ended")

// A leanReply is the agent's answer to one question: its result, or its
// JSON-RPC error.
type leanReply struct {
	result json.RawMessage
	err    error
}

// A leanStream is the event stream of one lean call, on which the front
// writes the server→client requests that belong to the call. Its methods
// are safe for concurrent use.
type leanStream struct {
	w http.ResponseWriter
	s *leanSession

	mu      sync.Mutex
	closed  bool                // guarded by mu: the call's answer is being written
	waiting map[string]struct{} // guarded by mu: ids of the call's own questions not answered yet
	// done is closed by close; made by the first question that waits on
	// it (doneChan), as most calls ask none. Guarded by mu.
	done chan struct{}
}

// doneChan returns the channel close closes, made on first use.
func (l *leanStream) doneChan() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
		if l.closed {
			close(l.done)
		}
	}
	return l.done
}

// close ends l before the call's answer is written: a question of the
// call still waiting is withdrawn (notifications/cancelled on the stream,
// and it fails with errLeanCallEnded), and nothing is written on l after.
// A question only borrowing the stream keeps waiting.
func (l *leanStream) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	for id := range l.waiting {
		l.s.unexpect(id)
		writeSSE(l.w, cancelledEvent(id, "the call ended before the agent answered"))
	}
	clear(l.waiting)
	l.closed = true
	if l.done != nil {
		close(l.done)
	}
}

// write writes data as one event, unless l is closed (false). A non-empty
// id is a question of the call's own, waiting from then on; withdraw ends
// the wait.
func (l *leanStream) write(data []byte, id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if id != "" {
		if l.waiting == nil {
			l.waiting = map[string]struct{}{}
		}
		l.waiting[id] = struct{}{}
	}
	writeSSE(l.w, data)
	return true
}

// withdraw ends the wait of question id; with reason, the agent is told it
// is withdrawn (unless close did it already).
func (l *leanStream) withdraw(id, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.waiting[id]
	delete(l.waiting, id)
	if reason != "" && !l.closed && ok {
		writeSSE(l.w, cancelledEvent(id, reason))
	}
}

// cancelledEvent is notifications/cancelled for the question id.
func cancelledEvent(id, reason string) []byte {
	b, _ := marshalWire(struct {
		JSONRPC string              `json:"jsonrpc"`
		Method  string              `json:"method"`
		Params  mcp.CancelledParams `json:"params"`
	}{"2.0", "notifications/cancelled", mcp.CancelledParams{RequestID: id, Reason: reason}})
	return b
}

// ask writes the request method with params on l and decodes the agent's
// answer into res. written is false when l was closed before the request
// could be written (the caller then asks the SDK's way). borrowed marks a
// question that does not belong to the call (agentConn.route): it outlives
// the stream. It returns the agent's JSON-RPC error as it came,
// errLeanCallEnded, errLeanSessionEnded, or ctx's cause when ctx ends
// first (the agent is then told with notifications/cancelled, as the SDK
// tells it).
func (l *leanStream) ask(ctx context.Context, method string, params any, res mcp.Result, borrowed bool) (written bool, err error) {
	id := leanAskPrefix + rand.Text()
	ch, ok := l.s.expect(id)
	if !ok {
		return true, errLeanSessionEnded
	}
	defer l.s.unexpect(id)
	msg := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", id, method, params}
	b, err := marshalWire(msg)
	if err != nil {
		return true, fmt.Errorf("cannot encode %s: %w", method, err)
	}
	own, done := id, l.doneChan()
	if borrowed {
		own, done = "", nil
	}
	if !l.write(b, own) {
		return false, nil
	}
	select {
	case r := <-ch:
		l.withdraw(own, "")
		if r.err != nil {
			return true, r.err
		}
		if err := json.Unmarshal(r.result, res); err != nil {
			return true, fmt.Errorf("the agent's result for %s does not decode: %w", method, err)
		}
		return true, nil
	case <-done:
		return true, errLeanCallEnded
	case <-ctx.Done():
		if own != "" {
			l.withdraw(own, ctx.Err().Error())
		} else {
			l.write(cancelledEvent(id, ctx.Err().Error()), "")
		}
		return true, context.Cause(ctx)
	}
}

// marshalWire encodes a JSON-RPC message to the agent as the SDK's
// jsonrpc2 encodes one: without HTML escaping (json.Marshal would send <,
// > and & as \u003c…, other bytes than the SDK path's). Every message the
// lean front writes itself (questions, progress, log messages) is encoded
// with it.
func marshalWire(msg any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// askLean puts the server→client request method (params as ask checked
// them) to the agent on the stream of o's lean call. ok is false when o
// has no lean stream, or it ended before the request could be written, or
// the request is one the front leaves to the SDK: the caller then asks
// the SDK's way. The result and the error are as the SDK's
// ServerSession methods give them.
func (o *origin) askLean(ctx context.Context, method string, params mcp.Params) (res mcp.Result, ok bool, err error) {
	if o.lean == nil || o.lean.stream == nil {
		return nil, false, nil
	}
	l := o.lean.stream
	var written bool
	switch p := params.(type) {
	case *mcp.CreateMessageWithToolsParams:
		// As ServerSession.CreateMessageWithTools sends it.
		if p == nil {
			p = &mcp.CreateMessageWithToolsParams{}
		}
		if p.Messages == nil {
			p2 := *p
			p2.Messages = []*mcp.SamplingMessageV2{}
			p = &p2
		}
		r := new(mcp.CreateMessageWithToolsResult)
		written, err = l.ask(ctx, method, p, r, o.borrowed)
		res = r
	case *mcp.ElicitParams:
		if !leanElicitable(p) {
			return nil, false, nil
		}
		if p.Mode == "" {
			// As ServerSession.Elicit sends it: the mode said.
			p2 := *p
			p2.Mode = "form"
			if p.URL != "" || p.ElicitationID != "" {
				p2.Mode = "url"
			}
			p = &p2
		}
		r := new(mcp.ElicitResult)
		if written, err = l.ask(ctx, method, p, r, o.borrowed); err == nil {
			err = checkElicitResult(p, r)
		}
		res = r
	case *mcp.ListRootsParams:
		var send any
		if p != nil {
			send = p
		}
		r := new(mcp.ListRootsResult)
		written, err = l.ask(ctx, method, send, r, o.borrowed)
		res = r
	default:
		return nil, false, nil
	}
	if !written {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	return res, true, nil
}

// leanElicitable reports whether the front can put elicitation p on a
// lean call's stream and check the answer as ServerSession.Elicit checks
// it: no requested schema, or one of type object whose properties are
// flat primitives (the form MCP allows). Any other schema is left to the
// SDK, which refuses it with its own words.
func leanElicitable(p *mcp.ElicitParams) bool {
	if p.RequestedSchema == nil {
		return true
	}
	b, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		return false
	}
	var s struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type       string          `json:"type"`
			Properties json.RawMessage `json:"properties"`
		} `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil || (s.Type != "" && s.Type != "object") {
		return false
	}
	for _, prop := range s.Properties {
		switch prop.Type {
		case "string", "number", "integer", "boolean", "array":
		default:
			return false
		}
		if prop.Properties != nil {
			return false
		}
	}
	return true
}

// checkElicitResult checks an accepted elicitation's content against the
// requested schema and fills in its defaults, as ServerSession.Elicit does.
func checkElicitResult(p *mcp.ElicitParams, r *mcp.ElicitResult) error {
	if r.Action != "accept" || r.Content == nil || p.RequestedSchema == nil {
		return nil
	}
	b, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		return err
	}
	var schema *jsonschema.Schema
	if err := json.Unmarshal(b, &schema); err != nil {
		return err
	}
	if schema == nil {
		return nil
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return err
	}
	if err := resolved.Validate(r.Content); err != nil {
		return fmt.Errorf("elicitation result content does not match requested schema: %w", err)
	}
	if err := resolved.ApplyDefaults(&r.Content); err != nil {
		return fmt.Errorf("failed to apply schema defaults to elicitation result: %w", err)
	}
	return nil
}

// replyLean serves a POST of session s carrying the agent's JSON-RPC
// response to a question the front wrote on a lean call's stream: it hands
// the response to the question and answers 202, as the SDK answers a
// response. It reports false, with the body left in lb, for anything else —
// a request, a notification, a batch, a response to an id no question of
// this session waits for — which the SDK path then answers as before
// (202 for a response it does not know). The body is bounded as every
// POST's (limits.max_request_bytes: 413).
func (f *httpFront) replyLean(w http.ResponseWriter, lb *leanBody, p approval.Principal, s *leanSession) bool {
	if s.principal != p.ID || !s.asking() || !leanHeaders(lb.r.Header, s.version) {
		return false
	}
	body, err := lb.get()
	if err != nil {
		// As serveLean (and the SDK) answer it.
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "failed to read body", http.StatusBadRequest)
		}
		return true
	}
	if !bytes.Contains(body, []byte(leanAskPrefix)) {
		return false
	}
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return false
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   *jsonrpc.Error  `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil || m.JSONRPC != "2.0" || m.Method != nil || (m.Result == nil) == (m.Error == nil) {
		return false
	}
	var id string
	if json.Unmarshal(m.ID, &id) != nil || !strings.HasPrefix(id, leanAskPrefix) {
		return false
	}
	reply := leanReply{result: m.Result}
	if m.Error != nil {
		reply.err = m.Error
	}
	if !s.deliver(id, reply) {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// expect registers a question with id and returns the channel its answer
// arrives on; ok is false once the session ended.
func (s *leanSession) expect(id string) (ch chan leanReply, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asksEnded {
		return nil, false
	}
	if s.asks == nil {
		s.asks = map[string]chan leanReply{}
	}
	ch = make(chan leanReply, 1)
	s.asks[id] = ch
	return ch, true
}

// unexpect forgets the question with id.
func (s *leanSession) unexpect(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.asks, id)
}

// asking reports whether a question of the session waits for an answer.
func (s *leanSession) asking() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.asks) > 0
}

// deliver hands r to the question with id; false when none waits.
func (s *leanSession) deliver(id string, r leanReply) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.asks[id]
	if !ok {
		return false
	}
	delete(s.asks, id)
	ch <- r // buffered, and delivered at most once: it was just removed
	return true
}

// endAsks fails every question still waiting (the session ended) and
// refuses later ones.
func (s *leanSession) endAsks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asksEnded = true
	for id, ch := range s.asks {
		ch <- leanReply{err: errLeanSessionEnded}
		delete(s.asks, id)
	}
}
