package oracle

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Sentinel errors for argument documents. A duplicate key is reported as
// ErrDuplicateKey only (RFC 8259 allows duplicates; we refuse them because
// two readers may keep different members), so callers that treat both as
// bad input check both.
var (
	// ErrInvalidJSON reports a document that is not one RFC 8259 JSON value:
	// a syntax error, trailing data, invalid UTF-8, a lone surrogate escape,
	// or nesting deeper than MaxDepth.
	ErrInvalidJSON = errors.New("approval: invalid JSON")
	// ErrDuplicateKey reports an object that names the same key twice, at
	// any depth (keys are compared after unescaping).
	ErrDuplicateKey = errors.New("approval: duplicate object key")
)

// MaxDepth is the deepest nesting of arrays and objects that Canonicalize
// and Display accept; deeper documents are ErrInvalidJSON.
const MaxDepth = 1000

// kind is the type of a parsed JSON value.
type kind uint8

const (
	kindLiteral kind = iota // true, false or null: text is written as is
	kindNumber              // text is the exact literal received
	kindString              // text is the decoded string (valid UTF-8)
	kindArray
	kindObject
)

// node is one parsed JSON value. Objects keep their members in document order.
type node struct {
	kind    kind
	text    string
	elems   []node
	members []member
}

type member struct {
	key string
	val node
}

// parse reads exactly one JSON value (RFC 8259) from data, with optional
// surrounding whitespace. Errors wrap ErrInvalidJSON or ErrDuplicateKey.
func parse(data []byte) (node, error) {
	p := parser{data: data}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return node{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return node{}, p.errorf("trailing data after the value")
	}
	return v, nil
}

type parser struct {
	data  []byte
	pos   int
	depth int
	// elems and members are the open arrays' elements and the open
	// objects' members, each level's on top of its parent's: a finished
	// array or object copies its own out at their exact count, so its
	// slice is not grown (and copied) by append per value on the way
	// (issue 13: a 4 MB argument of small objects allocated 43× its size).
	elems   []node
	members []member
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrInvalidJSON, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() (node, error) {
	if p.pos >= len(p.data) {
		return node{}, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		return node{kind: kindString, text: s}, err
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	default:
		return node{}, p.errorf("unexpected character %q", rune(c))
	}
}

func (p *parser) literal(word string) (node, error) {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return node{}, p.errorf("invalid literal")
	}
	p.pos += len(word)
	return node{kind: kindLiteral, text: word}, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf("nesting deeper than %d", MaxDepth)
	}
	return nil
}

func (p *parser) array() (node, error) {
	if err := p.enter(); err != nil {
		return node{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // '['
	n := node{kind: kindArray}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return n, nil
	}
	base := len(p.elems)
	for {
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return node{}, err
		}
		p.elems = append(p.elems, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.errorf("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			n.elems = slices.Clone(p.elems[base:])
			clear(p.elems[base:])
			p.elems = p.elems[:base]
			return n, nil
		default:
			return node{}, p.errorf("expected ',' or ']' in array")
		}
	}
}

func (p *parser) object() (node, error) {
	if err := p.enter(); err != nil {
		return node{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // '{'
	n := node{kind: kindObject}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return n, nil
	}
	var seen map[string]struct{}
	base := len(p.members)
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return node{}, p.errorf("expected a string key in object")
		}
		keyAt := p.pos
		k, err := p.str()
		if err != nil {
			return node{}, err
		}
		if duplicate(k, p.members[base:], &seen) {
			return node{}, fmt.Errorf("%w: offset %d: key %s", ErrDuplicateKey, keyAt, quoteShort(k))
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return node{}, p.errorf("expected ':' after object key")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return node{}, err
		}
		p.members = append(p.members, member{key: k, val: v})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.errorf("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			n.members = slices.Clone(p.members[base:])
			clear(p.members[base:])
			p.members = p.members[:base]
			return n, nil
		default:
			return node{}, p.errorf("expected ',' or '}' in object")
		}
	}
}

// scanKeys is the member count up to which duplicate compares a key with
// the object's earlier ones instead of keeping a set of them: a set per
// small object was an allocation or more per object.
const scanKeys = 16

// duplicate reports whether k is the key of one of the object's members so
// far (ms); past scanKeys members it keeps them in *seen.
func duplicate(k string, ms []member, seen *map[string]struct{}) bool {
	if len(ms) < scanKeys {
		for i := range ms {
			if ms[i].key == k {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*len(ms))
		for i := range ms {
			(*seen)[ms[i].key] = struct{}{}
		}
	}
	if _, dup := (*seen)[k]; dup {
		return true
	}
	(*seen)[k] = struct{}{}
	return false
}

// quoteShort quotes s for an error message, cut to 40 bytes so a hostile key
// cannot flood logs.
func quoteShort(s string) string {
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.QuoteToASCII(s[:cut]) + "…"
	}
	return strconv.QuoteToASCII(s)
}

// number checks the RFC 8259 number grammar and keeps the literal text.
func (p *parser) number() (node, error) {
	start := p.pos
	d := p.data
	if d[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
	case p.pos < len(d) && '1' <= d[p.pos] && d[p.pos] <= '9':
		p.digits()
	default:
		return node{}, p.errorf("invalid number")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return node{}, p.errorf("invalid number: no digits after '.'")
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return node{}, p.errorf("invalid number: no digits in exponent")
		}
	}
	return node{kind: kindNumber, text: string(d[start:p.pos])}, nil
}

func (p *parser) digits() int {
	start := p.pos
	for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos - start
}

// str reads a string token and returns its decoded value. It rejects raw
// control characters, invalid UTF-8, bad escapes and unpaired surrogates.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	d := p.data
	// Fast path: no escapes and only printable ASCII.
	for p.pos < len(d) {
		c := d[p.pos]
		if c == '"' {
			s := string(d[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p.pos++
	}
	var b strings.Builder
	run := start // start of the bytes copied as they are
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case c == '"':
			b.Write(d[run:p.pos])
			p.pos++
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf("control character U+%04X in string", c)
		case c == '\\':
			b.Write(d[run:p.pos])
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
			run = p.pos
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8")
			}
			p.pos += size
		}
	}
	return "", p.errorf("unterminated string")
}

// escape reads one escape sequence (p.pos at the backslash), joining a
// surrogate pair written as two \u escapes.
func (p *parser) escape() (rune, error) {
	if p.pos+1 >= len(p.data) {
		return 0, p.errorf("unterminated escape")
	}
	c := p.data[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
	default:
		p.pos -= 2
		return 0, p.errorf("invalid escape \\%c", c)
	}
	r, err := p.hex4()
	if err != nil {
		return 0, err
	}
	switch {
	case utf16.IsSurrogate(r) && r < 0xDC00: // high surrogate: a low one must follow
		if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
			return 0, p.errorf("unpaired surrogate U+%04X", r)
		}
		p.pos += 2
		lo, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return 0, p.errorf("unpaired surrogate U+%04X", r)
		}
		return utf16.DecodeRune(r, lo), nil
	case utf16.IsSurrogate(r):
		return 0, p.errorf("unpaired surrogate U+%04X", r)
	}
	return r, nil
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errorf("short \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.errorf("invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}
