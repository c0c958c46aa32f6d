package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Newline-delimited JSON-RPC, as the stdio transport carries it, read
// defensively: the go-sdk ends a stdio session on the first line it cannot
// decode, on a line longer than its limit, and on a batch. The guards in
// stdioguard.go (agent side) and upstreamguard.go (stdio upstreams) read
// lines with a lineReader and check each with checkMessage before the SDK
// sees it.

// maxJSONDepth is the deepest nesting of objects and arrays the go-sdk
// decodes (its internal json package refuses deeper input).
const maxJSONDepth = 1000

// maxSafeID is the largest integer a numeric JSON-RPC id may have: the
// go-sdk decodes ids into float64 and answers with int64(value), so any
// integer past 2^53-1, or any fraction, would be answered under a
// different id.
const maxSafeID = 1<<53 - 1

// A jsonLine is one line read by a lineReader.
type jsonLine struct {
	data []byte // the line without its line end; nil when over
	over bool   // the line was longer than the limit and was not kept
	size int64  // the line's length in bytes, without its line end
	scan idScanner
}

// A lineReader reads lines, keeping at most max bytes of one. A longer line
// is read to its end without being kept; an idScanner sees it on the way,
// so the id of a message that is too large is still known.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte // reused for the next line, when it is small
}

// maxKeptBuffer is the largest line buffer a lineReader keeps for the next
// line; a larger one goes to the garbage collector.
const maxKeptBuffer = 1 << 20

func newLineReader(r *bufio.Reader, max int) *lineReader { return &lineReader{r: r, max: max} }

