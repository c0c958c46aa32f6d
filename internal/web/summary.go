package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// summarize returns a one-line summary of a display copy: top-level
// members as key: value, nested values abbreviated, hidden characters and
// line breaks visible, cut at max characters with "…".
func summarize(display json.RawMessage, maxLen int) string {
	s, _ := summarizeWhole(display, maxLen)
	return s
}

// summarizeWhole is summarize, also reporting whether the summary shows
// every value of the display copy: nothing cut, no nested value
// abbreviated. Only then may the list approve the request (bulk): an
// agent could otherwise pad its arguments so that the part that matters
// is not in the line. A display copy that is not one JSON value (or nests
// deeper than maxDepth) is shown whole with hidden characters visible, and
// never whole.
//
// Its cost follows what the line shows (args29): the copy is read once
// without making anything of the values the line does not show (nested
// values are only counted, members past the line only checked), and a
// string is decoded only as far as the line can show it. The line is the
// one the base's tree gave (summarizeWholeBase in the tests).
func summarizeWhole(display json.RawMessage, maxLen int) (string, bool) {
	s := summarizer{d: display, max: maxLen, whole: true}
	if err := s.document(); err != nil {
		return visible(string(display)), false
	}
	out := s.b.String()
	if s.runes > maxLen {
		// Cut by characters as written: lookAlikeMark is no valid UTF-8,
		// which a conversion to runes would make U+FFFD.
		cut := 0
		for range maxLen - 1 {
			_, w := utf8.DecodeRuneInString(out[cut:])
			cut += w
		}
		out = out[:cut] + "…"
		s.whole = false
	}
	return out, s.whole
}

// errNotJSON is what the summarizer's reading of a copy that is not one
// JSON value (or nests too deeply) ends with.
var errNotJSON = errors.New("not one JSON value")

// A summarizer reads a display copy (RFC 8259, as json.Decoder.Token reads
// it) and writes its line into b.
type summarizer struct {
	d     []byte
	pos   int
	max   int             // the line's most characters
	b     strings.Builder // the line so far
	runes int             // the characters in b
	whole bool            // every value written so far was shown whole
}

// full reports whether the line is already longer than it may be: what
// comes after is cut off, so it is only checked, not written.
func (s *summarizer) full() bool { return s.runes > s.max }

func (s *summarizer) write(t string) {
	s.b.WriteString(t)
	s.runes += utf8.RuneCountInString(t)
}

func (s *summarizer) document() error {
	s.space()
	if s.pos < len(s.d) && s.d[s.pos] == '{' {
		if err := s.members(); err != nil {
			return err
		}
	} else if err := s.shown(0); err != nil {
		return err
	}
	s.space()
	if s.pos != len(s.d) {
		return errNotJSON
	}
	return nil
}

// members reads the top-level object and writes its members as
// "key: value" until the line is full.
func (s *summarizer) members() error {
	s.pos++ // '{'
	s.space()
	if s.pos < len(s.d) && s.d[s.pos] == '}' {
		s.pos++
		s.write("(no arguments)")
		return nil
	}
	for i := 0; ; i++ {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.colon(); err != nil {
			return err
		}
		if !s.full() {
			if i > 0 {
				s.write(", ")
			}
			k, _, err := unquotePrefix(key, 0, s.max+1)
			if err != nil {
				return err
			}
			s.write(rowKey(markRowLookAlikes(key, k)))
			s.write(": ")
		}
		if s.full() {
			_, err = s.skip(1)
		} else {
			err = s.shown(1)
		}
		if err != nil {
			return err
		}
		more, err := s.next('}')
		if err != nil || !more {
			return err
		}
	}
}

