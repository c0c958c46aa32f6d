package approval

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"slices"
	"strings"
	"unicode/utf8"
)

// Canonicalize returns the canonical form of the JSON document raw: the JSON
// Canonicalization Scheme (RFC 8785) with one deliberate difference, numbers.
//
//   - Whitespace between tokens is dropped.
//   - Object members are sorted by their keys compared as UTF-16 code units
//     (RFC 8785 §3.2.3); array order is kept.
//   - Strings are written as RFC 8785 §3.2.2.2 says: '"' and '\' escaped,
//     U+0008, U+0009, U+000A, U+000C and U+000D as \b \t \n \f \r, other
//     characters below U+0020 as \u00xx (lowercase hex), and everything else
//     as literal UTF-8. So "\u00e9" and "é" canonicalize the same, and "\/"
//     becomes "/".
//   - true, false and null are written as is.
//   - Numbers are written as the exact literal received (RFC 8785 would
//     reformat them through IEEE 754 doubles). Integers past 2^53 stay
//     distinct, and 1.0, 1 and 1e0 are three different values; "-0" stays "-0".
//
// Errors wrap ErrInvalidJSON (syntax error, trailing data, invalid UTF-8,
// an unpaired surrogate escape, nesting deeper than MaxDepth, a document
// of 4 GiB or more) or
// ErrDuplicateKey (an object names one key twice, compared after unescaping).
// Canonicalize is idempotent: Canonicalize of its output returns the output.
func Canonicalize(raw []byte) ([]byte, error) {
	t, err := parse(raw)
	if err != nil {
		return nil, err
	}
	w := canonWriter{t: &t, buf: make([]byte, 0, len(raw))}
	w.value(t.root)
	return w.buf, nil
}

// Hash returns the argument hash that binds an approval to its arguments:
// "sha256:" followed by the lowercase hex SHA-256 of Canonicalize(raw).
// Empty or nil raw (a call that sent no arguments) hashes as "{}". Errors
// are those of Canonicalize.
func Hash(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	t, err := parse(raw)
	if err != nil {
		return "", err
	}
	return hashTree(&t, len(raw)), nil
}

// hashChunk is how much canonical text hashTree gathers before it hands
// it to SHA-256, and strings are written in pieces of hashChunk/8 bytes
// (6 bytes at most each): the canonical form of a large argument is not
// held whole to be hashed (issue 13).
const hashChunk = 16 << 10

// hashTree is Hash of the parsed t (size: the length of its source, a
// capacity hint).
func hashTree(t *tree, size int) string {
	var sum [sha256.Size]byte
	if size <= hashChunk { // whole: no digest to allocate
		w := canonWriter{t: t, buf: make([]byte, 0, size)}
		w.value(t.root)
		sum = sha256.Sum256(w.buf)
	} else {
		h := sha256.New()
		w := canonWriter{t: t, h: h, buf: make([]byte, 0, 2*hashChunk)}
		w.value(t.root)
		h.Write(w.buf)
		h.Sum(sum[:0])
	}
	var out [len("sha256:") + 2*sha256.Size]byte
	copy(out[:], "sha256:")
	hex.Encode(out[len("sha256:"):], sum[:])
	return string(out[:])
}

// A canonWriter writes the canonical form of a tree into buf, or, with h
// set, through buf into h.
type canonWriter struct {
	t    *tree
	h    hash.Hash
	buf  []byte
	perm []uint32 // the open objects' members in key order, when not in it already
}