// next returns the next line. At the end of the input it returns what was
// read of the last line (maybe nothing) with the reader's error. The line's
// data is valid until the next call.
func (lr *lineReader) next() (jsonLine, error) {
	l := jsonLine{data: lr.buf[:0]}
	defer func() {
		if cap(l.data) <= maxKeptBuffer {
			lr.buf = l.data[:0]
		} else {
			lr.buf = nil
		}
	}()
	for {
		chunk, err := lr.r.ReadSlice('\n')
		content := len(chunk)
		if content > 0 && chunk[content-1] == '\n' {
			content--
		}
		l.size += int64(content)
		if !l.over && l.size > int64(lr.max) {
			l.over = true
			l.scan.feed(l.data)
			l.data = nil
		}
		if l.over {
			l.scan.feed(chunk)
		} else {
			if cap(l.data)-len(l.data) < content {
				// Double: append's growth for large slices is 1.25x, which
				// copies a line of many megabytes over and over.
				l.data = slices.Grow(l.data, max(content, len(l.data)))
			}
			l.data = append(l.data, chunk[:content]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n := len(l.data); n > 0 && l.data[n-1] == '\r' {
			l.data = l.data[:n-1]
			l.size--
		}
		return l, err
	}
}

// A lineFilter reads lines with a lineReader and passes on, for each, what
// handle returns (nil: nothing). handle runs in Read, one line at a time;
// what it returns may share the line's memory, which is not reused before
// it has been read.
type lineFilter struct {
	lines  *lineReader
	handle func(jsonLine) []byte

	buf []byte // bytes passed on, waiting to be read
	err error  // the reader's error, returned once buf is drained

	// end, when set, is called once with the reader's error (io.EOF at
	// the end of the input) when it is first seen.
	end func(error)
}

func newLineFilter(r io.Reader, max int, handle func(jsonLine) []byte) *lineFilter {
	return &lineFilter{lines: newLineReader(bufio.NewReaderSize(r, 64<<10), max), handle: handle}
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		l, err := f.lines.next()
		f.err = err
		f.buf = f.handle(l)
		if err != nil && f.end != nil {
			f.end(err)
			f.end = nil
		}
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

// scanner states of an idScanner at the top level of an object.
const (
	wantKey = iota
	wantColon
	inValue
)

// idScanner follows one JSON object fed to it in pieces and keeps only the
// raw value of its top-level "id" member (up to maxScannedID bytes) and
// whether it has a top-level "method" member. It never holds more than a
// few hundred bytes, whatever the size of the object.
type idScanner struct {
	depth    int
	inString bool
	escaped  bool
	state    int
	inKey    bool
	// key and val are arrays, not slices, so that scanning allocates
	// nothing but the id it keeps (issue 13: the raw call's answer line).
	key     [maxScannedKey]byte // the current top-level key: its first nkey bytes
	nkey    int
	keyOver bool
	keep    bool               // the current value is the id's: keep its bytes
	val     [maxScannedID]byte // bytes of the id's value so far: the first nval
	nval    int
	valOver bool
	id      json.RawMessage // the id's raw value, once read whole
	method  bool            // a top-level "method" member was seen
}

const (
	maxScannedKey = 16
	maxScannedID  = 128
)

func (s *idScanner) feed(b []byte) {
	for len(b) > 0 {
		// Fast paths: most of a large message is the inside of strings and
		// of nested values, which only matter for where they end.
		if !s.inKey && !s.keep {
			var i int
			switch {
			case s.inString && !s.escaped:
				i = bytes.IndexAny(b, `"\`)
			case !s.inString && s.depth > 1:
				i = bytes.IndexAny(b, `"{}[]`)
			}
			if i < 0 {
				return
			}
			b = b[i:]
		}
		s.step(b[0])
		b = b[1:]
	}
}

func (s *idScanner) step(c byte) {
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			if s.inKey {
				s.inKey, s.state = false, wantColon
				return
			}
		}
		switch {
		case s.inKey:
			if s.nkey < maxScannedKey {
				s.key[s.nkey] = c
				s.nkey++
			} else {
				s.keyOver = true
			}
		case s.keep:
			s.keepByte(c)
		}
		return
	}
	if s.depth == 1 {
		switch c {
		case ':':
			if s.state == wantColon {
				s.state = inValue
				key := s.key[:s.nkey]
				s.keep = !s.keyOver && string(key) == "id"
				s.method = s.method || (!s.keyOver && string(key) == "method")
				s.nval, s.valOver = 0, false
			}
			return
		case ',':
			s.endValue()
			s.state = wantKey
			return
		case '}':
			s.endValue()
			s.depth = 0
			return
		case '"':
			if s.state == wantKey {
				s.inString, s.inKey = true, true
				s.nkey, s.keyOver = 0, false
				return
			}
		}
	}
	switch c {
	case '"':
		s.inString = true
	case '{', '[':
		s.depth++
	case '}', ']':
		s.depth--
	}
	if s.keep {
		s.keepByte(c)
	}
}

func (s *idScanner) keepByte(c byte) {
	if s.nval < maxScannedID {
		s.val[s.nval] = c
		s.nval++
	} else {
		s.valOver = true
	}
}

func (s *idScanner) endValue() {
	if s.keep && !s.valOver {
		s.id = json.RawMessage(bytes.Clone(bytes.TrimSpace(s.val[:s.nval])))
	}
	s.keep = false
}

// idKind classifies a raw JSON-RPC id.
type idKind int

const (
	idNone    idKind = iota // absent or null
	idOK                    // a string, or an integer the go-sdk keeps exactly
	idMangled               // a number, or a string, the go-sdk would answer under another id
	idInvalid               // not a string, number or null
)

func classifyID(raw json.RawMessage) idKind {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return idNone
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return idInvalid
		}
		if !exactString(raw) {
			return idMangled
		}
		return idOK
	case c == '-' || (c >= '0' && c <= '9'):
		if !json.Valid(raw) {
			return idInvalid
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > maxSafeID || n < -maxSafeID {
			return idMangled
		}
		return idOK
	}
	return idInvalid
}

// exactString reports whether the JSON string raw (valid, with its quotes)
// decodes without a replacement: no byte that is not UTF-8 and no \u
// escape of a surrogate that is not half of a pair. The decoders (the
// SDK's, encoding/json) read each such byte or escape as U+FFFD, so ids
// "a\xff" and "a\xfe" (or "a\ud800") would be one id "a\ufffd" to them:
// the SDK answered both under it, and a cancel naming one reached the
// other's call (branch attack45).
func exactString(raw []byte) bool {
	s := raw[1 : len(raw)-1]
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if s[i+1] != 'u' {
				i += 2
				continue
			}
			r := hex4(s[i+2 : i+6])
			i += 6
			switch {
			case r >= 0xdc00 && r <= 0xdfff:
				return false // a second half alone
			case r >= 0xd800 && r <= 0xdbff:
				if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
					return false
				}
				if lo := hex4(s[i+2 : i+6]); lo < 0xdc00 || lo > 0xdfff {
					return false
				}
				i += 6
			}
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			i += n
		}
	}
	return true
}

