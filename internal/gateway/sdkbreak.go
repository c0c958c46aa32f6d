package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"

	"toolgate/internal/approval"
)

// One broken answer, one failed call (branch sdkbreak). The go-sdk
// v1.8.0 streamable client ends its whole session, and with it every call
// in flight on it, on a broken answer to one POST: a JSON body it cannot
// read to its end or decode (streamableClientConn.handleJSON calls fail),
// an event stream line without a colon or an event it cannot decode
// (processStream calls fail), a non-2xx status other than 404 and the
// transient 500, 429, 502, 503 and 504 without a JSON-RPC error body (Write calls fail on
// checkResponse's error), and a 2xx answer that is neither JSON nor an
// event stream (Write returns an error the jsonrpc2 connection keeps as
// its writeErr). An answer to another id is dropped by jsonrpc2, and the
// call waits for call_timeout. captureRoundTripper (rawcap.go) checks
// every answer to a tools/call on the SDK path before the SDK reads it and
// puts in place of a broken one a JSON-RPC error response to that call
// (verdictResponse of brokenAnswerError): the SDK hands it to that call
// alone, and callError reports it as "may have run" (the upstream had
// the call).

// codeBrokenAnswer is the code of the error response the gateway puts in
// place of an upstream's broken answer to a call. The code and
// brokenAnswerData only carry the verdict to the SDK: what callError makes
// of it is marked on the call's slot by the code that put it there
// (verdict.go), never read back from the bytes, which an upstream can
// send as well.
const codeBrokenAnswer = -32014

// brokenAnswerData is the data of that error response.
const brokenAnswerData = `{"toolgate":"broken_answer"}`

// brokenAnswerError is the verdict on a call whose answer was malformed
// (why), on every path (branch sdkbreak2): the SDK path over HTTP gets it
// in its error response (its slot marked), stdio's stdout guard puts
// that response in place of a malformed answer line (rawCalls.markMade),
// and the raw paths (rawcall.go, rawhttpcall.go) return it. callError
// turns it into brokenAnswerFailure: an isError result saying the call
// may have run, recorded transport_error.
func brokenAnswerError(why string) *verdictError {
	return &verdictError{kind: verdictBroken, msg: "the upstream sent a malformed response (" + why + ")"}
}

// brokenAnswerFailure is what the agent gets for a call whose answer was
// broken (v): a failure saying the call may have run, recorded as a
// transport error.
func (u *upstream) brokenAnswerFailure(ctx context.Context, tool string, v *verdictError, err error) *callFailure {
	u.log.DebugContext(ctx, "call failed: the upstream answer was broken", "tool", tool, "err", v.msg)
	return &callFailure{
		msg:     fmt.Sprintf("upstream %q: tool %q: %s; the call may have run", u.name, tool, v.msg),
		outcome: approval.OutcomeTransportError,
		cause:   err,
	}
}

// upAnswer is the part of a JSON-RPC message checkAnswer reads.
type upAnswer struct {
	JSONRPC *string          `json:"jsonrpc"`
	ID      json.RawMessage  `json:"id"`
	Method  *json.RawMessage `json:"method"`
	Result  json.RawMessage  `json:"result"`
	Error   json.RawMessage  `json:"error"`
	Params  json.RawMessage  `json:"params"`
}

// decode fills m from data as the go-sdk's decoder reads it: its keys
// match exactly ("id", never "ID", which encoding/json would also take
// for it; the go-sdk then finds no id and ends its session: review16).
func (m *upAnswer) decode(data []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	*m = upAnswer{ID: obj["id"], Result: obj["result"], Error: obj["error"], Params: obj["params"]}
	if v, ok := obj["jsonrpc"]; ok {
		if err := json.Unmarshal(v, &m.JSONRPC); err != nil {
			return err
		}
	}
	if v, ok := obj["method"]; ok {
		m.Method = &v
	}
	return nil
}

// checkAnswer returns "" when data is a JSON-RPC response to id that the
// go-sdk decodes, with its result (nil for an error response), and
// otherwise why it is not.
func checkAnswer(data []byte, id json.RawMessage) (json.RawMessage, string) {
	var m upAnswer
	if m.decode(data) != nil {
		return nil, "not a JSON-RPC message"
	}
	if why := checkResponseShape(data, &m); why != "" {
		return nil, why
	}
	if m.Method != nil {
		return nil, "a request where the answer was due"
	}
	if !sameID(m.ID, id) {
		return nil, "an answer to another id"
	}
	return m.Result, ""
}

