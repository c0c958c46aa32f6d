package gateway

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// A validating scanner over the raw bytes of an upstream's tools/call
// result (issue 13). It reads a result's members by their exact keys, as
// the Go SDK's decoder does (go-sdk v1.8.0 internal/json: segmentio with
// DontMatchCaseInsensitiveStructFields), where encoding/json's struct
// decode matches keys case-insensitively; and it answers the plain
// result shape without a decode (plainRawResult). It allocates nothing:
// members come back as sub-slices of the input.

// maxScanDepth is the deepest nesting the scanner follows; a deeper
// value is reported as not scanned (ok false), and callers fall back to
// a decode, which has its own limits.
const maxScanDepth = 64

// jsonScan reads JSON from b at i.
type jsonScan struct {
	b []byte
	i int
}

// ws skips JSON whitespace.
func (s *jsonScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str reads the string at i: its bytes with the quotes, and whether it
// holds an escape; ok false when there is no valid JSON string at i
// (control characters, bad escapes, no end). UTF-8 is not checked.
func (s *jsonScan) str() (v []byte, esc, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i
	i := s.i + 1
	for i < len(s.b) {
		c := s.b[i]
		if strPlain[c] {
			// Most bytes: one load and one branch, not the switch's
			// compares (issue 13: every lean call's body is read here).
			i++
			continue
		}
		switch {
		case c == '"':
			s.i = i + 1
			return s.b[start:s.i], esc, true
		case c == '\\':
			esc = true
			if i+1 >= len(s.b) {
				return nil, false, false
			}
			switch s.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s.b) {
					return nil, false, false
				}
				for _, h := range s.b[i+2 : i+6] {
					if !isHexDigit(h) {
						return nil, false, false
					}
				}
				i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			i++
		}
	}
	return nil, false, false
}

// strPlain says which bytes stand for themselves inside a JSON string:
// all but the quote, the backslash and the control characters.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// value reads one JSON value at i (whitespace before it skipped) and
// returns its bytes; ok false when it is not valid JSON or nests deeper
// than maxScanDepth below depth.
func (s *jsonScan) value(depth int) ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) {
		return nil, false
	}
	start := s.i
	switch c := s.b[s.i]; c {
	case '"':
		v, _, ok := s.str()
		return v, ok
	case '{', '[':
		if depth >= maxScanDepth {
			return nil, false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == end {
			s.i++
			return s.b[start:s.i], true
		}
		for {
			if c == '{' {
				s.ws()
				if _, _, ok := s.str(); !ok {
					return nil, false
				}
				s.ws()
				if s.i >= len(s.b) || s.b[s.i] != ':' {
					return nil, false
				}
				s.i++
			}
			if _, ok := s.value(depth + 1); !ok {
				return nil, false
			}
			s.ws()
			if s.i >= len(s.b) {
				return nil, false
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case end:
				s.i++
				return s.b[start:s.i], true
			default:
				return nil, false
			}
		}
	case 't':
		return s.lit("true")
	case 'f':
		return s.lit("false")
	case 'n':
		return s.lit("null")
	default:
		return s.number()
	}
}

// lit reads the literal l at i.
func (s *jsonScan) lit(l string) ([]byte, bool) {
	if len(s.b)-s.i < len(l) || string(s.b[s.i:s.i+len(l)]) != l {
		return nil, false
	}
	s.i += len(l)
	return s.b[s.i-len(l) : s.i], true
}

// number reads a JSON number at i.
func (s *jsonScan) number() ([]byte, bool) {
	b, i := s.b, s.i
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return nil, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return nil, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	s.i = i
	return b[start:i], true
}

// membersScan iterates over the members of one JSON object (see
// scanMembers). After next reports false, bad tells whether the object
// (and, for a whole document, what follows it) was invalid.
type membersScan struct {
	s     jsonScan
	depth int
	n     int
	done  bool
	bad   bool
	whole bool
}

// scanMembers starts reading the members of the object b. whole: b is a
// whole document (only whitespace may follow the object); otherwise b is
// one value as jsonScan.value returned it.
func scanMembers(b []byte, depth int, whole bool) membersScan {
	m := membersScan{s: jsonScan{b: b}, depth: depth, whole: whole}
	m.s.ws()
	if m.s.i >= len(b) || b[m.s.i] != '{' || depth >= maxScanDepth {
		m.done, m.bad = true, true
		return m
	}
	m.s.i++
	return m
}

// next returns the next member: key with its quotes (esc: it holds an
// escape) and the value's bytes; false at the end or on invalid JSON.
func (m *membersScan) next() (key []byte, esc bool, val []byte, ok bool) {
	if m.done {
		return nil, false, nil, false
	}
	m.s.ws()
	if m.s.i >= len(m.s.b) {
		return m.fail()
	}
	if m.n == 0 {
		if m.s.b[m.s.i] == '}' {
			return m.end()
		}
	} else {
		switch m.s.b[m.s.i] {
		case '}':
			return m.end()
		case ',':
			m.s.i++
			m.s.ws()
		default:
			return m.fail()
		}
	}
	key, esc, ok = m.s.str()
	if !ok {
		return m.fail()
	}
	m.s.ws()
	if m.s.i >= len(m.s.b) || m.s.b[m.s.i] != ':' {
		return m.fail()
	}
	m.s.i++
	if val, ok = m.s.value(m.depth + 1); !ok {
		return m.fail()
	}
	m.n++
	return key, esc, val, true
}