// hex4 is the value of the four hex digits h (checked by the JSON's
// validation).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// answerID is the id an error answer about a message with id raw carries:
// the id as sent when it is a string or a number (so the sender can match
// it, even when it could not be served), else null. An id with bytes that
// are not UTF-8 is answered null: JSON text is UTF-8, and a reader that
// decodes it strictly would fail on the whole answer.
func answerID(raw json.RawMessage) json.RawMessage {
	switch classifyID(raw) {
	case idOK, idMangled:
		if raw = bytes.TrimSpace(raw); utf8.Valid(raw) {
			return raw
		}
	}
	return nil
}

// A messageError says why a line is not one JSON-RPC message the go-sdk
// serves faithfully: Code and Message are the JSON-RPC error to answer it
// with, ID the id to answer under (nil: null).
type messageError struct {
	Code    int64
	Message string
	ID      json.RawMessage
}

func (e *messageError) Error() string { return e.Message }

func invalidMessage(id json.RawMessage, format string, args ...any) *messageError {
	return &messageError{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: " + fmt.Sprintf(format, args...), ID: answerID(id)}
}

// checkMessage returns nil for a line that is one JSON-RPC 2.0 message (a
// request, notification or response, not a batch) that the go-sdk decodes
// and answers under the same id, and otherwise why not.
func checkMessage(line []byte) *messageError {
	_, e := checkMethod(line)
	return e
}

// checkMethod is checkMessage that also returns the message's method as
// the SDK reads it: its JSON escapes decoded ("tools\/call" is
// "tools/call"), nil for a response or a refused line. The stdio fronts
// pick their lines by it, so a method spelled with escapes reaches the
// front its plain spelling reaches (branch stdio43).
func checkMethod(line []byte) (method []byte, _ *messageError) {
	if !json.Valid(line) {
		return nil, &messageError{Code: jsonrpc.CodeParseError, Message: "parse error: the line is not valid JSON"}
	}
	if jsonDepth(line) > maxJSONDepth {
		return nil, invalidMessage(nil, "the message nests objects and arrays deeper than %d levels", maxJSONDepth)
	}
	switch bytes.TrimSpace(line)[0] {
	case '{':
	case '[':
		return nil, invalidMessage(nil, "JSON-RPC batches are not supported")
	default:
		return nil, invalidMessage(nil, "not a JSON-RPC message object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, invalidMessage(nil, "not a JSON-RPC message object")
	}
	if e := checkMembers(line, m); e != nil {
		return nil, e
	}
	return methodName(m["method"]), nil
}

// methodName is the string the JSON string raw holds (a checked method
// member), nil when raw is none. Without escapes it is raw's own bytes
// between the quotes.
func methodName(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 {
		return nil
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return []byte(s)
}

// checkMembers is checkMessage's look at the members m of the message
// object line.
func checkMembers(line []byte, m map[string]json.RawMessage) *messageError {
	id, hasID := m["id"]
	if string(bytes.TrimSpace(m["jsonrpc"])) != `"2.0"` {
		return invalidMessage(id, `not a JSON-RPC 2.0 message ("jsonrpc": "2.0" is required)`)
	}
	kind := classifyID(id)
	switch kind {
	case idInvalid:
		return invalidMessage(nil, "the id must be a string, an integer or null")
	case idMangled:
		if isJSONString(id) {
			return invalidMessage(id, "the id is a string that cannot be kept exactly (bytes that are not UTF-8, or half of a surrogate pair); use a string of UTF-8 text, or an integer")
		}
		return invalidMessage(id, "the id %s cannot be kept exactly; use a string, or an integer from -%d to %d", bytes.TrimSpace(id), int64(maxSafeID), int64(maxSafeID))
	}
	_, hasResult := m["result"]
	_, hasError := m["error"]
	if method, ok := m["method"]; ok {
		if !isJSONString(method) {
			return invalidMessage(id, "the method must be a string")
		}
		if hasResult || hasError {
			return invalidMessage(id, "a request must not have a result or error member")
		}
		if p, ok := m["params"]; ok && !isJSONStructured(p) {
			return invalidMessage(id, "params must be an object or an array")
		}
		if !exactCancelTarget(method, m["params"]) {
			return invalidMessage(id, "the requestId of notifications/cancelled cannot be kept exactly (a string with bytes that are not UTF-8 or half of a surrogate pair, or a number that is not an integer from -%d to %d): it would cancel another request", int64(maxSafeID), int64(maxSafeID))
		}
		// A request (an id member) must be answered, but the SDK takes one
		// with a null id for a notification: on stdio nothing answers it.
		// MCP allows no null id; a notification's passes (some send it).
		if hasID && kind == idNone && !isNotification(method) {
			return invalidMessage(nil, "a request's id must be a string or an integer, not null (a notification has no id)")
		}
	} else {
		switch {
		case !hasID || kind == idNone:
			return invalidMessage(nil, "neither a method nor an id")
		case hasResult == hasError:
			return invalidMessage(id, "a response must have exactly one of result and error")
		case hasError && !validErrorObject(m["error"]):
			return invalidMessage(id, `the error member must be an object with an integer "code" and a string "message"`)
		}
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		return invalidMessage(id, "the message cannot be decoded")
	}
	return nil
}

// exactCancelTarget reports whether a message with method (a JSON string)
// and params names, when it is a notifications/cancelled, a requestId the
// SDK's canceller reads as the request it names (go-sdk v1.8.0: the last
// "requestId" member, a string decoded with U+FFFD for each byte that is
// not UTF-8 and each lone surrogate, a number made a float64 and then an
// int64). A string that decodes with a replacement, or a number that is
// not an integer within ±maxSafeID (1.5 is read as 1), would cancel another
// request than the one named: false. Anything else is true (the SDK ignores
// a cancel without a string or number requestId).
func exactCancelTarget(method, params json.RawMessage) bool {
	if string(methodName(method)) != "notifications/cancelled" || len(params) == 0 {
		return true
	}
	var rid json.RawMessage
	eachMember(params, func(k string, v json.RawMessage) bool {
		if k == "requestId" {
			rid = v
		}
		return true
	})
	return exactRequestID(rid)
}

// exactRequestID is exactCancelTarget's look at a requestId's value.
func exactRequestID(rid json.RawMessage) bool {
	rid = bytes.TrimSpace(rid)
	if len(rid) == 0 {
		return true
	}
	switch c := rid[0]; {
	case c == '"':
		return !json.Valid(rid) || exactString(rid)
	case c == '-' || (c >= '0' && c <= '9'):
		f, err := strconv.ParseFloat(string(rid), 64)
		return err == nil && f == math.Trunc(f) && f <= maxSafeID && f >= -maxSafeID
	}
	return true
}

// isNotification reports whether method (a JSON string) names an MCP
// notification ("notifications/…").
func isNotification(method json.RawMessage) bool {
	var name string
	return json.Unmarshal(method, &name) == nil && strings.HasPrefix(name, "notifications/")
}

func isJSONString(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '"'
}

func isJSONStructured(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '{' || v[0] == '[')
}

func validErrorObject(v json.RawMessage) bool {
	var e struct {
		Code    *json.Number `json:"code"`
		Message *string      `json:"message"`
	}
	if !bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) || json.Unmarshal(v, &e) != nil || e.Code == nil || e.Message == nil {
		return false
	}
	_, err := strconv.ParseInt(e.Code.String(), 10, 64)
	return err == nil
}

// jsonDepth returns the deepest nesting of objects and arrays in valid JSON.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// errorLine is the JSON-RPC error response e, as one line.
func errorLine(e *messageError) []byte {
	id := e.ID
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": e.Code, "message": e.Message}})
	return append(b, '\n')
}
