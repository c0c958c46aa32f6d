package approval

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"toolgate/internal/approval/internal/oracle"
)

// baseRedaction is rd for the oracle (the base's code, package oracle).
func baseRedaction(rd Redaction) oracle.Redaction {
	return oracle.Redaction{Keys: rd.Keys, ExactKeys: rd.ExactKeys, ExceptKeys: rd.ExceptKeys,
		Patterns: rd.Patterns, MaxString: rd.MaxString}
}

// errText is err's message, or "" for nil: the sentinels are the
// oracle's own variables, the messages are what callers see.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sameAsBase fails t unless Hash, Canonicalize, Display and
// HashDisplayCanonical answer raw exactly as the base did (package
// oracle): the same bytes, warnings and error messages.
func sameAsBase(t *testing.T, raw []byte, rd Redaction) {
	t.Helper()
	show := raw
	if len(show) > 80 {
		show = append(slices.Clip(show[:80]), "…"...)
	}
	ord := baseRedaction(rd)
	h, err := Hash(raw)
	bh, berr := oracle.Hash(raw)
	if h != bh || errText(err) != errText(berr) {
		t.Fatalf("%q: Hash %s %v, base %s %v", show, h, err, bh, berr)
	}
	c, err := Canonicalize(raw)
	bc, berr := oracle.Canonicalize(raw)
	if !bytes.Equal(c, bc) || errText(err) != errText(berr) {
		t.Fatalf("%q: Canonicalize %q %v, base %q %v", show, c, err, bc, berr)
	}
	d, w, err := Display(raw, rd)
	bd, bw, berr := oracle.Display(raw, ord)
	if !bytes.Equal(d, bd) || !slices.Equal(w, bw) || errText(err) != errText(berr) {
		t.Fatalf("%q: Display %q %q %v, base %q %q %v", show, d, w, err, bd, bw, berr)
	}
	a, err := HashDisplayCanonical(slices.Clone(raw), rd)
	ba, berr := oracle.HashDisplayCanonical(slices.Clone(raw), ord)
	if a.Hash != ba.Hash || !bytes.Equal(a.Display, ba.Display) || !slices.Equal(a.Warnings, ba.Warnings) ||
		!bytes.Equal(a.Canonical, ba.Canonical) || a.Depth != ba.Depth || errText(err) != errText(berr) {
		t.Fatalf("%q: HashDisplayCanonical %+v %v, base %+v %v", show, a, err, ba, berr)
	}
}

// trickyArguments are documents where reading strings in runs, keeping
// offsets and comparing keys past their common bytes could go wrong.
func trickyArguments() []string {
	nest := func(depth int, inner string) string {
		return strings.Repeat(`{"k":[`, depth/2) + inner + strings.Repeat(`]}`, depth/2)
	}
	members := func(n int, dupAt int) string {
		var sb strings.Builder
		sb.WriteByte('{')
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			k := i
			if i == dupAt {
				k = 0
			}
			fmt.Fprintf(&sb, `"m%02d":%d`, n-k, i)
		}
		sb.WriteByte('}')
		return sb.String()
	}
	docs := []string{
		``, ` `, `{}`, `[]`, `""`, `"x"`, `0`, `-0`, `-0.0`, `-0.0e-0`, `1e400`, `-1E+400`, `1.5e-400`,
		`123456789012345678901234567890123456789`, `0.1000000000000000055511151231257827`,
		`true`, `false`, `null`, `tru`, `nul`, `01`, `1.`, `1e`, `-`, `+1`, `.5`, `1 2`, `{} x`, "\ufeff{}",
		`"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f\u0020\u007f\u0080\u009f\u00a0\u00ad"`, `"\u00e9" `, `"é"`,
		`"\u2028\u2029"`, "\"\u2028\u2029\"", `"\ud83d\ude00"`, "\"\U0001F600\"", `"\ud800"`, `"\udc00"`,
		`"\ud800\u0041"`, `"\ud800\\"`, `"\ud800\ud800"`, `"\uDBFF\uDFFF"`, `"\u"`, `"\u12"`, `"\u12g4"`, `"\x"`,
		`"abc`, `"abc\`, `"abc\"`, "\"a\x01b\"", "\"a\x7fb\"", "\"a\tb\"", "\"\xff\"", "\"a\xc3\"", "\"\xc3\x28\"",
		"\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"", "\"ok\\n\xff\"", "\"\xff\\q\"", "\"\\q\xff\"",
		"\"a\x01\\q\"", "\"\\q\x01\"", "\"\xc3\xa9\\u00e9\x01\"", "{\"\xff\":1}", "{\"a\\u0000\":1}",
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"é":1,"\u00e9":2}`, `{"\ud83d\ude00":1,"\ud83d\ude00":2}`,
		`{"a":1,"b":{"c":1,"c":2}}`, `{"a":[1,2,{"b":1,"b":1}]}`,
		members(16, -1), members(17, -1), members(16, 15), members(17, 16), members(17, 3), members(40, 39),
		// Sorted by UTF-16 code units but not by bytes, and the reverse.
		"{\"\uffff\":1,\"\U0001F600\":2}", "{\"\U0001F600\":1,\"\uffff\":2}", "{\"\ue000\":1,\"\U00010000\":2}",
		"{\"a\uffffb\":1,\"a\U0001F600\":2}", "{\"a\U0001F600\":1,\"a\uffffb\":2}",
		`{"\ud83d\ude00x":1,"\ue000":2,"é":3,"e":4,"":5,"ab":6,"a":7}`,
		"{\"aé\":1,\"ab\":2,\"a\u0080\":3,\"a\x7f\":4}", `{"b":1,"a":2}`, `{"a":2,"b":1}`,
		`{"A":1,"a":2,"_":3,"0":4}`, `{"ab":1,"a":2}`, `{"a":1,"ab":2}`,
		nest(MaxDepth, `"deep"`), nest(MaxDepth+2, `1`), strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), strings.Repeat("[", 3000),
		`{"password":"hunter2","nested":{"api_key":{"x":[1,2]}},"z":1}`, `{"t":"a\u200bb","k\u200b":1}`,
		`{"auth":"Bearer abcdefghijklmnopqrstuvwxyz0123456789"}`, `{"key":"AKIAABCDEFGHIJKLMNOP and more"}`,
		`{"x":"` + strings.Repeat("\u200b", 20) + `"}`, "{\"pem\":\"-----BEGIN PRIVATE KEY-----\\nabc\\n-----END PRIVATE KEY-----\"}",
		`{"u":"https://user:pass@example.com/x"}`, ` {"a" : [ 1 , 2 ] , "b" : { } , "c" : [ ] } `,
		`{"s":"` + strings.Repeat("é", 5000) + `"}`, `{"s":"` + strings.Repeat(`ab\n`, 3000) + `"}`,
		`{"s":"` + strings.Repeat("日本", 3000) + "\u200b" + `"}`, `{"s":"` + strings.Repeat("\U0001F600", 3000) + `"}`,
		`{"s":"` + strings.Repeat("x", 4095) + `\u00e9"}`, `{"s":"` + strings.Repeat("x", 4097) + `"}`,
		`{"a":"\"","b":"\\","c":"\/","d":"\u0022"}`, `[1,[2,[3,[4]]],{"a":[]},{},"",-0,1E2]`,
		"{\"bidi\":\"\u202eabc\u202c\",\"tag\":\"\U000E0041\",\"bom\":\"\ufeff\",\"del\":\"\x7f\",\"c1\":\"\u0085\"}",
		`{"blank":"\u3164\uffa0\u115f\u034f","cf":"\u0600\u06dd\u070f\u0890\u08e2\u180e\ufff9\U000110bd"}`,
	}
	// Past hashChunk, so the hash is streamed: unsorted objects and
	// escapes across the pieces' boundaries.
	var big strings.Builder
	big.WriteByte('[')
	for i := range 700 {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"z%d":"a\u00e9\n\"x%s","a":[1,-0,1e400,{"y":null,"x":"\ud83d\ude00"}],"é":"\u0001\/","\ue000\u0001\"":%d}`,
			i, strings.Repeat(`\t`, i%7), i)
	}
	big.WriteByte(']')
	docs = append(docs, big.String(), `"`+strings.Repeat(`\u0007\"é\n`, 5000)+`"`,
		`{"b":"`+strings.Repeat("x\u00e9", 9000)+`","a":"`+strings.Repeat("\u2028", 9000)+`"}`)
	return docs
}