func (m *membersScan) fail() ([]byte, bool, []byte, bool) {
	m.done, m.bad = true, true
	return nil, false, nil, false
}

func (m *membersScan) end() ([]byte, bool, []byte, bool) {
	m.s.i++
	m.done = true
	if m.whole {
		m.s.ws()
		m.bad = m.s.i != len(m.s.b)
	}
	return nil, false, nil, false
}

// elementsScan iterates over the elements of one JSON array value.
type elementsScan struct {
	s     jsonScan
	depth int
	n     int
	done  bool
	bad   bool
}

// scanElements starts reading the elements of the array value b.
func scanElements(b []byte, depth int) elementsScan {
	e := elementsScan{s: jsonScan{b: b}, depth: depth}
	if len(b) == 0 || b[0] != '[' || depth >= maxScanDepth {
		e.done, e.bad = true, true
		return e
	}
	e.s.i = 1
	return e
}

// next returns the next element's bytes; false at the end or on invalid
// JSON.
func (e *elementsScan) next() ([]byte, bool) {
	if e.done {
		return nil, false
	}
	e.s.ws()
	if e.s.i >= len(e.s.b) {
		e.done, e.bad = true, true
		return nil, false
	}
	if c := e.s.b[e.s.i]; c == ']' {
		e.done = true
		return nil, false
	} else if e.n > 0 {
		if c != ',' {
			e.done, e.bad = true, true
			return nil, false
		}
		e.s.i++
	}
	v, ok := e.s.value(e.depth + 1)
	if !ok {
		e.done, e.bad = true, true
		return nil, false
	}
	e.n++
	return v, true
}

// keyString is the key key (with its quotes) as a decode reads it: its
// escapes resolved when esc.
func keyString(key []byte, esc bool) (string, bool) {
	if !esc {
		return string(key[1 : len(key)-1]), true
	}
	var s string
	if json.Unmarshal(key, &s) != nil {
		return "", false
	}
	return s, true
}

