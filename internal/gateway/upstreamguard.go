package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// newStdoutGuard returns the reader that stands between a stdio upstream's
// stdout (r) and the SDK's reader, so that one bad line cannot end the
// shared session and fail every call in flight on it (the SDK ends a stdio
// session on a line it cannot decode and on a line longer than its limit):
//
//   - a line that is one JSON-RPC message (checkUpstreamMessage) passes
//     unchanged;
//   - any other line (garbage, a stray print, a batch) is skipped and
//     logged;
//   - a line longer than max bytes (limits.max_result_bytes) is read to its
//     end without being kept; if it is a response, the SDK gets in its
//     place a JSON-RPC error response to the same id
//     (resultTooLargeResponse), so only that call fails; otherwise it is
//     skipped and logged;
//   - with raw set, an answer to one of toolgate's raw calls (rawcall.go)
//     goes to that call instead of the SDK, and the end of the input
//     fails the raw calls still waiting.
//
// ctx is only for the log records; the guard outlives any deadline of it
// (it reads for as long as the session lasts), so it is used without one.
func newStdoutGuard(ctx context.Context, r io.Reader, max int, log *slog.Logger, raw *rawCalls) *lineFilter {
	ctx = context.WithoutCancel(ctx)
	// made is the verdict in place of the answer line with id: marked for
	// the capture connection, which marks the call's slot (verdict.go).
	made := func(id json.RawMessage, v *verdictError) []byte {
		if raw != nil {
			raw.markMade(id, v)
		}
		return append(verdictResponse(id, v), '\n')
	}
	handle := func(l jsonLine) []byte {
		if l.over {
			if l.scan.method || classifyID(l.scan.id) != idOK {
				log.WarnContext(ctx, "upstream stdout: skipped a message larger than limits.max_result_bytes that answers no call",
					"bytes", l.size, "limit", max)
				return nil
			}
			log.WarnContext(ctx, "upstream result larger than limits.max_result_bytes discarded; its call fails",
				"bytes", l.size, "limit", max, "id", string(l.scan.id))
			return made(l.scan.id, resultTooLargeError(l.size, max))
		}
		line := trimSpace(l.data)
		if len(line) == 0 {
			return nil
		}
		if reason := checkUpstreamMessage(line); reason != "" {
			var scan idScanner
			scan.feed(line)
			if !scan.method && classifyID(scan.id) == idOK {
				// A malformed answer to a call: fail that call, not the
				// session. Its bytes are the call's result data: not logged.
				log.WarnContext(ctx, "upstream stdout: a malformed answer to a call; the call fails",
					"reason", reason, "bytes", len(line), "id", string(scan.id))
				return made(scan.id, brokenAnswerError(reason))
			}
			// A stray line (a print, garbage, or a broken message that
			// may carry tool output or a secret): never its bytes, only
			// what tells lines apart (strayLineAttrs).
			log.WarnContext(ctx, "upstream stdout: skipped a line that is not a JSON-RPC message",
				append([]any{"reason", reason}, strayLineAttrs(line)...)...)
			return nil
		}
		return append(line, '\n')
	}
	if raw == nil {
		return newLineFilter(r, max, handle)
	}
	var f *lineFilter
	f = newLineFilter(r, max, func(l jsonLine) []byte {
		if taken, alone := raw.divert(l); taken {
			if alone {
				yieldToAnswered(f)
			}
			return nil
		}
		out := handle(l)
		if out != nil {
			raw.passed.Add(1)
		}
		return out
	})
	f.end = raw.end
	return f
}

// checkUpstreamMessage returns "" when the SDK's stdio reader accepts line
// as one message, and otherwise why not. It is sdkDecodable after a check
// that line is a single object (the SDK would take an array for a batch).
func checkUpstreamMessage(line []byte) string {
	if !json.Valid(line) {
		return "not valid JSON"
	}
	if line[0] != '{' {
		return "not a single JSON-RPC message object"
	}
	if err := sdkDecodable(line); err != nil {
		return "not a JSON-RPC message the SDK can decode: " + err.Error()
	}
	return ""
}

// sdkDecodable returns nil when jsonrpc.DecodeMessage (go-sdk v1.8.0)
// decodes the valid JSON object line, and otherwise the rule it breaks:
// nesting of at most 1000 levels, "jsonrpc" the string "2.0", an id that
// is absent, null, a string or a float64 number, an error member that is
// absent, null or an object whose code is an int64 and whose message is a
// string, and a string method or else (a response) a non-null id. It does what
// DecodeMessage does without its decoder's large fixed allocation, which
// every result line would pay; TestSDKDecodable checks it against
// DecodeMessage.
func sdkDecodable(line []byte) error {
	if jsonDepth(line) > maxJSONDepth {
		return fmt.Errorf("nested deeper than %d levels", maxJSONDepth)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return errors.New("not an object")
	}
	var version string
	if json.Unmarshal(m["jsonrpc"], &version) != nil || version != "2.0" {
		return errors.New(`"jsonrpc" is not "2.0"`)
	}
	id, hasID := m["id"]
	idNull := !hasID || string(bytes.TrimSpace(id)) == "null"
	if !idNull {
		switch bytes.TrimSpace(id)[0] {
		case '"':
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			var f float64
			if json.Unmarshal(id, &f) != nil {
				return errors.New("the id overflows a float64")
			}
		default:
			return errors.New("the id is not a string, a number or null")
		}
	}
	if e, ok := m["error"]; ok && string(bytes.TrimSpace(e)) != "null" {
		var w struct {
			Code    *json.RawMessage `json:"code"`
			Message *json.RawMessage `json:"message"`
		}
		if bytes.TrimSpace(e)[0] != '{' || json.Unmarshal(e, &w) != nil {
			return errors.New("the error is not an object")
		}
		var code int64
		if w.Code != nil && string(*w.Code) != "null" && json.Unmarshal(*w.Code, &code) != nil {
			return errors.New("the error code is not an integer")
		}
		var msg string
		if w.Message != nil && string(*w.Message) != "null" && json.Unmarshal(*w.Message, &msg) != nil {
			return errors.New("the error message is not a string")
		}
	}
	if method, ok := m["method"]; ok {
		var s string
		if json.Unmarshal(method, &s) != nil {
			return errors.New("the method is not a string")
		}
		return nil
	}
	if idNull {
		return errors.New("a response without an id")
	}
	return nil
}

// strayLineAttrs are the log attributes of a stray stdout line (one that
// is not a JSON-RPC message): its length, the first 12 hex digits of its
// SHA-256 (the same line logs the same hash, so repeats are told apart
// without the bytes) and whether it is valid JSON. Its bytes are never
// logged: a stray line can be a broken message carrying a call's data
// (branch sdkbreak2; docs/architecture.md says how to see them).
func strayLineAttrs(line []byte) []any {
	sum := sha256.Sum256(line)
	return []any{"bytes", len(line), "sha256", hex.EncodeToString(sum[:6]), "json", json.Valid(line)}
}
