package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// toolgate's own verdicts on a call cannot be forged by an upstream
// (branch verdict). toolgate fails a call whose answer was malformed
// (-32014, "may have run", recorded transport_error), over
// limits.max_result_bytes (-32013, "the tool ran", tool_error) or never
// sent (-32005 "rejected by transport", "nothing was run"). On the SDK
// path it hands the SDK those verdicts as JSON-RPC error responses, and
// callError used to recognise them by their code and data: an upstream
// that answered a call with the same code and data had its own error
// recorded and worded as toolgate's verdict ("nothing was run" for a call
// the upstream may well have run, transport_error instead of tool_error).
//
// Now a verdict is set by the code path that produced it and never read
// from the bytes: the raw paths return a *verdictError (a Go value no
// upstream byte becomes); on the SDK path the code that puts the error
// response in place of the upstream's answer marks the call's slot
// (markVerdict): captureRoundTripper, jsonLimit and sseTee over HTTP, the
// stdout guard over stdio (through rawCalls.made, which the capture
// connection reads when the SDK gets that response). callOnce turns a
// marked slot into the verdictError; any other JSON-RPC error of a call
// is the upstream's and is relayed as such (tool_error).

// A verdictKind is one of toolgate's own verdicts on a call.
type verdictKind uint8

const (
	verdictNone     verdictKind = iota
	verdictRejected             // the call never reached the upstream
	verdictBroken               // the upstream's answer was malformed: it may have run
	verdictTooLarge             // the result was over limits.max_result_bytes: it ran
)

// A verdictError is toolgate's own verdict on a call: made by the code that
// found it, never decoded from an upstream's bytes. msg is what the agent
// is told of it; cause (may be nil) is only logged.
type verdictError struct {
	kind  verdictKind
	msg   string
	cause error
}

func (e *verdictError) Error() string { return e.msg }
func (e *verdictError) Unwrap() error { return e.cause }

// verdictOf returns the verdictError in err's chain, or nil.
func verdictOf(err error) *verdictError {
	var v *verdictError
	if errors.As(err, &v) {
		return v
	}
	return nil
}

// verdictWire is the JSON-RPC error that carries v to the SDK in place of
// an upstream's answer (and, for requests other than tools/call, to the
// agent): the codes and data toolgate has always used.
func verdictWire(v *verdictError) *jsonrpc.Error {
	switch v.kind {
	case verdictBroken:
		return &jsonrpc.Error{Code: codeBrokenAnswer, Message: v.msg, Data: json.RawMessage(brokenAnswerData)}
	case verdictTooLarge:
		return &jsonrpc.Error{Code: codeResultTooLarge, Message: v.msg, Data: json.RawMessage(toolgateErrorData)}
	}
	return &jsonrpc.Error{Code: codeRejected, Message: rejectedMessage}
}

// verdictResponse is the JSON-RPC error response to id carrying v.
func verdictResponse(id json.RawMessage, v *verdictError) []byte {
	e := verdictWire(v)
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   map[string]any{"code": e.Code, "message": e.Message, "data": e.Data},
	})
	return b
}

// markVerdict records on the call's slot that the gateway put the verdict
// v in place of the upstream's answer to it (or that the SDK's own
// "rejected by transport" is the transport's: v.kind verdictRejected). The
// first mark stands. s may be nil (no call's slot).
func (s *slot) markVerdict(v *verdictError) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.verdict == nil {
		s.verdict = v
	}
}

// verdictMarked returns the verdict marked on s, or nil.
func (s *slot) verdictMarked() *verdictError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.verdict
}

// sdkVerdict returns err, the error of the SDK's CallTool on c with the
// slot s, as callError must read it: wrapped in the verdict marked on s,
// or, for the SDK's own "rejected by transport" (code -32005 on an error
// that carries no upstream answer: the call was never posted), in
// verdictRejected. Any other JSON-RPC error in err is the upstream's.
func sdkVerdict(c *upConn, s *slot, err error) error {
	if err == nil {
		return nil
	}
	v := s.verdictMarked()
	if v == nil && c.hc != nil && !s.wasPosted() {
		var wire *jsonrpc.Error
		if errors.As(err, &wire) && wire.Code == codeRejected {
			v = &verdictError{kind: verdictRejected, msg: rejectedMessage}
		}
	}
	if v == nil {
		return err
	}
	return &verdictError{kind: v.kind, msg: v.msg, cause: err}
}

// maxMade bounds the marks rawCalls keeps for answers the SDK never read
// (their call was gone): past it they are all dropped.
const maxMade = 1024

// markMade records that the stdout guard put the verdict v in place of
// the upstream's answer line with id (raw JSON), for the capture
// connection to mark the call's slot when the SDK reads it (takeMade).
func (r *rawCalls) markMade(id json.RawMessage, v *verdictError) {
	var x any
	if json.Unmarshal(id, &x) != nil {
		return
	}
	jid, err := jsonrpc.MakeID(x)
	if err != nil {
		return
	}
	r.madeMu.Lock()
	defer r.madeMu.Unlock()
	if r.made == nil || len(r.made) >= maxMade {
		r.made = map[jsonrpc.ID]*verdictError{}
	}
	r.made[jid] = v
}

// takeMade returns and forgets the verdict the stdout guard marked for
// the answer with id, or nil.
func (r *rawCalls) takeMade(id jsonrpc.ID) *verdictError {
	r.madeMu.Lock()
	defer r.madeMu.Unlock()
	v := r.made[id]
	delete(r.made, id)
	return v
}

// madeMarks are rawCalls' fields for markMade (embedded there).
type madeMarks struct {
	madeMu sync.Mutex
	made   map[jsonrpc.ID]*verdictError // guarded by madeMu
}

// A rawSink is the context of a raw HTTP call's POST (rawhttpcall.go): it
// takes the verdict sseTee puts in place of an over-large or undecodable
// event answering that call (id, the call's JSON id), which readRawStream
// then reads as an error response like any other. The raw call reads the
// verdict from here, never from those bytes (verdict.go). One allocation:
// the sink is the context.
type rawSink struct {
	context.Context
	id string // the call's id, a JSON string without escapes, unquoted

	mu sync.Mutex
	v  *verdictError // guarded by mu
}

type rawSinkKey struct{}

// withRawSink returns ctx as the context of the raw call with id (a
// string that needs no escapes in JSON).
func withRawSink(ctx context.Context, id string) *rawSink {
	return &rawSink{Context: ctx, id: id}
}

func (r *rawSink) Value(key any) any {
	if key == (rawSinkKey{}) {
		return r
	}
	return r.Context.Value(key)
}

// rawSinkFrom returns the raw call's sink of ctx, or nil.
func rawSinkFrom(ctx context.Context) *rawSink {
	r, _ := ctx.Value(rawSinkKey{}).(*rawSink)
	return r
}

// mark records the verdict v sseTee put in place of the answer with id,
// when id is the call's. r may be nil.
func (r *rawSink) mark(id json.RawMessage, v *verdictError) {
	if r == nil {
		return
	}
	if id = bytes.TrimSpace(id); len(id) != len(r.id)+2 || id[0] != '"' || string(id[1:len(id)-1]) != r.id {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.v == nil {
		r.v = v
	}
}

// verdictFor returns err, the error readRawStream returned for the call,
// as the verdict marked on r when there is one and err is the error
// response that carried it.
func (r *rawSink) verdictFor(err error) error {
	if r == nil || err == nil {
		return err
	}
	r.mu.Lock()
	v := r.v
	r.mu.Unlock()
	var wire *jsonrpc.Error
	if v == nil || !errors.As(err, &wire) {
		return err
	}
	return v
}
