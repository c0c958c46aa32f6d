package gateway

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// repairUTF8 returns raw, a valid JSON value passed through from an
// upstream, with each byte that is not part of valid UTF-8 replaced by
// U+FFFD, and each \u escape of a lone UTF-16 surrogate (\ud800 not
// followed by a \udc00-\udfff escape, or a low one alone) by \ufffd, as
// the SDK path's decode and encode turn them (encoding/json and the
// SDK's decoder decode each such byte of a string, and each lone
// surrogate escape, as U+FFFD); raw itself when it has neither (no
// copy). Such bytes can stand only inside strings of valid JSON, and a
// backslash only in a string's escape, so the result is valid JSON too.
// JSON is UTF-8 (RFC 8259): a lean call answered with the upstream's
// bytes as they came gave the agent an answer a strict decoder refuses
// whole (branch attack15; a lone surrogate escape, which Rust's
// serde_json and Go's encoding/json/v2 refuse: branch attack16).
func repairUTF8(raw json.RawMessage) json.RawMessage {
	if utf8.Valid(raw) && !hasLoneSurrogate(raw) {
		return raw
	}
	out := make(json.RawMessage, 0, len(raw)+16)
	for i := 0; i < len(raw); {
		if raw[i] == '\\' && i+1 < len(raw) {
			n := escapeLen(raw[i:])
			if n == 6 && isSurrogateEscape(raw[i:]) {
				out = append(out, `\ufffd`...)
			} else {
				out = append(out, raw[i:i+n]...)
			}
			i += n
			continue
		}
		r, n := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, raw[i:i+n]...)
		}
		i += n
	}
	return out
}

// hasLoneSurrogate reports whether raw (valid JSON) has a \u escape of a
// UTF-16 surrogate that is not half of a high-low pair of escapes. It
// looks only at each "\u" (one vectorized search when there is none),
// and further only at those of a surrogate: after an odd run of
// backslashes, "\u" is text after an escaped backslash.
func hasLoneSurrogate(raw []byte) bool {
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		p := i + j
		i = p + 2
		if p+2 >= len(raw) || raw[p+2]|0x20 != 'd' || !isSurrogateEscape(raw[p:]) {
			continue
		}
		k := p
		for k > 0 && raw[k-1] == '\\' {
			k--
		}
		if (p-k)%2 == 1 {
			continue // "\\u": an escaped backslash, then a u
		}
		if escapeLen(raw[p:]) == 12 {
			i = p + 12 // a high-low pair
			continue
		}
		return true
	}
}

// escapeLen is the length of the escape b starts with (b[0] is a
// backslash of valid JSON): 12 for a high-low surrogate pair of \u
// escapes, 6 for another \u escape, 2 for the others.
func escapeLen(b []byte) int {
	r, ok := u4(b)
	if !ok {
		return min(2, len(b))
	}
	if 0xd800 <= r && r < 0xdc00 {
		if r2, ok := u4(b[6:]); ok && 0xdc00 <= r2 && r2 < 0xe000 {
			return 12
		}
	}
	return 6
}

// isSurrogateEscape reports whether b starts with a \u escape of a UTF-16
// surrogate (U+D800 to U+DFFF).
func isSurrogateEscape(b []byte) bool {
	r, ok := u4(b)
	return ok && 0xd800 <= r && r < 0xe000
}

// u4 reads the \uXXXX escape b starts with.
func u4(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