// checkResponseShape returns "" when the decoded message m (of data) has
// what the go-sdk's decoder requires of a response, and otherwise why not.
func checkResponseShape(data []byte, m *upAnswer) string {
	if m.JSONRPC == nil || *m.JSONRPC != "2.0" {
		return `"jsonrpc" is not "2.0"`
	}
	if jsonDepth(data) > maxJSONDepth {
		return fmt.Sprintf("nested deeper than %d levels", maxJSONDepth)
	}
	if e := bytes.TrimSpace(m.Error); len(e) > 0 && string(e) != "null" && !wireErrorShape(e) {
		return "an error that is not a JSON-RPC error object"
	}
	return ""
}

// wireErrorShape reports whether e is an object whose code (if any) is an
// int64 and whose message (if any) is a string, as the go-sdk decodes it.
func wireErrorShape(e []byte) bool {
	// Keys match exactly, as in upAnswer.decode: encoding/json would
	// also take "Code" for "code" (review16).
	var obj map[string]json.RawMessage
	if e[0] != '{' || json.Unmarshal(e, &obj) != nil {
		return false
	}
	if v, ok := obj["message"]; ok {
		var m *string
		if json.Unmarshal(v, &m) != nil {
			return false
		}
	}
	if v, ok := obj["code"]; ok {
		if v = bytes.TrimSpace(v); len(v) > 0 && v[0] == '"' {
			return false // json.Number takes "5"; the go-sdk's int64 does not
		}
		var c *json.Number
		if json.Unmarshal(v, &c) != nil {
			return false
		}
		if c != nil {
			if _, err := strconv.ParseInt(c.String(), 10, 64); err != nil {
				return false
			}
		}
	}
	return true
}

// sameID reports whether the JSON ids a and b are the same id.
func sameID(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if bytes.Equal(a, b) {
		return true
	}
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return x == y // strings or float64s
}

// brokenStatus returns, for resp (ctx is its request's, for the log), the answer to the tools/call POST with
// id, the JSON answer the SDK gets in its place when the SDK would end its
// session on it: a 401 or 403 (the transport's rejection: nothing was
// run), a 2xx answer that is neither JSON nor an event stream,
// or a status other than 404
// (the session is gone; handled before), 500, 429, 502, 503, 504 (the SDK
// fails only the call; httpreached.go) without a JSON-RPC error body. It returns nil when
// resp goes to the SDK as it is.
func brokenStatus(ctx context.Context, resp *http.Response, id json.RawMessage, s *slot, log *slog.Logger) *http.Response {
	code := resp.StatusCode
	var why string
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		// Refused before it was processed (MCP 2025-11-25,
		// "Authorization"), as the raw path says it (readRawAnswer): the
		// request fails as rejected, "nothing was run", and the session
		// and the calls in flight on it go on (the SDK ended the session
		// on it: branch sdkbreak2). The health check that follows sees
		// the same refusal and reconnects after unreachableLimit.
		_ = resp.Body.Close()
		if log != nil {
			log.WarnContext(ctx, "HTTP upstream refused a request's credentials; nothing was run", "status", code)
		}
		v := &verdictError{kind: verdictRejected, msg: rejectedMessage}
		s.markVerdict(v)
		return jsonAnswer(resp, verdictResponse(id, v))
	case code == http.StatusNotFound:
		return nil
	case code == http.StatusInternalServerError || code == http.StatusTooManyRequests || code == http.StatusBadGateway || code == http.StatusServiceUnavailable ||
		code == http.StatusGatewayTimeout:
		// The SDK fails the call as rejected by transport without
		// reading the body: that verdict is the transport's (verdict.go;
		// after a 500, 502 or 504 the call may have run all the same:
		// markRanStatus).
		s.markVerdict(&verdictError{kind: verdictRejected, msg: rejectedMessage})
		return nil
	case code >= 200 && code < 300:
		// The SDK reads the media type with mime.ParseMediaType and
		// takes one it cannot parse (a bad or repeated parameter) for
		// none at all: it ends its session on that as well (review16).
		mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if err == nil && (mt == mediaJSON || mt == mediaEventStream) {
			return nil
		}
		why = fmt.Sprintf("HTTP %d that is neither JSON nor an event stream", code)
	default:
		// The SDK fails only the call when the body is a JSON-RPC
		// error response; it reads the body whole for that.
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
		if err == nil && len(body) <= maxErrorBody && isWireErrorResponse(body) {
			resp.Body = readCloser{Reader: bytes.NewReader(body), c: resp.Body}
			return nil
		}
		why = fmt.Sprintf("HTTP status %d", code)
	}
	_ = resp.Body.Close()
	if log != nil {
		log.WarnContext(ctx, "upstream answer broken; its call fails and may have run", "why", why)
	}
	v := brokenAnswerError(why)
	s.markVerdict(v)
	return jsonAnswer(resp, verdictResponse(id, v))
}

