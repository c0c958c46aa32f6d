package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What the HTTP front reads of a POST body before it picks a handler: the
// era it belongs to (isModern, isInitialize), and the bodies it refuses
// itself rather than hand to the SDK (refuseUnfaithful).

// refuseUnfaithful answers the POST body about to go to the SDK path with
// a JSON-RPC error (400) when it is one message the go-sdk would not serve
// faithfully (checkMessage, as for stdio agents' lines): bytes after the
// JSON value (the SDK served "{…} trailing" and "{…}{}"), or an id it
// answers under another (1.5 as 1, 12345678901234567890123 as
// -9223372036854775808); or a body that is no message (refuseNotMessage).
// A batch of objects is left to the SDK (2025-03-26 sessions may send one;
// later ones get the SDK's refusal). It reports whether it answered.
func refuseUnfaithful(w http.ResponseWriter, body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return refuseNotMessage(w, body)
	}
	e := checkMessage(body)
	if e == nil {
		return false
	}
	if e.Code == jsonrpc.CodeParseError {
		e.Message = bodyParseError // checkMessage words it for a stdio line
	}
	writeRPCError(w, http.StatusBadRequest, e.ID, &jsonrpc.Error{Code: e.Code, Message: e.Message})
	return true
}

// bodyParseError is the message of the parse error (-32700) the HTTP front
// answers a POST body that is not valid JSON with; the stdio fronts say
// "the line" (checkMethod).
const bodyParseError = "parse error: the body is not valid JSON"

// refuseNotMessage answers a POST body that does not start with '{' and
// is not a batch of objects with a JSON-RPC error (400, application/json,
// id null) that does not quote it, and reports whether it answered: a
// parse error (-32700) when it is not JSON (or empty), an invalid request
// (-32600) when it is JSON but no message (a string, a number, an array
// holding one). The SDK answered both with a text/plain 400 quoting the
// body ("malformed payload: … invalid token: <body>"; fixes32). A body
// starting with '{' is left to checkMessage (refuseUnfaithful) or the SDK.
func refuseNotMessage(w http.ResponseWriter, body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) > 0 && b[0] == '{' {
		return false
	}
	if refuseNotJSON(w, b) {
		return true
	}
	if b[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(b, &batch) == nil && !slices.ContainsFunc(batch, func(m json.RawMessage) bool {
			m = bytes.TrimLeft(m, " \t\r\n")
			return len(m) == 0 || m[0] != '{'
		}) {
			return false
		}
	}
	writeRPCError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: the body is not a JSON-RPC message (an object) nor a batch of them"})
	return true
}

// refuseNotJSON answers a POST body that is not valid JSON (empty
// included) with a parse error (-32700, 400, id null) that does not quote
// it, and reports whether it answered. The SDK answered one starting with
// '{' on a session the lean front does not serve with a text/plain 400
// ("malformed payload: …").
func refuseNotJSON(w http.ResponseWriter, body []byte) bool {
	if json.Valid(body) {
		return false
	}
	writeRPCError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: bodyParseError})
	return true
}

// modernVersion is the first MCP revision without protocol sessions.
const modernVersion = "2026-07-28"

// isModern reports whether a POST without a session is a 2026-07-28-era
// request: its MCP-Protocol-Version header names that era, its body's
// _meta carries io.modelcontextprotocol/protocolVersion, or it is
// server/discover (SEP-2575). Such requests are served statelessly. The
// body is read as the SDK reads it (exactMethod, lineVersion): on
// 70feee3f a folded "METHOD" or "_META" sent a request the SDK reads as a
// 2025-era tools/list to the stateless handler (branch attack44b).
func isModern(h http.Header, body []byte) bool {
	if v := h.Get("Mcp-Protocol-Version"); v >= modernVersion {
		return true
	}
	return lineVersion(body) != "" || exactMethod(body) == "server/discover"
}

// exactMethod is the method of the JSON-RPC message body read as the SDK
// reads it (go-sdk v1.8.0): by its exact key, the last of two, escapes
// decoded; "" when body is no object or its method is no string.
func exactMethod(body []byte) string {
	var method json.RawMessage
	if !eachMember(body, func(k string, v json.RawMessage) bool {
		if k == "method" {
			method = v
		}
		return true
	}) {
		return ""
	}
	var m string
	if json.Unmarshal(method, &m) != nil {
		return ""
	}
	return m
}

// isInitialize reports whether a JSON-RPC message (or batch) is an
// initialize request, its method read as the SDK reads it (exactMethod:
// on 70feee3f a folded "METHOD":"initialize" sent a tools/call to the
// session handler). Anything unparsable (an object with bytes after it:
// refuseNotMessage refused the rest) reports true, for refuseUnfaithful to
// answer.
func isInitialize(body []byte) bool {
	if !json.Valid(body) {
		return true
	}
	var batch []json.RawMessage
	if json.Unmarshal(body, &batch) != nil {
		return exactMethod(body) == "initialize"
	}
	return slices.ContainsFunc(batch, func(m json.RawMessage) bool { return exactMethod(m) == "initialize" })
}
