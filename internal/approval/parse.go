package approval

import (
	"bytes"
	"errors"
	"fmt"
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
	// nesting deeper than MaxDepth, or a document of 4 GiB or more.
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
	kindLiteral   kind = iota // true, false or null: its text in the document
	kindNumber                // the exact literal received, in the document
	kindString                // a string with no escape: its text in the document
	kindASCII                 // a string of printable ASCII only (no escape, no DEL): the same
	kindEscString             // a string value with escapes: its raw text in the document
	kindOwnString             // a decoded key, or a value the display rewrote: tree.strs[a]
	kindArray
	kindObject
)

// A node is one parsed JSON value in 12 bytes; a and b depend on its kind:
//
//   - literal, number, string, ASCII string: the text is tree.src[a:a+b]
//     (the bytes of the document itself: no copy per value); the canonical
//     form and (for ASCII strings) the display copy write it as it is;
//   - escaped string: tree.src[a:a+b] is its text as written, between the
//     quotes, escapes and all: the canonical form is written from it and
//     only the display decodes it (unescape);
//   - own string: the text is tree.strs[a];
//   - array: its b elements are tree.nodes[a:a+b];
//   - object: its b members are tree.nodes[a:a+2b], key then value, in
//     document order (a key is a string or own string node).
//
// Issue 13: a node of 72 bytes with its own slices, and a string per key,
// number and string, cost 20× a large argument's size.
type node struct {
	a, b uint32
	kind kind
}

// A tree is a parsed document: its text, the strings that are not a span
// of it, and its nodes, each container's children contiguous.
type tree struct {
	src   string // the document (one copy)
	strs  []string
	nodes []node
	root  uint32 // the index of the top value in nodes
	// long holds the length of each string value of longString bytes
	// or more, as written: the display cuts them, and sizes its buffer
	// by what is left.
	long []int
}

// longString is the length from which parse notes a string value in
// tree.long.
const longString = 4 << 10

// text is the text of a literal, number or string node (an escaped
// string's decoded, in a new string).
func (t *tree) text(n node) string {
	switch n.kind {
	case kindOwnString:
		return t.strs[n.a]
	case kindEscString:
		return unescape(t.src[n.a : n.a+n.b])
	}
	return t.src[n.a : n.a+n.b]
}

// own makes t.nodes[i] the string s (a rewritten or replaced value).
func (t *tree) own(i uint32, s string) {
	t.strs = append(t.strs, s)
	t.nodes[i] = node{kind: kindOwnString, a: u32(len(t.strs) - 1)}
}

// maxDocument is the longest document parse reads: offsets are uint32.
const maxDocument = 1<<32 - 1

// u32 is n as a node's offset, length or index: parse refuses documents
// longer than maxDocument, and each of those is at most the document's
// length (its string count, its node count plus one).
func u32(n int) uint32 {
	return uint32(n) //nolint:gosec // n ≤ maxDocument, checked by parse
}

// parse reads exactly one JSON value (RFC 8259) from data, with optional
// surrounding whitespace. Errors wrap ErrInvalidJSON or ErrDuplicateKey.
func parse(data []byte) (tree, error) {
	if len(data) > maxDocument {
		return tree{}, fmt.Errorf("%w: a document of %d bytes, longer than %d", ErrInvalidJSON, len(data), maxDocument)
	}
	n := countNodes(data)
	p := parser{data: data, t: tree{src: string(data), nodes: make([]node, 0, n)}, stack: make([]node, 0, min(n, 32))}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return tree{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return tree{}, p.errorf("trailing data after the value")
	}
	p.t.root = u32(len(p.t.nodes))
	p.t.nodes = append(p.t.nodes, v)
	return p.t, nil
}

// countNodes bounds the number of nodes parse makes of d: one per '[',
// '{', ',' and ':' outside strings, and the top value. It does not check
// the syntax (parse does); the bound sizes tree.nodes in one allocation.
func countNodes(d []byte) int {
	n := 1
	for i := 0; i < len(d); i++ {
		if !countStop[d[i]] {
			continue
		}
		switch d[i] {
		case '"':
			j := i + 1
			for {
				k := bytes.IndexByte(d[j:], '"')
				if k < 0 {
					return n
				}
				j += k
				bs := 0 // backslashes before the quote: an odd count escapes it
				for m := j - 1; m > i && d[m] == '\\'; m-- {
					bs++
				}
				if bs%2 == 0 {
					break
				}
				j++
			}
			i = j
		case '[', '{', ',', ':':
			n++
		}
	}
	return n
}

