package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty object", `{}`, `{}`},
		{"whitespace", " \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } }\n", `{"a":[1,2],"b":{}}`},
		{"keys sorted at every level", `{"b":{"y":2,"x":1},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"b":{"x":1,"y":2}}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"scalars at top level", `"x"`, `"x"`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		// Numbers are the deliberate deviation from RFC 8785: literals as received.
		{"number literals kept", `[1.0,1,1e0,1E+00,-0,0.10,9007199254740993,123456789012345678901234567890]`,
			`[1.0,1,1e0,1E+00,-0,0.10,9007199254740993,123456789012345678901234567890]`},
		{"RFC 8785 3.2.2 numbers kept", `[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]`,
			`[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001]`},
		// RFC 8785 §3.2.2.2 string example.
		{"RFC 8785 strings", `"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/"`, `"€$\u000f\nA'B\"\\\\\"/"`},
		{"escaped equals literal", `"\u00e9"`, `"é"`},
		{"solidus unescaped", `"a\/b"`, `"a/b"`},
		{"short escapes", `"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{"other C0 lowercase hex", `"\u001B\u0000\u001f"`, `"\u001b\u0000\u001f"`},
		{"DEL, C1, U+2028 literal", `"\u007f\u0085\u2028"`, "\"\u007f\u0085\u2028\""},
		{"surrogate pair escape", `"\ud83d\ude00"`, `"😀"`},
		{"uppercase hex escape", `"\u00E9\uD83D\uDE00"`, `"é😀"`},
		// RFC 8785 §3.2.3 sorting example: UTF-16 code unit order.
		{"RFC 8785 key order",
			`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			`{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😀":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`},
		{"prefix key sorts first", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		{"supplementary sorts below U+E000", `{"\ue000":1,"\ud800\udc00":2}`, `{"𐀀":2,"` + "\ue000" + `":1}`},
		{"escaped keys decoded before sorting", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%s) error: %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Canonicalize(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
			again, err := Canonicalize(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("not idempotent: Canonicalize(%s) = %s, %v", got, again, err)
			}
		})
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", ``, ErrInvalidJSON},
		{"only space", `  `, ErrInvalidJSON},
		{"trailing data", `{} {}`, ErrInvalidJSON},
		{"trailing comma object", `{"a":1,}`, ErrInvalidJSON},
		{"trailing comma array", `[1,]`, ErrInvalidJSON},
		{"unquoted key", `{a:1}`, ErrInvalidJSON},
		{"single quotes", `{'a':1}`, ErrInvalidJSON},
		{"leading zero", `01`, ErrInvalidJSON},
		{"plus sign", `+1`, ErrInvalidJSON},
		{"bare dot", `1.`, ErrInvalidJSON},
		{"leading dot", `.5`, ErrInvalidJSON},
		{"empty exponent", `1e`, ErrInvalidJSON},
		{"NaN", `NaN`, ErrInvalidJSON},
		{"Infinity", `[Infinity]`, ErrInvalidJSON},
		{"bad literal", `tru`, ErrInvalidJSON},
		{"literal with suffix", `[nullx]`, ErrInvalidJSON},
		{"raw newline in string", "\"a\nb\"", ErrInvalidJSON},
		{"raw tab in string", "\"a\tb\"", ErrInvalidJSON},
		{"bad escape", `"\x41"`, ErrInvalidJSON},
		{"short unicode escape", `"\u12"`, ErrInvalidJSON},
		{"bad hex", `"\u12G4"`, ErrInvalidJSON},
		{"lone high surrogate", `"\ud800"`, ErrInvalidJSON},
		{"lone high surrogate then text", `"\ud800abcdef"`, ErrInvalidJSON},
		{"lone low surrogate", `"\udc00"`, ErrInvalidJSON},
		{"high then high", `"\ud800\ud800"`, ErrInvalidJSON},
		{"high then BMP escape", `"\ud800\u0041"`, ErrInvalidJSON},
		{"invalid UTF-8", "\"\xff\"", ErrInvalidJSON},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", ErrInvalidJSON},
		{"overlong UTF-8", "\"\xc0\xaf\"", ErrInvalidJSON},
		{"BOM", "\ufeff{}", ErrInvalidJSON},
		{"unterminated string", `"abc`, ErrInvalidJSON},
		{"unterminated object", `{"a":1`, ErrInvalidJSON},
		{"unterminated array", `[1`, ErrInvalidJSON},
		{"missing colon", `{"a" 1}`, ErrInvalidJSON},
		{"comment", `{} // x`, ErrInvalidJSON},
		{"too deep", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), ErrInvalidJSON},
		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"duplicate key nested", `{"x":[{"b":{"a":1,"a":1}}]}`, ErrDuplicateKey},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Canonicalize(%q) = %s, %v; want error %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCanonicalizeMaxDepth(t *testing.T) {
	in := strings.Repeat(`{"a":`, MaxDepth-1) + `[]` + strings.Repeat(`}`, MaxDepth-1)
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	if string(got) != in {
		t.Errorf("depth %d document changed", MaxDepth)
	}
}

func TestDuplicateKeyErrorIsShort(t *testing.T) {
	key := strings.Repeat("k", 10000)
	_, err := Canonicalize([]byte(`{"` + key + `":1,"` + key + `":2}`))
	if !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("err = %v, want ErrDuplicateKey", err)
	}
	if n := len(err.Error()); n > 200 {
		t.Errorf("error message is %d bytes, want a bounded message", n)
	}
}

