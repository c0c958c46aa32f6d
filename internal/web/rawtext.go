package web

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"toolgate/internal/api"
)

// textSegments splits s, a JSON text (the display copy shown as text:
// pages.go), into the segments to show, marked as the tree marks a
// string's (segments): in each string, a \uXXXX escape of a character the
// page shows escaped (a hidden character, a look-alike space; the display
// copy writes the first so) and such a character written as it is are
// "hidden", with their title; a redaction or truncation marker is found
// within one string only, so text an agent puts in two values cannot make
// one badge of the members between them. Everything else is s as it is:
// an escape of a plain character, an escaped backslash before "u202E" (the
// agent's text), the text outside strings. A text that is not JSON is
// split as far as its quotes go. Time and memory are linear in len(s).
func textSegments(s string) []segment {
	sp := textSplitter{s: s}
	for i := 0; i < len(s); {
		q := strings.IndexByte(s[i:], '"')
		if q < 0 {
			break
		}
		i += q + 1
		end := stringEnd(s, i)
		sp.str(i, end)
		i = end + 1
	}
	sp.flush(len(s))
	return sp.out
}

// A textSplitter gathers the segments of s: s[plain:] up to the next
// marked segment is plain text, written as one segment when that comes
// (flush).
type textSplitter struct {
	s     string
	out   []segment
	plain int
}

// flush appends s[plain:i] as plain text, then takes i as the start of
// the next plain text.
func (sp *textSplitter) flush(i int) {
	if i > sp.plain {
		sp.out = append(sp.out, segment{Text: sp.s[sp.plain:i]})
	}
	sp.plain = i
}

// mark appends seg, which stands for s[i:j].
func (sp *textSplitter) mark(i, j int, seg segment) {
	sp.flush(i)
	sp.out = append(sp.out, seg)
	sp.plain = j
}

// stringEnd returns the index of the quote that ends the JSON string whose
// contents start at s[i:], or len(s).
func stringEnd(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case '"':
			return i
		case '\\':
			i += 2
		default:
			i++
		}
	}
	return len(s)
}

// str splits s[i:end], the contents of a JSON string as written (escapes
// not decoded).
func (sp *textSplitter) str(i, end int) {
	last := i
	for _, m := range markerRE.FindAllStringIndex(sp.s[i:end], -1) {
		a, b := i+m[0], i+m[1]
		sp.escapes(last, a)
		class := "redacted"
		if strings.HasPrefix(sp.s[a:], "…[truncated") {
			class = "cut"
		}
		sp.mark(a, b, segment{Text: visible(sp.s[a:b]), Class: class})
		last = b
	}
	sp.escapes(last, end)
}

// escapes splits s[i:end], JSON string contents as written: the escapes
// and characters the page shows as hidden marked, the rest plain.
func (sp *textSplitter) escapes(i, end int) {
	t := sp.s[:end]
	for i < end {
		if t[i] == '\\' {
			r, n := decodeEscape(t[i:])
			switch {
			case n > 2 && (r == utf8.RuneError || api.IsShownEscaped(r)):
				sp.mark(i, i+n, segment{Text: t[i : i+n], Class: "hidden", Title: runeTitle(r)})
			case n == 6 && r == '[':
				// The display copy writes so the "[" of the agent's text
				// written like a marker (markLookAlikes).
				sp.mark(i, i+n, segment{Text: t[i : i+n], Class: "hidden", Title: lookAlikeTitle})
			}
			i += max(n, 1)
			continue
		}
		r, w := utf8.DecodeRuneInString(t[i:])
		if api.IsShownEscaped(r) || (r == utf8.RuneError && w == 1) {
			sp.mark(i, i+w, segment{Text: escapeRune(r, t[i]), Class: "hidden", Title: runeTitle(r)})
		}
		i += w
	}
}

// decodeEscape decodes the JSON escape at the start of t (t[0] is a
// backslash): the character and the escape's length in bytes. A \uXXXX
// escape of a high surrogate followed by one of a low surrogate is one
// character (12 bytes); a lone surrogate is utf8.RuneError (6 bytes). An
// escape that is not \uXXXX is 2 bytes (its character is not needed).
func decodeEscape(t string) (rune, int) {
	r, ok := hex4(t)
	if !ok {
		return 0, min(2, len(t))
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex4(t[6:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}

// hex4 reads a \uXXXX escape at the start of t.
func hex4(t string) (rune, bool) {
	if len(t) < 6 || t[0] != '\\' || t[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range []byte(t[2:6]) {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