// keyFolds reports whether key (with its quotes; esc: it holds an
// escape) is one encoding/json's struct decode would match to one of
// names (case-insensitively, with Unicode's simple folding: "ſ" is "s",
// "K" (Kelvin) is "k") without being it exactly; true too when an escaped
// key cannot be read. The names are ASCII.
func keyFolds(key []byte, esc bool, names ...string) bool {
	k := key[1 : len(key)-1]
	if esc {
		s, ok := keyString(key, esc)
		if !ok {
			return true
		}
		k = []byte(s)
	}
	ascii := true
	for _, c := range k {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	for _, n := range names {
		// An ASCII key folds only to a name of its length (the names are
		// ASCII; the folds that change a length, like K to the Kelvin sign,
		// need a byte past ASCII): EqualFold need not be asked.
		if ascii && len(k) != len(n) {
			continue
		}
		if string(k) != n && bytes.EqualFold(k, []byte(n)) {
			return true
		}
	}
	return false
}

// resultMembers are the members of a tools/call result the gateway
// reads, as the SDK's decoder reads them: by exact key, the last of
// repeated keys winning; nil when absent.
type resultMembers struct {
	content, structuredContent, isError, meta []byte
}

// The members of a tools/call result the gateway reads (resultField).
const (
	fieldOther = iota
	fieldContent
	fieldStructuredContent
	fieldIsError
	fieldMeta
	fieldResultType
)

// resultField is the member of a tools/call result the key k (with its
// quotes; esc: it holds an escape) names exactly; ok false when an
// escaped key cannot be read.
func resultField(k []byte, esc bool) (int, bool) {
	if esc {
		s, ok := keyString(k, esc)
		if !ok {
			return 0, false
		}
		k = []byte(`"` + s + `"`)
	}
	switch string(k[1 : len(k)-1]) {
	case "content":
		return fieldContent, true
	case "structuredContent":
		return fieldStructuredContent, true
	case "isError":
		return fieldIsError, true
	case "_meta":
		return fieldMeta, true
	case "resultType":
		return fieldResultType, true
	}
	return fieldOther, true
}

// scanResult reads raw's members by exact key (see resultMembers); ok
// false when raw is not one valid JSON object the scanner could follow
// (or a key could not be read).
func scanResult(raw []byte) (r resultMembers, ok bool) {
	m := scanMembers(raw, 0, true)
	for {
		k, esc, v, more := m.next()
		if !more {
			break
		}
		f, ok := resultField(k, esc)
		if !ok {
			return resultMembers{}, false
		}
		switch f {
		case fieldContent:
			r.content = v
		case fieldStructuredContent:
			r.structuredContent = v
		case fieldIsError:
			r.isError = v
		case fieldMeta:
			r.meta = v
		}
	}
	if m.bad {
		return resultMembers{}, false
	}
	return r, true
}

// resultMembersOf is scanResult's reading of raw or, for a result the
// scanner does not follow (nesting deeper than maxScanDepth), the same
// members from a decode into a map (exact keys too); an error means raw
// is not JSON (or not an object).
func resultMembersOf(raw []byte) (resultMembers, error) {
	if r, ok := scanResult(raw); ok {
		return r, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return resultMembers{}, err
	}
	return resultMembers{content: m["content"], structuredContent: m["structuredContent"], isError: m["isError"], meta: m["_meta"]}, nil
}

// contentKeysFold reports whether an item of the content list v (valid
// JSON) has a key encoding/json's struct decode matches to one of its
// item fields (type, text, annotations, _meta) that is not that field's
// exact name: the SDK's decoder drops such a key (issue 13).
func contentKeysFold(v []byte) bool {
	e := scanElements(v, 1)
	for {
		it, more := e.next()
		if !more {
			return e.bad
		}
		if it[0] != '{' {
			continue
		}
		m := scanMembers(it, 2, false)
		for {
			k, esc, _, more := m.next()
			if !more {
				break
			}
			if keyFolds(k, esc, "type", "text", "annotations", "_meta") {
				return true
			}
		}
		if m.bad {
			return true
		}
	}
}

// appendCompactHTML appends the valid JSON value src to dst as
// encoding/json writes a json.RawMessage it marshals: whitespace outside
// strings removed, "<", ">", "&", U+2028 and U+2029 in strings escaped
// (encoding/json's compact with HTML escaping).
func appendCompactHTML(dst, src []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	inStr, esc := false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			case c == '<' || c == '>' || c == '&':
				dst = append(dst, src[start:i]...)
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
				start = i + 1
			case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
				dst = append(dst, src[start:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hex[src[i+2]&0xF])
				i += 2
				start = i + 1
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case ' ', '\t', '\n', '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

// scanRawAnswer is parseRawAnswer's answer, without a decode, for the
// common answer line: one JSON object with "jsonrpc":"2.0", a result
// object and no error (or a null one); result is a copy of the result's
// bytes (line's buffer may be reused). ok false for anything else, and
// for a line with a repeated member or a key encoding/json's struct
// decode would match to jsonrpc, result or error without being it
// exactly: then parseRawAnswerDecoded, whose answer the scanner's always
// equals (TestScanRawAnswerIsTheDecode), decides.
func scanRawAnswer(line []byte) (result []byte, ok bool) {
	var jsonrpc, res, errv []byte
	m := scanMembers(line, 0, true)
	for {
		k, esc, v, more := m.next()
		if !more {
			break
		}
		if keyFolds(k, esc, "jsonrpc", "result", "error") {
			return nil, false
		}
		var dup bool
		switch {
		case keyIsExactly(k, esc, "jsonrpc"):
			dup, jsonrpc = jsonrpc != nil, v
		case keyIsExactly(k, esc, "result"):
			dup, res = res != nil, v
		case keyIsExactly(k, esc, "error"):
			dup, errv = errv != nil, v
		}
		if dup {
			return nil, false
		}
	}
	if m.bad || string(jsonrpc) != `"2.0"` || (errv != nil && string(errv) != "null") || len(res) == 0 || res[0] != '{' {
		return nil, false
	}
	return append([]byte(nil), res...), true
}

// keyIsExactly reports whether key (with its quotes; esc: it holds an
// escape) is name once its escapes are resolved.
func keyIsExactly(key []byte, esc bool, name string) bool {
	if !esc {
		return string(key[1:len(key)-1]) == name
	}
	s, ok := keyString(key, esc)
	return ok && s == name
}

// scanEventHead reads what readRawStream and sseTee first need of a
// JSON-RPC message on an upstream's event stream, without a decode: the
// raw value of its top-level "id" (nil when absent) and whether it has a
// top-level "method". ok is false when a decode must decide: msg is not
// one valid JSON object, it repeats "id" or "method", or it has a key
// encoding/json's struct decode would match to either without being it
// exactly (another case, an escape, "ſ"/"K" folds). When ok, a decode of
// msg into sseMessage succeeds with an empty Method exactly when method
// is false and with ID equal to id (TestScanEventHeadIsTheDecode).
func scanEventHead(msg []byte) (id []byte, method, ok bool) {
	m := scanMembers(msg, 0, true)
	var seenID bool
	for {
		k, esc, v, more := m.next()
		if !more {
			break
		}
		if keyFolds(k, esc, "id", "method") {
			return nil, false, false
		}
		var dup bool
		switch {
		case keyIsExactly(k, esc, "id"):
			dup, seenID, id = seenID, true, v
		case keyIsExactly(k, esc, "method"):
			dup, method = method, true
		}
		if dup {
			return nil, false, false
		}
	}
	if m.bad {
		return nil, false, false
	}
	return id, method, true
}
