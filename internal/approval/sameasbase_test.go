package approval

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// baseAnswer is what the base (main 83cc2d6, before args27's parse kept
// offsets into the document and wrote strings in runs) answered for one
// of trickyArguments under one of goldenRedactions, recorded in
// testdata/base-answers.json.gz: outputs as SHA-256 hex digests, warnings
// and error messages as they were.
type baseAnswer struct {
	Redaction, Doc          int
	Hash, HashErr           string
	Canonical, CanonicalErr string
	Display                 string
	Warnings                []string
	DisplayErr              string
	All                     shownDigest // HashDisplayCanonical
}

// shownDigest is ShownArguments with its byte outputs as digests.
type shownDigest struct {
	Hash      string
	Display   string
	Warnings  []string
	Canonical string
	Depth     int
	Err       string
}

// goldenRedactions are the redactions base-answers.json.gz was recorded
// with, by index.
func goldenRedactions() []Redaction {
	return []Redaction{{}, DefaultRedaction(), {MaxString: 3}}
}

func digest(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// errText is err's message, or "" for nil: the messages are what callers
// see.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// readGolden decodes testdata/NAME (gzip when it ends in .gz) into v.
func readGolden(t *testing.T, name string, v any) {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var r interface{ Read([]byte) (int, error) } = f
	if strings.HasSuffix(name, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = z
	}
	if err := json.NewDecoder(r).Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// sameAsBase fails t unless Hash, Canonicalize, Display and
// HashDisplayCanonical answer raw exactly as the base did (want): the same
// bytes, warnings and error messages.
func sameAsBase(t *testing.T, raw []byte, rd Redaction, want baseAnswer) {
	t.Helper()
	show := raw
	if len(show) > 80 {
		show = append(slices.Clip(show[:80]), "…"...)
	}
	h, err := Hash(raw)
	if h != want.Hash || errText(err) != want.HashErr {
		t.Fatalf("%q: Hash %s %v, base %s %s", show, h, err, want.Hash, want.HashErr)
	}
	c, err := Canonicalize(raw)
	if digest(c) != want.Canonical || errText(err) != want.CanonicalErr {
		t.Fatalf("%q: Canonicalize %q (%s) %v, base %s %s", show, c, digest(c), err, want.Canonical, want.CanonicalErr)
	}
	d, w, err := Display(raw, rd)
	w = withoutFolds(w)
	if digest(d) != want.Display || !slices.Equal(w, want.Warnings) || errText(err) != want.DisplayErr {
		t.Fatalf("%q: Display %q %q %v, base %s %q %s", show, d, w, err, want.Display, want.Warnings, want.DisplayErr)
	}
	// Parse, then Display before Hash: neither changes the tree.
	if p, err := Parse(raw); err != nil || errText(err) != want.HashErr {
		if errText(err) != want.HashErr || errText(err) != want.DisplayErr {
			t.Fatalf("%q: Parse %v, base's Hash %s, Display %s", show, err, want.HashErr, want.DisplayErr)
		}
	} else {
		pd, pw := p.Display(rd)
		pw = withoutFolds(pw)
		if ph := p.Hash(); ph != want.Hash || digest(pd) != want.Display || !slices.Equal(pw, want.Warnings) {
			t.Fatalf("%q: Parsed's Display %q %q and Hash %s, base %s %q %s", show, pd, pw, ph, want.Display, want.Warnings, want.Hash)
		}
	}
	a, err := HashDisplayCanonical(slices.Clone(raw), rd)
	got := shownDigest{a.Hash, digest(a.Display), a.Warnings, digest(a.Canonical), a.Depth, errText(err)}
	if got.Hash != want.All.Hash || got.Display != want.All.Display || !slices.Equal(got.Warnings, want.All.Warnings) ||
		got.Canonical != want.All.Canonical || got.Depth != want.All.Depth || got.Err != want.All.Err {
		t.Fatalf("%q: HashDisplayCanonical %+v, base %+v", show, got, want.All)
	}
}

// withoutFolds is w without the warnings about keys that fold together
// (policy44), which the base did not give.
func withoutFolds(w []string) []string {
	return slices.DeleteFunc(slices.Clone(w), func(s string) bool { return strings.Contains(s, " differ only in case; ") })
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
	var want []baseAnswer
	readGolden(t, "base-answers.json.gz", &want)
	rds, docs := goldenRedactions(), trickyArguments()
	if len(want) != len(rds)*len(docs) {
		t.Fatalf("base-answers.json.gz holds %d answers, want %d: the corpus changed; record the base's answers again", len(want), len(rds)*len(docs))
	}
	for _, w := range want {
		sameAsBase(t, []byte(docs[w.Doc]), rds[w.Redaction], w)
	}
}

// baseFlagged is the base's flagged runes (testdata/base-flagged.json,
// inclusive ranges).
func baseFlagged(t *testing.T) func(rune) bool {
	t.Helper()
	var ranges [][2]rune
	readGolden(t, "base-flagged.json", &ranges)
	if len(ranges) == 0 {
		t.Fatal("base-flagged.json: no ranges")
	}
	return func(r rune) bool {
		_, found := slices.BinarySearchFunc(ranges, r, func(rg [2]rune, r rune) int {
			switch {
			case rg[1] < r:
				return -1
			case rg[0] > r:
				return 1
			}
			return 0
		})
		return found
	}
}

// TestFlaggedAsBase: the display flags exactly the runes the base did, for
// every rune (flagged skips the Cf table for U+2070–U+FEFE).
func TestFlaggedAsBase(t *testing.T) {
	base := baseFlagged(t)
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if flagged(r) != base(r) {
			t.Fatalf("flagged(U+%04X) = %v, the base's %v", r, flagged(r), base(r))
		}
	}
}

// TestSafeLeadIsNotFlagged: every rune whose UTF-8 form starts with a
// byte safeLead skips is one the base shows as it is, and safeLead skips
// its whole length.
func TestSafeLeadIsNotFlagged(t *testing.T) {
	base := baseFlagged(t)
	for r := rune(0x80); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		b := utf8.AppendRune(nil, r)
		if n := safeLead[b[0]]; n != 0 && (base(r) || int(n) != len(b)) {
			t.Fatalf("U+%04X: safeLead[%#x] = %d, flagged by the base %v, %d bytes", r, b[0], n, base(r), len(b))
		}
	}
}

// TestCompareUTF16AsBase: keys order by their UTF-16 code units (RFC 8785,
// 3.2.3; utf16.Encode as the reference), including past a common prefix
// that ends inside a multi-byte rune.
func TestCompareUTF16AsBase(t *testing.T) {
	keys := []string{"", "a", "ab", "a\x7f", "a\u0080", "aé", "aê", "a\u07ff", "a\u0800", "a\ue000", "a\uffff",
		"a\U00010000", "a\U0001F600", "a\U0001F601", "a\U0010FFFF", "\uffff", "\U0001F600", "é", "ê", "日", "本"}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := compareUTF16(a, b), slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b))); got != want {
				t.Errorf("compareUTF16(%q, %q) = %d, UTF-16 order %d", a, b, got, want)
			}
		}
	}
}