// shown reads the value at depth and writes it as the line shows it: a
// string cut after valueLen characters (never inside a redaction marker),
// an object or array as its count, a literal as written.
func (s *summarizer) shown(depth int) error {
	if s.pos >= len(s.d) { // depth is 0 or 1: skip checks maxDepth
		return errNotJSON
	}
	switch c := s.d[s.pos]; c {
	case '"':
		raw, err := s.str()
		if err != nil {
			return err
		}
		v, whole, err := shownString(raw)
		if err != nil {
			return err
		}
		s.write(v)
		s.whole = s.whole && whole
	case '{', '[':
		n, err := s.skip(depth)
		if err != nil {
			return err
		}
		if c == '{' {
			s.write(fmt.Sprintf("{%d %s}", n, plural(n, "key", "keys")))
		} else {
			s.write(fmt.Sprintf("[%d %s]", n, plural(n, "item", "items")))
		}
		s.whole = s.whole && n == 0
	default:
		start := s.pos
		if _, err := s.skip(depth); err != nil {
			return err
		}
		lit := s.d[start:s.pos] // a number as written, true, false or null: ASCII
		s.write(string(lit[:min(len(lit), s.max+1)]))
	}
	return nil
}

// shownString is a string value (raw: between its quotes, as in the copy)
// as the line shows it, and whether that is all of it.
func shownString(raw []byte) (string, bool, error) {
	// Enough to place the cut (valueLen characters of at most 4 bytes)
	// and to see whole a redaction marker that starts before it (at most
	// 812 bytes: 11, 200 characters, 1).
	const need = 4*valueLen + 1024
	p, all, err := unquotePrefix(raw, need, valueLen+1)
	if err != nil {
		return "", false, err
	}
	s := strings.ReplaceAll(markRowLookAlikes(raw, p), "\n", "⏎")
	cut := cutValue(s, valueLen)
	// A truncation note has no bounded length: one that starts before the
	// cut is read from the whole string, as is (defensively) a prefix
	// that did not need cutting.
	if !all && (cut == s || strings.Contains(s[:min(len(s), 4*valueLen+len(truncNote))], truncNote)) {
		if p, err = unquote(raw); err != nil {
			return "", false, err
		}
		all = true
		s = strings.ReplaceAll(markRowLookAlikes(raw, p), "\n", "⏎")
		cut = cutValue(s, valueLen)
	}
	return `"` + rowShown(cut, func(t string) string { return visible(rowEscape(t)) }) + `"`, all && cut == s, nil
}

// markRowLookAlikes returns p, a prefix of the string written raw (between
// its quotes, as in the display copy) decoded, with each "[" that raw
// writes \u005B replaced by lookAlikeMark: the "[" of the agent's text
// written like a marker (approval.Display), which the row shows apart from
// the copy's own markers (rowSegments), as the detail page does
// (markLookAlikes).
func markRowLookAlikes(raw []byte, p string) string {
	n := strings.Count(p, "[")
	if n == 0 || !bytes.Contains(raw, []byte(`\u005B`)) {
		return p
	}
	fake := make([]bool, 0, n) // each "[" of p, in order: written \u005B
	for i := 0; i < len(raw) && len(fake) < n; {
		switch {
		case raw[i] == '[':
			fake = append(fake, false)
			i++
		case raw[i] != '\\':
			i++
		case bytes.HasPrefix(raw[i:], []byte(`\u005B`)):
			fake = append(fake, true)
			i += 6
		case bytes.HasPrefix(raw[i:], []byte(`\u005b`)):
			fake = append(fake, false)
			i += 6
		default:
			i += 2 // an escape: its rest holds no "[" nor backslash
		}
	}
	var b strings.Builder
	k := 0
	for _, r := range p {
		if r == '[' {
			if k < len(fake) && fake[k] {
				b.WriteString(lookAlikeMark)
				k++
				continue
			}
			k++
		}
		b.WriteRune(r)
	}
	return b.String()
}

// rowShown is show applied to the pieces of s between its lookAlikeMarks,
// which are kept as they are (rowSegments shows them).
func rowShown(s string, show func(string) string) string {
	if !strings.Contains(s, lookAlikeMark) {
		return show(s)
	}
	parts := strings.Split(s, lookAlikeMark)
	for i, t := range parts {
		parts[i] = show(t)
	}
	return strings.Join(parts, lookAlikeMark)
}