// TestHashC14 checks case C14: the hash ignores key order and whitespace at
// every level and string escaping, and tells apart anything else.
func TestHashC14(t *testing.T) {
	equal := [][]string{
		{`{"a":1,"b":{"x":1,"y":2}}`, `{"b":{"y":2,"x":1},"a":1}`, `{ "a" : 1, "b":{"x":1,"y":2} }`, "{\n\t\"a\": 1,\r\n\t\"b\": {\"y\": 2, \"x\": 1}\n}"},
		{`{"s":"\u00e9"}`, `{"s":"é"}`, `{"\u0073":"\u00E9"}`},
		{`{"p":"a/b"}`, `{"p":"a\/b"}`},
		{`{}`, ``},
	}
	differ := [][2]string{
		{`{"a":1,"b":{"x":1,"y":2}}`, `{"a":1,"b":{"x":1,"y":2},"c":null}`},
		{`[1,2]`, `[2,1]`},
		{`{"n":7}`, `{"n":"7"}`},
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`},
		{`{"n":1}`, `{"n":1.0}`},
		{`{"n":0}`, `{"n":-0}`},
		{`{}`, `null`},
		{`{"a":{"b":1}}`, `{"a":{"b":1,"c":null}}`},
	}
	hash := func(s string) string {
		t.Helper()
		h, err := Hash(json.RawMessage(s))
		if err != nil {
			t.Fatalf("Hash(%s): %v", s, err)
		}
		return h
	}
	for _, group := range equal {
		want := hash(group[0])
		for _, s := range group[1:] {
			if got := hash(s); got != want {
				t.Errorf("Hash(%s) = %s, want %s as for %s", s, got, want, group[0])
			}
		}
	}
	for _, pair := range differ {
		if hash(pair[0]) == hash(pair[1]) {
			t.Errorf("Hash(%s) == Hash(%s), want different", pair[0], pair[1])
		}
	}
	for _, s := range []string{`{"a":1,"a":1}`, `{"x":{"a":1,"a":2}}`} {
		if _, err := Hash(json.RawMessage(s)); !errors.Is(err, ErrDuplicateKey) {
			t.Errorf("Hash(%s) error = %v, want ErrDuplicateKey", s, err)
		}
	}
}

func TestHashFormat(t *testing.T) {
	got, err := Hash(nil)
	if err != nil {
		t.Fatal(err)
	}
	// sha256 of the two bytes "{}".
	const want = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
	if got != want {
		t.Errorf("Hash(nil) = %s, want %s", got, want)
	}
}

// numberLiterals returns the sorted number literals of a JSON document, read
// with encoding/json (an implementation independent of ours).
func numberLiterals(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var nums []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("encoding/json cannot read %q: %v", doc, err)
		}
		if n, ok := tok.(json.Number); ok {
			nums = append(nums, string(n))
		}
	}
	slices.Sort(nums)
	return nums
}

// decodeStd decodes doc with encoding/json, keeping number literals.
func decodeStd(t *testing.T, doc []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json cannot decode %q: %v", doc, err)
	}
	return v
}

func fuzzSeeds(f *testing.F) {
	f.Helper()
	for _, s := range []string{
		`{}`, `[]`, `null`, `0`, `-0`, `1.0`, `1E+2`, `"x"`,
		`{"a":1,"b":{"x":1,"y":2}}`,
		`{"b":{"y":2,"x":1},"a":1}`,
		`{"s":"\u00e9","t":"é","u":"\/\"\\\b\f\n\r\t\u0001\u007f\u2028"}`,
		`{"n":9007199254740993,"m":[1.5e300,-0.0,1e-400]}`,
		`{"\ud83d\ude00":1,"\ufb33":2,"\u20ac":3,"\r":4,"1":5}`,
		`{"a":1,"a":2}`,
		`"\ud800"`,
		`[[[[[[[[[[]]]]]]]]]]`,
		`{"command":"rm -rf ~ \u001b[2K\u001b[1Gls -la","path":"/srv/invoice\u202efdp.exe","to":"acct\u200b-1"}`,
		"{\"raw\":\"\u202e\u200b\"}",
		` { "a" : [ true , false , null ] } `,
	} {
		f.Add([]byte(s))
	}
}

// FuzzCanonicalize checks that canonical output is valid JSON with the same
// value (per encoding/json) and the same number literals as the input, and
// that canonicalization is idempotent.
func FuzzCanonicalize(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidJSON) && !errors.Is(err, ErrDuplicateKey) {
				t.Fatalf("error %v wraps neither ErrInvalidJSON nor ErrDuplicateKey", err)
			}
			// Our parser may only be stricter than encoding/json where we mean it.
			if errors.Is(err, ErrInvalidJSON) && json.Valid(in) && utf8.Valid(in) &&
				!bytes.Contains(bytes.ToLower(in), []byte(`\ud`)) &&
				bytes.Count(in, []byte("["))+bytes.Count(in, []byte("{")) <= MaxDepth {
				t.Fatalf("Canonicalize(%q) = %v, but encoding/json accepts it", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("Canonicalize accepted %q, which encoding/json rejects", in)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("Canonicalize(%q) = %q: not valid JSON", in, out)
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("Canonicalize(%q) (second pass): %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n in   %q\n once %q\n twice %q", in, out, again)
		}
		if diff := cmp.Diff(numberLiterals(t, in), numberLiterals(t, out)); diff != "" {
			t.Fatalf("number literals changed for %q (-in +out):\n%s", in, diff)
		}
		if diff := cmp.Diff(decodeStd(t, in), decodeStd(t, out)); diff != "" {
			t.Fatalf("value changed for %q (-in +out):\n%s", in, diff)
		}
	})
}

// BenchmarkHash hashes a 2 MiB argument (case C09's large argument).
func BenchmarkHash(b *testing.B) {
	raw := json.RawMessage(`{"path":"/tmp/x","content":"` + strings.Repeat("abcdefgh\\n", 2<<20/10) + `","n":[1,2,3]}`)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Hash(raw); err != nil {
			b.Fatal(err)
		}
	}
}
