package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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
// connection reads when the SDK gets that response); a raw HTTP call
// takes sseTee's verdict on an event answering it from the tee
// (verdictFor). callOnce turns a marked slot into the verdictError; any
// other JSON-RPC error of a call is the upstream's and is relayed as such
// (tool_error).

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

// A teeVerdict is a verdict sseTee put in place of an event answering id
// on a stream without a slot: a raw HTTP call's (rawhttpcall.go), which
// reads it as an error response like any other. The raw call takes the
// verdict from the tee (verdictFor), never from those bytes.
type teeVerdict struct {
	id json.RawMessage
	v  *verdictError
}

// markAnswer records that t put v in place of the event answering id.
// Only a stream without a slot keeps it (a slot's call has markVerdict);
// the tee is read by one goroutine at a time, the raw call's.
func (t *sseTee) markAnswer(id json.RawMessage, v *verdictError) {
	if t.s == nil {
		t.verdicts = append(t.verdicts, teeVerdict{id: bytes.Clone(id), v: v})
	}
}

// sseTeeOf returns the sseTee under the response body rc, or nil.
func sseTeeOf(rc io.ReadCloser) *sseTee {
	for {
		switch b := rc.(type) {
		case *sseTee:
			return b
		case activityBody:
			rc = b.ReadCloser
		default:
			return nil
		}
	}
}

// verdictFor returns err, the error readRawStream returned for the raw
// call with id (unquoted; a JSON string without escapes), as the verdict
// t put in place of that call's answer when there is one and err is the
// error response that carried it. t may be nil.
func (t *sseTee) verdictFor(id string, err error) error {
	if t == nil || err == nil || len(t.verdicts) == 0 {
		return err
	}
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) {
		return err
	}
	for _, tv := range t.verdicts {
		if q := bytes.TrimSpace(tv.id); len(q) == len(id)+2 && q[0] == '"' && string(q[1:len(q)-1]) == id {
			return tv.v
		}
	}
	return err
}