// rowSegments splits a row's summary (summarizeWhole: hidden characters
// already written as escapes) into the segments the row shows: the
// display copy's markers (markerRE) as badges, the "[" of the agent's
// marker-like text (lookAlikeMark) as the escape \u005B titled as the
// agent's text, as the detail page shows them (segments); the rest as is.
func rowSegments(s string) []segment {
	var out []segment
	text := func(t string) {
		for i, part := range strings.Split(t, lookAlikeMark) {
			if i > 0 {
				out = append(out, segment{Text: `\u005B`, Class: "hidden", Title: lookAlikeTitle})
			}
			if part != "" {
				out = append(out, segment{Text: part})
			}
		}
	}
	last := 0
	for _, m := range markerRE.FindAllStringIndex(s, -1) {
		text(s[last:m[0]])
		class := "redacted"
		if strings.HasPrefix(s[m[0]:], "…[truncated") {
			class = "cut"
		}
		out = append(out, segment{Text: s[m[0]:m[1]], Class: class})
		last = m[1]
	}
	text(s[last:])
	return out
}

// rowEscape escapes the backslashes and quotes of s, a string value as the
// row shows it between its quotes, so that no value can end its quotes
// early and show members of its own making (attack30: a "command" of
// `rm -rf ~ #", dry_run: true, note: "` showed as three members, dry_run
// among them, and the row could be approved in bulk), nor pass a
// backslash off as one of visible's escapes.
func rowEscape(s string) string {
	if !strings.ContainsAny(s, `"\`) {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// rowKey is a member's key as the row shows it: as is, or quoted (with
// rowEscape) when it holds a quote, a backslash, a colon or a comma, which
// could pass one member off as several.
func rowKey(k string) string {
	if !strings.ContainsAny(k, `"\:,`) {
		return rowShown(k, visible)
	}
	return `"` + rowShown(k, func(t string) string { return visible(rowEscape(t)) }) + `"`
}

// truncNote is how the display's truncation note starts (markerRE).
const truncNote = "…[truncated for display: "

