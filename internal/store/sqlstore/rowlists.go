package sqlstore

import (
	"strings"
	"unicode/utf8"
)

// decodeStrings is decodeList[string] (json.Unmarshal of a stored list of
// strings: display_warnings, approvers) with a short cut for the lists
// jsonText writes of plain strings: `["a","b"]` with no backslash in text,
// so that every '"' delimits a string, and each string valid UTF-8
// without control characters. json.Unmarshal gives those strings as they
// stand; here they are slices of text, and the list is the one
// allocation (json.Unmarshal: ≈ 10, and a copy of text). Anything else
// (an escape, spaces between the items, another shape) goes to
// decodeList, so the result and the error are json.Unmarshal's.
func decodeStrings(text string) ([]string, error) {
	n := len(text)
	if n < 4 || text[0] != '[' || text[1] != '"' || text[n-2] != '"' || text[n-1] != ']' ||
		strings.IndexByte(text, '\\') >= 0 {
		return decodeList[string](text)
	}
	inner := text[2 : n-2]
	items := strings.Count(inner, `","`) + 1
	if strings.Count(inner, `"`) != 2*(items-1) { // a '"' outside the separators
		return decodeList[string](text)
	}
	out := make([]string, 0, items)
	for s := range strings.SplitSeq(inner, `","`) {
		if !plainString(s) {
			return decodeList[string](text)
		}
		out = append(out, s)
	}
	return out, nil
}

// plainString reports whether s, between quotes, is a JSON string that
// decodes to itself: valid UTF-8 and no control character (JSON refuses
// those; it would replace invalid UTF-8 with U+FFFD).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 {
			return false
		}
	}
	return utf8.ValidString(s)
}