// flush hands buf to h once it holds hashChunk bytes.
func (w *canonWriter) flush() {
	if w.h != nil && len(w.buf) >= hashChunk {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *canonWriter) str(s string) {
	if w.h == nil {
		w.buf = appendCanonicalString(w.buf, s)
		return
	}
	w.buf = append(w.buf, '"')
	for len(s) > 0 {
		piece := s[:min(len(s), hashChunk/8)]
		s = s[len(piece):]
		w.buf = appendCanonicalRuns(w.buf, piece)
		w.flush()
	}
	w.buf = append(w.buf, '"')
}

// run appends s, which needs no escaping, in pieces when hashing.
func (w *canonWriter) run(s string) {
	if w.h == nil {
		w.buf = append(w.buf, s...)
		return
	}
	for len(s) > 0 {
		piece := s[:min(len(s), hashChunk/8)]
		s = s[len(piece):]
		w.buf = append(w.buf, piece...)
		w.flush()
	}
}

// escaped writes the string whose text between the quotes is raw, escapes
// and all, without decoding it first: between its escapes a string token
// holds nothing the canonical form escapes, and each escape is written as
// the canonical form writes the rune it stands for.
func (w *canonWriter) escaped(raw string) {
	w.buf = append(w.buf, '"')
	for {
		k := strings.IndexByte(raw, '\\')
		if k < 0 {
			w.run(raw)
			break
		}
		w.run(raw[:k])
		r, next := escapeAt(raw, k)
		if r < utf8.RuneSelf && canonEscape[r] {
			w.buf = appendCanonicalByte(w.buf, byte(r)) //nolint:gosec // r < utf8.RuneSelf
		} else {
			w.buf = utf8.AppendRune(w.buf, r)
		}
		raw = raw[next:]
	}
	w.buf = append(w.buf, '"')
	w.flush()
}

func (w *canonWriter) value(i uint32) {
	t := w.t
	n := t.nodes[i]
	switch n.kind {
	case kindLiteral, kindNumber:
		w.buf = append(w.buf, t.text(n)...)
		w.flush()
	case kindString, kindASCII: // nothing in it to escape (parse checked)
		w.buf = append(w.buf, '"')
		w.run(t.text(n))
		w.buf = append(w.buf, '"')
		w.flush()
	case kindOwnString:
		w.str(t.text(n))
	case kindEscString:
		w.escaped(t.src[n.a : n.a+n.b])
	case kindArray:
		w.buf = append(w.buf, '[')
		for k := range n.b {
			if k > 0 {
				w.buf = append(w.buf, ',')
			}
			w.value(n.a + k)
		}
		w.buf = append(w.buf, ']')
	case kindObject:
		// Keys are unique (parse refuses duplicates): members are in
		// order when each key is below the next.
		sorted := true
		for k := uint32(1); k < n.b && sorted; k++ {
			sorted = compareUTF16(t.text(t.nodes[n.a+2*k-2]), t.text(t.nodes[n.a+2*k])) < 0
		}
		w.buf = append(w.buf, '{')
		if sorted {
			for k := range n.b {
				if k > 0 {
					w.buf = append(w.buf, ',')
				}
				w.member(n.a + 2*k)
			}
		} else {
			base := len(w.perm)
			for k := range n.b {
				w.perm = append(w.perm, n.a+2*k)
			}
			order := w.perm[base:]
			slices.SortFunc(order, func(x, y uint32) int {
				return compareUTF16(t.text(t.nodes[x]), t.text(t.nodes[y]))
			})
			for k := range n.b {
				if k > 0 {
					w.buf = append(w.buf, ',')
				}
				w.member(w.perm[base+int(k)])
			}
			w.perm = w.perm[:base]
		}
		w.buf = append(w.buf, '}')
	}
}

// member writes the member whose key is t.nodes[i] and value t.nodes[i+1].
func (w *canonWriter) member(i uint32) {
	w.value(i)
	w.buf = append(w.buf, ':')
	w.value(i + 1)
}

const lowerHex = "0123456789abcdef"

// WriteCanonicalString writes the string s as Canonicalize writes a
// string (RFC 8785 §3.2.2.2, see Canonicalize); s must be valid UTF-8.
func WriteCanonicalString(b *bytes.Buffer, s string) {
	b.Write(appendCanonicalString(b.AvailableBuffer(), s))
}

// appendCanonicalString appends s (valid UTF-8) as RFC 8785 §3.2.2.2
// specifies.
func appendCanonicalString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendCanonicalRuns(b, s)
	return append(b, '"')
}

// canonEscape marks the bytes a canonical string escapes: '"', '\\' and
// the controls below U+0020. Every other byte (all of UTF-8's multi-byte
// sequences included) is copied as it is, in runs.
var canonEscape = [256]bool{'"': true, '\\': true,
	0x00: true, 0x01: true, 0x02: true, 0x03: true, 0x04: true, 0x05: true, 0x06: true, 0x07: true,
	0x08: true, 0x09: true, 0x0A: true, 0x0B: true, 0x0C: true, 0x0D: true, 0x0E: true, 0x0F: true,
	0x10: true, 0x11: true, 0x12: true, 0x13: true, 0x14: true, 0x15: true, 0x16: true, 0x17: true,
	0x18: true, 0x19: true, 0x1A: true, 0x1B: true, 0x1C: true, 0x1D: true, 0x1E: true, 0x1F: true,
}

// appendCanonicalRuns appends the inside of s's canonical string, without
// the quotes.
func appendCanonicalRuns(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !canonEscape[c] {
			continue
		}
		b = appendCanonicalByte(append(b, s[start:i]...), c)
		start = i + 1
	}
	return append(b, s[start:]...)
}

// appendCanonicalByte appends the escape of c, a byte canonEscape marks.
func appendCanonicalByte(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, `\b`...)
	case '\t':
		return append(b, `\t`...)
	case '\n':
		return append(b, `\n`...)
	case '\f':
		return append(b, `\f`...)
	case '\r':
		return append(b, `\r`...)
	}
	return append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 §3.2.3 sorts object keys. Past their common bytes it decodes
// the one rune each where they differ: UTF-8's byte order is the code
// points' order, which is UTF-16's except above U+FFFF against
// U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return cmp.Compare(len(a), len(b))
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return cmp.Compare(a[i], b[i])
	}
	for i > 0 && !utf8.RuneStart(a[i]) { // the differing runes start together
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	ha, la := utf16Units(ra)
	hb, lb := utf16Units(rb)
	if c := cmp.Compare(ha, hb); c != 0 {
		return c
	}
	return cmp.Compare(la, lb)
}

// utf16Units returns the UTF-16 code units of r: r and 0 for the Basic
// Multilingual Plane, the surrogate pair otherwise.
func utf16Units(r rune) (rune, rune) {
	if r < 0x10000 {
		return r, 0
	}
	r -= 0x10000
	return 0xD800 + r>>10, 0xDC00 + r&0x3FF
}