// skip reads the value at depth without making anything of it; for an
// object or array it returns its member or item count.
func (s *summarizer) skip(depth int) (int, error) {
	if depth > maxDepth || s.pos >= len(s.d) {
		return 0, errNotJSON
	}
	switch c := s.d[s.pos]; {
	case c == '"':
		_, err := s.str()
		return 0, err
	case c == '{':
		s.pos++
		s.space()
		if s.pos < len(s.d) && s.d[s.pos] == '}' {
			s.pos++
			return 0, nil
		}
		for n := 1; ; n++ {
			if _, err := s.str(); err != nil {
				return 0, err
			}
			if err := s.colon(); err != nil {
				return 0, err
			}
			if _, err := s.skip(depth + 1); err != nil {
				return 0, err
			}
			more, err := s.next('}')
			if err != nil || !more {
				return n, err
			}
		}
	case c == '[':
		s.pos++
		s.space()
		if s.pos < len(s.d) && s.d[s.pos] == ']' {
			s.pos++
			return 0, nil
		}
		for n := 1; ; n++ {
			if _, err := s.skip(depth + 1); err != nil {
				return 0, err
			}
			s.space()
			more, err := s.next(']')
			if err != nil || !more {
				return n, err
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		return 0, s.number()
	case c == 't':
		return 0, s.word("true")
	case c == 'f':
		return 0, s.word("false")
	case c == 'n':
		return 0, s.word("null")
	}
	return 0, errNotJSON
}

// next reads, after a member or item, the comma before the next one
// (true) or the closing end (false); then the space before what follows.
func (s *summarizer) next(end byte) (bool, error) {
	s.space()
	if s.pos >= len(s.d) {
		return false, errNotJSON
	}
	switch s.d[s.pos] {
	case ',':
		s.pos++
		s.space()
		return true, nil
	case end:
		s.pos++
		return false, nil
	}
	return false, errNotJSON
}

// colon reads the space around a member's colon.
func (s *summarizer) colon() error {
	s.space()
	if s.pos >= len(s.d) || s.d[s.pos] != ':' {
		return errNotJSON
	}
	s.pos++
	s.space()
	return nil
}

func (s *summarizer) space() {
	for s.pos < len(s.d) {
		switch s.d[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *summarizer) word(w string) error {
	if len(s.d)-s.pos < len(w) || string(s.d[s.pos:s.pos+len(w)]) != w {
		return errNotJSON
	}
	s.pos += len(w)
	return nil
}

// number reads a number (RFC 8259 section 6).
func (s *summarizer) number() error {
	d, i := s.d, s.pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i)
	default:
		return errNotJSON
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return errNotJSON
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return errNotJSON
		}
		i = j
	}
	s.pos = i
	return nil
}

func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// strStop marks the bytes a string's scan stops at: its end, an escape and
// the control characters JSON does not allow in it.
var strStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// str reads a string and returns what is between its quotes, undecoded
// (escapes checked; bytes that are not UTF-8 are allowed, as
// encoding/json allows them).
func (s *summarizer) str() ([]byte, error) {
	d := s.d
	if s.pos >= len(d) || d[s.pos] != '"' {
		return nil, errNotJSON
	}
	start := s.pos + 1
	for i := start; i < len(d); {
		if !strStop[d[i]] {
			i++
			continue
		}
		switch d[i] {
		case '"':
			s.pos = i + 1
			return d[start:i], nil
		case '\\':
			if i+1 >= len(d) {
				return nil, errNotJSON
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || !isHex4(d[i+2:i+6]) {
					return nil, errNotJSON
				}
				i += 6
			default:
				return nil, errNotJSON
			}
		default: // a control character
			return nil, errNotJSON
		}
	}
	return nil, errNotJSON
}

func isHex4(h []byte) bool {
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		default:
			return false
		}
	}
	return true
}

// unquotePrefix decodes the start of a string (raw: between its quotes,
// checked by str) as encoding/json decodes it: at least minBytes bytes
// and minRunes characters of it, or all of it (then all is true). The
// start is cut where decoding it alone gives what decoding the whole
// gives: after an escape, never between a surrogate pair's two escapes,
// never inside the bytes of one character. (The line never reads a
// start's last characters: a value's cut and any marker over it end
// 1 KB before; a key's line is cut minRunes characters in.)
func unquotePrefix(raw []byte, minBytes, minRunes int) (p string, all bool, err error) {
	for limit := max(minBytes, 4*minRunes, 256); ; limit *= 2 {
		e := cutPoint(raw, limit)
		if e >= len(raw) {
			p, err = unquote(raw)
			return p, true, err
		}
		if p, err = unquote(raw[:e]); err != nil || len(p) >= minBytes && utf8.RuneCountInString(p) >= minRunes {
			return p, false, err
		}
	}
}

// cutPoint is the first place at or after limit where raw (a checked
// string's inside) can be cut for unquotePrefix, or len(raw).
func cutPoint(raw []byte, limit int) int {
	i, high := 0, false // high: the last escape read is a high surrogate's
	for i < len(raw) && (i < limit || high && i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u') {
		if raw[i] != '\\' {
			i, high = i+1, false
			continue
		}
		if raw[i+1] == 'u' {
			r := hexRune(raw[i+2 : i+6])
			high = r >= 0xD800 && r < 0xDC00
			i += 6
		} else {
			i, high = i+2, false
		}
	}
	for i < len(raw) && raw[i]&0xC0 == 0x80 { // UTF-8 continuation bytes
		i++
	}
	return i
}

// hexRune is the value of four checked hex digits.
func hexRune(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unquote decodes a checked string's inside with encoding/json, which
// replaces bytes that are not UTF-8 and unpaired surrogates with U+FFFD.
func unquote(raw []byte) (string, error) {
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", fmt.Errorf("%w: %w", errNotJSON, err)
	}
	return s, nil
}
