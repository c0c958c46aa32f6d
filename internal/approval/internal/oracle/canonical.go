package oracle

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
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
// an unpaired surrogate escape, nesting deeper than MaxDepth) or
// ErrDuplicateKey (an object names one key twice, compared after unescaping).
// Canonicalize is idempotent: Canonicalize of its output returns the output.
func Canonicalize(raw []byte) ([]byte, error) {
	n, err := parse(raw)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	writeCanonical(&b, &n)
	return b.Bytes(), nil
}

// Hash returns the argument hash that binds an approval to its arguments:
// "sha256:" followed by the lowercase hex SHA-256 of Canonicalize(raw).
// Empty or nil raw (a call that sent no arguments) hashes as "{}". Errors
// are those of Canonicalize.
func Hash(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	n, err := parse(raw)
	if err != nil {
		return "", err
	}
	return hashNode(&n, len(raw)), nil
}

// hashNode is Hash of the parsed n (size: the length of its source, a
// capacity hint).
func hashNode(n *node, size int) string {
	var b bytes.Buffer
	b.Grow(size)
	writeCanonical(&b, n)
	sum := sha256.Sum256(b.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:])
}

func writeCanonical(b *bytes.Buffer, n *node) {
	switch n.kind {
	case kindLiteral, kindNumber:
		b.WriteString(n.text)
	case kindString:
		writeCanonicalString(b, n.text)
	case kindArray:
		b.WriteByte('[')
		for i := range n.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, &n.elems[i])
		}
		b.WriteByte(']')
	case kindObject:
		ms := n.members // keys are unique (parse refuses duplicates)
		if !slices.IsSortedFunc(ms, byKey) {
			ms = slices.Clone(ms)
			slices.SortFunc(ms, byKey)
		}
		b.WriteByte('{')
		for i := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonicalString(b, ms[i].key)
			b.WriteByte(':')
			writeCanonical(b, &ms[i].val)
		}
		b.WriteByte('}')
	}
}

// byKey orders members by key as RFC 8785 §3.2.3 sorts properties: by
// their UTF-16 code units.
func byKey(x, y member) int { return compareUTF16(x.key, y.key) }

const lowerHex = "0123456789abcdef"

// writeCanonicalString writes s (valid UTF-8) as RFC 8785 §3.2.2.2 specifies.
// WriteCanonicalString writes the string s as Canonicalize writes a
// string (RFC 8785 §3.2.2.2, see Canonicalize); s must be valid UTF-8.
func WriteCanonicalString(b *bytes.Buffer, s string) { writeCanonicalString(b, s) }

func writeCanonicalString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(lowerHex[c>>4])
			b.WriteByte(lowerHex[c&0xF])
		}
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 §3.2.3 sorts object keys.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ha, la := utf16Units(ra)
			hb, lb := utf16Units(rb)
			if c := cmp.Compare(ha, hb); c != 0 {
				return c
			}
			return cmp.Compare(la, lb)
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
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
