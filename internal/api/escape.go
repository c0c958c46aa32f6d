package api

import (
	"fmt"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// IsHidden reports whether r is a character that a terminal or browser may
// render invisibly, or use to move the cursor or reorder text, so that what
// a reviewer sees differs from what runs (case C15): C0 and C1 controls
// (including tab and newline), format characters (Unicode category Cf: bidi
// controls, zero-width characters, tag characters, BOM), line and paragraph
// separators, variation selectors, and blank letters (the combining
// grapheme joiner, Hangul fillers, Khmer inherent vowels). It flags a superset
// of what the approval package escapes in the display copy.
func IsHidden(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r < 0x80:
		return false
	case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
		return true
	case r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0100 && r <= 0xe01ef: // variation selectors
		return true
	case r == 0x034f, r == 0x115f, r == 0x1160, r == 0x17b4, r == 0x17b5, r == 0x3164, r == 0xffa0:
		return true
	}
	return false
}

// IsLookAlikeSpace reports whether r is a space other than U+0020 (Unicode
// category Zs: U+00A0 NO-BREAK SPACE, U+1680, U+2000–U+200A, U+202F,
// U+205F, U+3000 IDEOGRAPHIC SPACE) or U+2800 BRAILLE PATTERN BLANK: shown
// as they are, a value with one reads as a value with a plain space
// ("rm\u00a0-rf" as "rm -rf").
func IsLookAlikeSpace(r rune) bool {
	return r != ' ' && (r == 0x2800 || unicode.Is(unicode.Zs, r))
}

// IsShownEscaped reports whether a surface a reviewer reads (the inbox, the
// CLI's text output) shows r as an escape: the [IsHidden] characters and the
// [IsLookAlikeSpace] ones. The REST API's JSON escapes only IsHidden, so that
// text in languages that use no-break spaces stays as it is for programs.
func IsShownEscaped(r rune) bool {
	return IsHidden(r) || r >= 0x80 && IsLookAlikeSpace(r)
}

// EscapeJSON returns b, a JSON text, with every [IsHidden] character other
// than JSON whitespace (tab, newline, carriage return) written as a \uXXXX
// escape (a surrogate pair above U+FFFF), so the text keeps its meaning but
// shows those characters visibly. Outside strings valid JSON holds only ASCII,
// so only string contents change. Invalid UTF-8 bytes become \uFFFD. It
// returns b itself when nothing needs escaping.
func EscapeJSON(b []byte) []byte {
	return escapeJSON(b, IsHidden)
}

// EscapeJSONShown is [EscapeJSON] for a reviewer's eyes: it also escapes
// the [IsLookAlikeSpace] characters ([IsShownEscaped]).
func EscapeJSONShown(b []byte) []byte {
	return escapeJSON(b, IsShownEscaped)
}

// escapeJSON is EscapeJSON escaping the characters esc reports.
func escapeJSON(b []byte, esc func(rune) bool) []byte {
	i := firstToEscape(b, esc)
	if i < 0 {
		return b
	}
	return appendEscaped(make([]byte, 0, len(b)+16), b, i, esc)
}

// appendEscaped appends b escaped to out, b[:i] needing none.
func appendEscaped(out, b []byte, i int, esc func(rune) bool) []byte {
	out = append(out, b[:i]...)
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = append(out, `\uFFFD`...)
		case r == '\t' || r == '\n' || r == '\r' || !esc(r):
			out = append(out, b[i:i+n]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04X\u%04X`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04X`, r)
		}
		i += n
	}
	return out
}

// firstToEscape returns the index of the first rune of b that escapeJSON
// with esc would change, or -1.
func firstToEscape(b []byte, esc func(rune) bool) int {
	for i := 0; i < len(b); {
		c := b[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		if esc(r) && r != '\t' && r != '\n' && r != '\r' {
			return i
		}
		i += n
	}
	return -1
}