// countStop marks the bytes countNodes looks at.
var countStop = [256]bool{'"': true, '[': true, '{': true, ',': true, ':': true}

type parser struct {
	data  []byte
	pos   int
	depth int
	t     tree // what it has read
	// stack holds the open arrays' elements and the open objects' keys
	// and values, each level's on top of its parent's: a finished array
	// or object moves its own to the end of t.nodes, contiguous.
	stack []node
	// scratch is where a string with escapes is decoded.
	scratch []byte
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
		return p.str(false)
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
	at := p.pos
	p.pos += len(word)
	return node{kind: kindLiteral, a: u32(at), b: u32(len(word))}, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf("nesting deeper than %d", MaxDepth)
	}
	return nil
}

// close moves the children of the container that starts at base on the
// stack to the end of the tree's nodes.
func (p *parser) close(k kind, base, count int) node {
	first := len(p.t.nodes)
	p.t.nodes = append(p.t.nodes, p.stack[base:]...)
	p.stack = p.stack[:base]
	return node{kind: k, a: u32(first), b: u32(count)}
}

func (p *parser) array() (node, error) {
	if err := p.enter(); err != nil {
		return node{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return node{kind: kindArray}, nil
	}
	base := len(p.stack)
	for {
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return node{}, err
		}
		p.stack = append(p.stack, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.errorf("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return p.close(kindArray, base, len(p.stack)-base), nil
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
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return node{kind: kindObject}, nil
	}
	var seen map[string]struct{}
	base := len(p.stack)
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return node{}, p.errorf("expected a string key in object")
		}
		keyAt := p.pos
		kn, err := p.str(true)
		if err != nil {
			return node{}, err
		}
		k := p.t.text(kn)
		if p.duplicate(k, base, &seen) {
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
		p.stack = append(p.stack, kn, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.errorf("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return p.close(kindObject, base, (len(p.stack)-base)/2), nil
		default:
			return node{}, p.errorf("expected ',' or '}' in object")
		}
	}
}

// scanKeys is the member count up to which duplicate compares a key with
// the object's earlier ones instead of keeping a set of them: a set per
// small object was an allocation or more per object.
const scanKeys = 16

// duplicate reports whether k is the key of one of the members so far of
// the object whose keys and values start at base on the stack; past
// scanKeys members it keeps them in *seen.
func (p *parser) duplicate(k string, base int, seen *map[string]struct{}) bool {
	ms := p.stack[base:]
	if len(ms) < 2*scanKeys {
		for i := 0; i < len(ms); i += 2 {
			if p.t.text(ms[i]) == k {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, len(ms))
		for i := 0; i < len(ms); i += 2 {
			(*seen)[p.t.text(ms[i])] = struct{}{}
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
	return node{kind: kindNumber, a: u32(start), b: u32(p.pos - start)}, nil
}

func (p *parser) digits() int {
	start := p.pos
	for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos - start
}

// strStop marks the bytes that end a plain run inside a string: the
// closing quote, a backslash and control characters. Bytes of UTF-8
// sequences are all 0x80 or more, so none of them stops a run; the runs
// are checked with utf8.Valid.
var strStop = [256]bool{'"': true, '\\': true,
	0x00: true, 0x01: true, 0x02: true, 0x03: true, 0x04: true, 0x05: true, 0x06: true, 0x07: true,
	0x08: true, 0x09: true, 0x0A: true, 0x0B: true, 0x0C: true, 0x0D: true, 0x0E: true, 0x0F: true,
	0x10: true, 0x11: true, 0x12: true, 0x13: true, 0x14: true, 0x15: true, 0x16: true, 0x17: true,
	0x18: true, 0x19: true, 0x1A: true, 0x1B: true, 0x1C: true, 0x1D: true, 0x1E: true, 0x1F: true,
}

// str reads a string token (p.pos at its opening quote) and returns its
// node: a span of the document, unless it has escapes and is a key (then
// its decoded text: keys are compared). It rejects raw control
// characters, invalid UTF-8, bad escapes and unpaired surrogates, each
// with the offset of the first one.
func (p *parser) str(key bool) (node, error) {
	open := p.pos
	p.pos++
	start := p.pos
	d := p.data
	i := p.pos
	var high byte // DEL and the bytes of UTF-8 sequences seen
	for i < len(d) && !strStop[d[i]] {
		high |= d[i] & 0x80
		if d[i] == 0x7F {
			high = 0x80
		}
		i++
	}
	if i < len(d) && d[i] == '"' {
		k := kindASCII
		if high != 0 {
			if !utf8.Valid(d[start:i]) {
				p.pos = open
				return node{}, p.strError()
			}
			k = kindString
		}
		p.pos = i + 1
		if !key && i-start >= longString {
			p.t.long = append(p.t.long, i-start)
		}
		return node{kind: k, a: u32(start), b: u32(i - start)}, nil
	}
	// An escape (or an error): check the escapes, and decode a key into
	// the scratch buffer, run by run.
	b := p.scratch[:0]
	run := start
	for i < len(d) {
		switch c := d[i]; {
		case c == '"':
			if !utf8.Valid(d[start:i]) {
				p.pos = open
				return node{}, p.strError()
			}
			p.pos = i + 1
			if !key && i-start >= longString {
				p.t.long = append(p.t.long, i-start)
			}
			if !key {
				return node{kind: kindEscString, a: u32(start), b: u32(i - start)}, nil
			}
			b = append(b, d[run:i]...)
			p.scratch = b
			p.t.strs = append(p.t.strs, string(b))
			return node{kind: kindOwnString, a: u32(len(p.t.strs) - 1)}, nil
		case c == '\\':
			p.pos = i
			r, err := p.escape()
			if err != nil {
				p.pos = open
				return node{}, p.strError()
			}
			if key {
				b = utf8.AppendRune(append(b, d[run:i]...), r)
			}
			i = p.pos
			run = i
		case strStop[c]: // a control character
			p.pos = open
			return node{}, p.strError()
		default:
			i++
			for i < len(d) && !strStop[d[i]] {
				i++
			}
		}
	}
	p.pos = open
	return node{}, p.strError()
}

// strError reads the string token at p.pos rune by rune, as the parse
// did before it read runs, and returns the first error in it: the error
// (and its offset) str reports for a bad string.
func (p *parser) strError() error {
	p.pos++ // opening quote
	d := p.data
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case c == '"':
			return p.errorf("string read in runs failed but not rune by rune")
		case c < 0x20:
			return p.errorf("control character U+%04X in string", c)
		case c == '\\':
			if _, err := p.escape(); err != nil {
				return err
			}
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return p.errorf("invalid UTF-8")
			}
			p.pos += size
		}
	}
	return p.errorf("unterminated string")
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

// unescape decodes the text of a string token between its quotes, raw,
// which parse has checked.
func unescape(raw string) string {
	var b strings.Builder
	b.Grow(len(raw))
	for {
		k := strings.IndexByte(raw, '\\')
		if k < 0 {
			b.WriteString(raw)
			return b.String()
		}
		b.WriteString(raw[:k])
		if c := shortEscape[raw[k+1]]; c != 0 { // a byte: no rune to encode
			b.WriteByte(c)
			raw = raw[k+2:]
			continue
		}
		r, next := escapeAt(raw, k)
		b.WriteRune(r)
		raw = raw[next:]
	}
}

// shortEscape is the byte a two-character escape \X stands for, by X (0
// for 'u' and the bytes that are no escape).
var shortEscape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escapeAt decodes the escape at raw[i] (a backslash) in text parse has
// checked, and returns the rune and the index past the escape (past both
// halves of a surrogate pair).
func escapeAt(raw string, i int) (rune, int) {
	switch c := raw[i+1]; c {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
	default: // '"', '\\', '/'
		return rune(c), i + 2
	}
	r := hexRune(raw[i+2 : i+6])
	if utf16.IsSurrogate(r) { // a high surrogate, a low one after it (parse checked)
		return utf16.DecodeRune(r, hexRune(raw[i+8:i+12])), i + 12
	}
	return r, i + 6
}

// hexRune is the value of four hex digits.
func hexRune(h string) rune {
	var r rune
	for i := range 4 {
		c := h[i]
		r <<= 4
		switch {
		case c <= '9':
			r |= rune(c - '0')
		case c >= 'a':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