// jsonAnswer is the 200 JSON answer with body b the SDK gets in place of
// resp.
func jsonAnswer(resp *http.Response, b []byte) *http.Response {
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {mediaJSON}},
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
		Request:       resp.Request,
	}
}

// maxErrorBody bounds the body of a non-2xx answer read to see whether it
// is a JSON-RPC error response.
const maxErrorBody = 64 << 10

// isWireErrorResponse reports whether body is a JSON-RPC response with an
// error the go-sdk decodes.
func isWireErrorResponse(body []byte) bool {
	var m upAnswer
	if m.decode(body) != nil || m.Method != nil || checkResponseShape(body, &m) != "" {
		return false
	}
	e := bytes.TrimSpace(m.Error)
	return len(e) > 0 && string(e) != "null"
}

// brokenEvent returns what the SDK gets in place of the current event,
// whose message it cannot decode (why): the error response to its request
// when the event answers one (an id and no method), else nothing. The
// event's bytes are never logged.
func (t *sseTee) brokenEvent(why string) []byte {
	var scan idScanner
	scan.feed(t.data)
	if scan.method || classifyID(scan.id) != idOK {
		t.logger().WarnContext(context.Background(), "upstream SSE: dropped an event the SDK cannot decode",
			"why", why, "bytes", len(t.data))
		return nil
	}
	t.logger().WarnContext(context.Background(), "upstream answer broken; its request fails and may have run",
		"why", why, "id", string(scan.id))
	v := brokenAnswerError(why)
	if t.s != nil && sameID(scan.id, t.id) {
		t.done = true
		t.s.markVerdict(v)
	}
	t.markAnswer(scan.id, v)
	return brokenEventBytes(scan.id, v)
}

// brokenEventBytes is the event carrying the verdict v as the error
// response to id.
func brokenEventBytes(id json.RawMessage, v *verdictError) []byte {
	b := append([]byte("event: message\ndata: "), verdictResponse(id, v)...)
	return append(b, "\n\n"...)
}

// end handles the end of the stream (t.err is set). An unterminated last
// event is handled as a whole one (the SDK dispatches it at the end of
// its input) and fails its request if it is cut; an over-large one is
// gone. When a POST's stream for a call with a slot broke (an event cut
// short, or a read error) or ended before the call's answer, the SDK gets an error
// response to the call in its place: it would otherwise end its session
// on the cut event, or resume the stream with Last-Event-ID, which
// toolgate does not do for a call (the raw path fails the call).
func (t *sseTee) end() {
	cut := t.over || len(t.line) > 0 || len(t.event) > 0
	if !t.over {
		if len(t.line) > 0 {
			t.line = append(t.line, '\n')
			t.endLine()
		}
		if len(t.event) > 0 {
			t.out = append(t.out, t.endEvent()...)
		}
	}
	t.event, t.line, t.data, t.named = nil, nil, nil, false
	t.over, t.head, t.scan = false, nil, idScanner{}
	// A stream that ended cleanly before the answer fails the call too
	// (review16): after an event with an id the SDK resumes it with
	// Last-Event-ID and ends its session when that fails; without one
	// the call waited for call_timeout for an answer that cannot come.
	if t.s != nil && t.id != nil && !t.done {
		why := "the event stream broke before the answer"
		if !cut && errors.Is(t.err, io.EOF) {
			why = "the event stream ended before the answer"
		}
		t.logger().WarnContext(context.Background(), "upstream answer broken; its request fails and may have run",
			"why", why, "id", string(t.id))
		v := brokenAnswerError(why)
		t.s.markVerdict(v)
		t.out = append(t.out, brokenEventBytes(t.id, v)...)
		t.done = true
	}
}