// TestSameAsBase: every output, error messages included, is the base's
// on documents chosen to break the runs, the offsets and the key order.
func TestSameAsBase(t *testing.T) {
	for _, rd := range []Redaction{{}, DefaultRedaction(), {MaxString: 3}} {
		for _, doc := range trickyArguments() {
			sameAsBase(t, []byte(doc), rd)
		}
	}
}

// FuzzSameAsBase: for any input and display limit, every output is the
// base's.
func FuzzSameAsBase(f *testing.F) {
	for _, doc := range trickyArguments() {
		if len(doc) < 1000 {
			f.Add([]byte(doc), 0)
			f.Add([]byte(doc), 5)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte, maxString int) {
		rd := DefaultRedaction()
		rd.MaxString = maxString % 64
		sameAsBase(t, raw, rd)
		sameAsBase(t, raw, Redaction{})
	})
}

// TestFlaggedAsBase: the display flags exactly the runes the base did, for
// every rune (flagged skips the Cf table for U+2070–U+FEFE).
func TestFlaggedAsBase(t *testing.T) {
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if flagged(r) != oracle.Flagged(r) {
			t.Fatalf("flagged(U+%04X) = %v, the base's %v", r, flagged(r), oracle.Flagged(r))
		}
	}
}

// TestSafeLeadIsNotFlagged: every rune whose UTF-8 form starts with a
// byte safeLead skips is one the base shows as it is, and safeLead skips
// its whole length.
func TestSafeLeadIsNotFlagged(t *testing.T) {
	for r := rune(0x80); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		b := utf8.AppendRune(nil, r)
		if n := safeLead[b[0]]; n != 0 && (oracle.Flagged(r) || int(n) != len(b)) {
			t.Fatalf("U+%04X: safeLead[%#x] = %d, flagged by the base %v, %d bytes", r, b[0], n, oracle.Flagged(r), len(b))
		}
	}
}

// TestCompareUTF16AsBase: keys order as the base ordered them, including
// past a common prefix that ends inside a multi-byte rune.
func TestCompareUTF16AsBase(t *testing.T) {
	keys := []string{"", "a", "ab", "a\x7f", "a\u0080", "aé", "aê", "a\u07ff", "a\u0800", "a\ue000", "a\uffff",
		"a\U00010000", "a\U0001F600", "a\U0001F601", "a\U0010FFFF", "\uffff", "\U0001F600", "é", "ê", "日", "本"}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := compareUTF16(a, b), oracle.CompareUTF16(a, b); got != want {
				t.Errorf("compareUTF16(%q, %q) = %d, the base's %d", a, b, got, want)
			}
		}
	}
}
