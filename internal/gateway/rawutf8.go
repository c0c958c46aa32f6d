package gateway

import (
	"encoding/json"
	"unicode/utf8"
)

// repairUTF8 returns raw, a valid JSON value passed through from an
// upstream, with each byte that is not part of valid UTF-8 replaced by
// U+FFFD, as the SDK path's decode and encode turn it (encoding/json
// decodes each such byte of a string as U+FFFD and writes U+FFFD as it
// is); raw itself when it is valid UTF-8 (no copy). Such bytes can stand
// only inside strings of valid JSON, so the result is valid JSON too.
// JSON is UTF-8 (RFC 8259): a lean call answered with the upstream's
// bytes as they came gave the agent an answer a strict decoder refuses
// whole (branch attack15).
func repairUTF8(raw json.RawMessage) json.RawMessage {
	if utf8.Valid(raw) {
		return raw
	}
	out := make(json.RawMessage, 0, len(raw)+16)
	for i := 0; i < len(raw); {
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
