package gateway

import "bytes"

// A result that is not a tools/call result on the lean path (branch
// verdict). The lean path passes a 2025 agent the upstream's result bytes
// as they came, without a decode (upstream.callRaw): a result object the
// SDK path refuses, such as {"content":5}, content items that are not
// objects or name no known type, or an isError that is not a boolean,
// reached the agent as a result and was recorded "ok", where the SDK path
// and the 2026-07-28 path fail the call as a malformed answer
// (notCallResult: "may have run", transport_error). callRaw now checks
// each result's shape first (callResultShape): the common result, a list
// of text items, is read by the scanner (rawscan.go) without a decode or
// an allocation; anything else is decided by decodeCallResult, the decode
// the SDK front's raw path makes of the same bytes (the go-sdk's own
// CallToolResult decode for any content but text), so the lean path
// refuses exactly what that path refuses. Unknown members, _meta,
// structuredContent of any shape and big numbers in them pass.

// callResultShape returns "" when the result object raw is a tools/call
// result as the SDK path reads it, and otherwise why not.
func callResultShape(raw []byte) string {
	if plainCallResult(raw) {
		return ""
	}
	if _, err := decodeCallResult(raw); err != nil {
		return "not a tools/call result"
	}
	return ""
}

// plainCallResult reports whether raw is, by the scanner's reading, a
// valid tools/call result of the common shape: isError absent, null or a
// boolean, _meta absent, null or an object, content absent, null or a list
// of items each with exactly a "type" of "text" and a string "text" (and
// maybe an object or null "_meta"; plainTextMembers). false means "decide by a decode", not
// "refuse".
func plainCallResult(raw []byte) bool {
	r, ok := scanResult(raw)
	if !ok {
		return false
	}
	switch string(r.isError) {
	case "", "null", "true", "false":
	default:
		return false
	}
	if !objectOrNull(r.meta) {
		return false
	}
	if len(r.content) == 0 || string(r.content) == "null" {
		return true
	}
	return plainTextItems(r.content)
}

// plainTextItems reports whether the list c (one valid JSON value, an
// array) holds only plain text items (plainTextItem), reading each item's
// members as it goes: one pass over the list.
func plainTextItems(c []byte) bool {
	s := jsonScan{b: c, i: 1}
	for n := 0; ; n++ {
		s.ws()
		if s.i >= len(c) {
			return false
		}
		if c[s.i] == ']' {
			return true
		}
		if n > 0 {
			if c[s.i] != ',' {
				return false
			}
			s.i++
			s.ws()
		}
		if s.i >= len(c) || c[s.i] != '{' {
			return false
		}
		m := scanMembers(c[s.i:], 2, false)
		if !plainTextMembers(&m) {
			return false
		}
		s.i += m.s.i
	}
}

// plainTextMembers reports whether the object m reads is a plain text
// item: exactly "type":"text", a string "text" and maybe a "_meta" that is
// an object or null, every key unescaped and unrepeated.
func plainTextMembers(m *membersScan) bool {
	var typ, text bool
	for {
		k, esc, v, more := m.next()
		if !more {
			break
		}
		if esc {
			return false
		}
		switch string(k) {
		case `"type"`:
			if typ || string(v) != `"text"` {
				return false
			}
			typ = true
		case `"text"`:
			if text || v[0] != '"' {
				return false
			}
			text = true
		case `"_meta"`:
			if !objectOrNull(v) {
				return false
			}
		default:
			return false
		}
	}
	return !m.bad && typ && text
}

// objectOrNull reports whether the member value v (nil: absent) is absent,
// null or an object.
func objectOrNull(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null" || v[0] == '{'
}
