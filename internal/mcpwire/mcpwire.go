// Package mcpwire is the wire of MCP revision 2026-07-28 as toolgate serves
// it over Streamable HTTP: the JSON-RPC envelope, the per-request metadata
// (_meta), the SEP-2243 request headers, the error codes of the revision
// and the HTTP status each takes, and server-sent events. It does no I/O
// of its own and knows nothing of approvals; the gateway builds its
// 2026-era front on it.
//
// Sources: the specification revision 2026-07-28 (basic/index.mdx for
// _meta and error codes, basic/transports/streamable-http.mdx for headers
// and statuses, basic/patterns/mrtr.mdx, server/discover.mdx), SEP-2243
// (headers), SEP-2575 (stateless MCP) and SEP-2663 (the Tasks extension).
package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Protocol revisions.
const (
	// Version is the 2026-07-28 revision, the one this package speaks.
	Version = "2026-07-28"
	// LegacyVersion is the newest revision that opens a session with
	// initialize (the 2025 era).
	LegacyVersion = "2025-11-25"
)

// Reserved _meta keys (basic/index.mdx, "_meta").
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	MetaProgressToken      = "progressToken"
)

// TasksExtension is the identifier of the Tasks extension (SEP-2663), in
// the extensions of client and server capabilities.
const TasksExtension = "io.modelcontextprotocol/tasks"

// JSON-RPC error codes: JSON-RPC 2.0's and those MCP 2026-07-28 defines
// (basic/index.mdx, "Error Codes").
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeHeaderMismatch: the HTTP headers do not match the body, or a
	// required header is missing or malformed (SEP-2243).
	CodeHeaderMismatch = -32020
	// CodeMissingCapability: the request needs a client capability the
	// client did not declare; data.requiredCapabilities names it.
	CodeMissingCapability = -32021
	// CodeUnsupportedVersion: the server does not serve the requested
	// protocol version; data lists the supported ones.
	CodeUnsupportedVersion = -32022
)

// An Error is a JSON-RPC error object. Data is its data member as JSON
// (nil: none).
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Errorf returns an Error with code and a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithData returns a copy of e whose data member is v encoded as JSON; a
// value that does not encode leaves data out.
func (e *Error) WithData(v any) *Error {
	c := *e
	if b, err := json.Marshal(v); err == nil {
		c.Data = b
	}
	return &c
}

// Status is the HTTP status of a response carrying e as the whole body
// (streamable-http.mdx): 404 for an unknown method, 400 for malformed
// requests, invalid params, header mismatches, missing capabilities and
// unsupported versions; 200 for the rest (errors of the method itself).
func (e *Error) Status() int {
	switch e.Code {
	case CodeMethodNotFound:
		return http.StatusNotFound
	case CodeParseError, CodeInvalidRequest, CodeInvalidParams, CodeHeaderMismatch, CodeMissingCapability, CodeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// AsError returns err as an *Error: itself when it is one (or wraps one),
// else an internal error carrying err's text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternalError, Message: err.Error()}
}

// A Request is one JSON-RPC message a client sent: a request (ID set) or
// a notification (ID nil). Params stays raw; each method decodes its own.
type Request struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
}

// IsNotification reports whether r has no id.
func (r Request) IsNotification() bool { return r.ID == nil }

// DecodeRequest decodes one HTTP POST body. A body that is not JSON is a
// parse error; a batch (MCP has none since 2025-06-18), a response, a
// message without "jsonrpc": "2.0" or a method, or an id that is neither a
// string nor a number is an invalid request. The returned Request carries
// the id when it could be read, so the error can be answered with it.
func DecodeRequest(body []byte) (Request, *Error) {
	b := bytes.TrimSpace(body)
	if len(b) > 0 && b[0] == '[' {
		return Request{}, Errorf(CodeInvalidRequest, "JSON-RPC batches are not supported")
	}
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return Request{}, Errorf(CodeParseError, "the body is not one JSON-RPC message: %v", err)
	}
	r := Request{Method: env.Method, Params: env.Params}
	if env.ID != nil && !bytes.Equal(env.ID, []byte("null")) {
		if !validID(env.ID) {
			return Request{}, Errorf(CodeInvalidRequest, "id must be a string or a number")
		}
		r.ID = env.ID
	}
	switch {
	case env.JSONRPC != "2.0":
		return r, Errorf(CodeInvalidRequest, `"jsonrpc" must be "2.0"`)
	case env.Method == "" && (env.Result != nil || env.Error != nil):
		return r, Errorf(CodeInvalidRequest, "clients may not send JSON-RPC responses over Streamable HTTP")
	case env.Method == "":
		return r, Errorf(CodeInvalidRequest, "missing method")
	}
	if bytes.Equal(bytes.TrimSpace(r.Params), []byte("null")) {
		r.Params = nil
	}
	return r, nil
}

// validID reports whether raw is a JSON string or number.
func validID(raw json.RawMessage) bool {
	switch raw[0] {
	case '"':
		var s string
		return json.Unmarshal(raw, &s) == nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var n json.Number
		return json.Unmarshal(raw, &n) == nil
	}
	return false
}

// EncodeResult returns the response to the request with id carrying result
// (a JSON object).
func EncodeResult(id, result json.RawMessage) []byte {
	return encode(id, "result", result)
}

// EncodeError returns the error response to the request with id (nil:
// the id could not be read, and "id" is null).
func EncodeError(id json.RawMessage, e *Error) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		b = []byte(`{"code":-32603,"message":"internal error"}`)
	}
	return encode(id, "error", b)
}

// EncodeNotification returns a notification of method with params (a JSON
// object, or nil).
func EncodeNotification(method string, params json.RawMessage) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"jsonrpc":"2.0","method":`)
	m, _ := json.Marshal(method)
	buf.Write(m)
	if params != nil {
		buf.WriteString(`,"params":`)
		buf.Write(params)
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

func encode(id json.RawMessage, key string, v json.RawMessage) []byte {
	var buf bytes.Buffer
	buf.Grow(len(v) + len(id) + 40)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	if id == nil {
		buf.WriteString("null")
	} else {
		buf.Write(id)
	}
	buf.WriteString(`,"`)
	buf.WriteString(key)
	buf.WriteString(`":`)
	buf.Write(v)
	buf.WriteByte('}')
	return buf.Bytes()
}
