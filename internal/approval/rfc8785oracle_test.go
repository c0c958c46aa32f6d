package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// oracleCanonical is an independent RFC 8785 writer for the tests (attack27):
// encoding/json's tokenizer reads raw (numbers as their literals), object
// keys are sorted by slices.Compare of their utf16.Encode code units, and
// strings are escaped by escapeOracle. It shares no code with parse or
// writeCanonical. dup reports an object naming one key twice (compared as
// encoding/json decodes them); err is encoding/json's.
func oracleCanonical(raw []byte) (out []byte, dup bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b bytes.Buffer
	dup, err = oracleValue(dec, &b)
	if err != nil {
		return nil, false, err
	}
	switch _, err := dec.Token(); {
	case err == nil:
		return nil, false, errors.New("trailing data")
	case !errors.Is(err, io.EOF):
		return nil, false, fmt.Errorf("after the value: %w", err)
	}
	return b.Bytes(), dup, nil
}

func oracleValue(dec *json.Decoder, b *bytes.Buffer) (dup bool, err error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				d, err := oracleValue(dec, b)
				if err != nil {
					return false, err
				}
				dup = dup || d
			}
			_, err = dec.Token() // ']'
			b.WriteByte(']')
			return dup, err
		}
		type kv struct {
			key string
			val []byte
		}
		var ms []kv
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return false, err
			}
			k := kt.(string)
			var vb bytes.Buffer
			d, err := oracleValue(dec, &vb)
			if err != nil {
				return false, err
			}
			dup = dup || d || slices.ContainsFunc(ms, func(m kv) bool { return m.key == k })
			ms = append(ms, kv{k, vb.Bytes()})
		}
		if _, err := dec.Token(); err != nil { // '}'
			return false, err
		}
		slices.SortStableFunc(ms, func(x, y kv) int {
			return slices.Compare(utf16.Encode([]rune(x.key)), utf16.Encode([]rune(y.key)))
		})
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			escapeOracle(b, m.key)
			b.WriteByte(':')
			b.Write(m.val)
		}
		b.WriteByte('}')
		return dup, nil
	case string:
		escapeOracle(b, v)
	case json.Number:
		b.WriteString(string(v))
	case bool:
		fmt.Fprint(b, v)
	case nil:
		b.WriteString("null")
	}
	return false, nil
}

// escapeOracle writes s as RFC 8785 §3.2.2.2 says, rune by rune.
func escapeOracle(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// checkAgainstOracle compares Canonicalize, Hash and HashDisplayCanonical
// (without redaction) of raw with the oracle's canonical form.
func checkAgainstOracle(t *testing.T, raw []byte) {
	t.Helper()
	out, err := Canonicalize(raw)
	want, dup, oerr := oracleCanonical(raw)
	switch {
	case errors.Is(err, ErrDuplicateKey):
		if oerr == nil && !dup {
			t.Fatalf("Canonicalize(%.200q): %v, but the oracle finds no duplicate key", raw, err)
		}
		return
	case err != nil:
		// Stricter than encoding/json where meant: invalid UTF-8, lone
		// surrogates, nesting (encoding/json replaces the first two by
		// U+FFFD).
		if oerr == nil && utf8.Valid(raw) && !bytes.Contains(bytes.ToLower(raw), []byte(`\ud`)) &&
			bytes.Count(raw, []byte("["))+bytes.Count(raw, []byte("{")) <= MaxDepth {
			t.Fatalf("Canonicalize(%.200q): %v, but the oracle accepts it", raw, err)
		}
		return
	case oerr != nil:
		t.Fatalf("Canonicalize accepted %.200q, which the oracle refuses: %v", raw, oerr)
	case dup:
		t.Fatalf("Canonicalize accepted %.200q, which names a key twice (oracle)", raw)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("Canonicalize(%.200q)\n = %.300q\nwant %.300q (oracle)", raw, out, want)
	}
	sum := sha256.Sum256(want)
	if h, err := Hash(raw); err != nil || h != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("Hash(%.200q) = %s %v, want the oracle's form's", raw, h, err)
	}
	got, err := HashDisplayCanonical(slices.Clone(raw), Redaction{})
	if err != nil || got.Hash != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("HashDisplayCanonical(%.200q).Hash = %s %v, want the oracle's form's", raw, got.Hash, err)
	}
	if got.Depth < MaxDepth && !bytes.Equal(got.Canonical, want) {
		t.Fatalf("HashDisplayCanonical(%.200q).Canonical\n = %.300q\nwant %.300q (oracle; nothing redacted)", raw, got.Canonical, want)
	}
}

// keyForms are keys that sort differently by UTF-16 code units than by
// code points or bytes (a surrogate pair sorts below U+E000..U+FFFF),
// keys equal up to a prefix, and each written escaped and literally.
var keyForms = []struct{ lit, esc string }{
	{"😀", `\ud83d\ude00`},          // U+1F600: D83D DE00
	{"\U00010000", `\ud800\udc00`}, // the lowest pair
	{"\U0010ffff", `\udbff\udfff`}, // the highest pair
	{"\ue000", `\ue000`},           // above the surrogates
	{"\uffff", `\uffff`},
	{"\ufb33", `\ufb33`},
	{"\ud7ff", `\ud7ff`}, // just below the surrogates
	{"é", `\u00e9`},
	{"a", `\u0061`},
	{"ab", `a\u0062`},
	{"a\u0000", `a\u0000`},
	{"", ``},
	{"/", `\/`},
	{"\"", `\"`},
	{"😀a", `\ud83d\ude00a`},
	{"😀\ue000", `\ud83d\ude00\ue000`},
	{"\ue000😀", `\ue000\ud83d\ude00`},
}

// TestCanonicalKeyOrderAcrossScanKeys (attack27): objects of 1 to
// scanKeys+3 members whose keys mix surrogate pairs, characters above
// U+E000, prefixes and escapes canonicalize as the oracle does, in
// document order and reversed (the copy that is skipped when the members
// are already in order); a key repeated in its other form (escaped vs
// literal) is a duplicate at every position.
func TestCanonicalKeyOrderAcrossScanKeys(t *testing.T) {
	form := func(i int, escaped bool) string {
		if i >= len(keyForms) {
			return fmt.Sprintf("\ue000%02d", i) // sorts among the keys above
		}
		if escaped {
			return keyForms[i].esc
		}
		var b bytes.Buffer
		escapeOracle(&b, keyForms[i].lit) // literal but for '"', '\\' and controls
		return b.String()[1 : b.Len()-1]
	}
	for n := 1; n <= scanKeys+3; n++ {
		for _, order := range []string{"forward", "reversed", "sorted"} {
			idx := make([]int, n)
			for i := range idx {
				idx[i] = i
			}
			if order == "reversed" {
				slices.Reverse(idx)
			}
			doc := func(dupAt, dupOf int, escaped bool) []byte {
				var sb strings.Builder
				sb.WriteByte('{')
				for j, i := range idx {
					if j > 0 {
						sb.WriteByte(',')
					}
					k := form(i, escaped == (j%2 == 0))
					if j == dupAt {
						k = form(idx[dupOf], escaped == (dupOf%2 != 0))
					}
					fmt.Fprintf(&sb, `"%s":%d`, k, j)
				}
				sb.WriteByte('}')
				return []byte(sb.String())
			}
			if order == "sorted" {
				// The members in the oracle's order: writeCanonical's
				// already-sorted path.
				want, _, err := oracleCanonical(doc(-1, 0, false))
				if err != nil {
					t.Fatal(err)
				}
				checkAgainstOracle(t, want)
				continue
			}
			for _, escaped := range []bool{false, true} {
				checkAgainstOracle(t, doc(-1, 0, escaped))
				for dupAt := 1; dupAt < n; dupAt++ {
					for _, of := range []int{0, dupAt - 1} {
						raw := doc(dupAt, of, escaped)
						if _, err := Canonicalize(raw); !errors.Is(err, ErrDuplicateKey) {
							t.Fatalf("%d members %s, member %d repeating member %d's key in its other form: %v, want ErrDuplicateKey\n%q",
								n, order, dupAt, of, err, raw)
						}
					}
				}
			}
		}
	}
}

// TestCanonicalNestingToMaxDepth (attack27): arrays and objects mixed,
// nested to exactly MaxDepth, are accepted and canonicalize as the
// oracle does; one level more is ErrInvalidJSON, wherever the extra level
// is.
func TestCanonicalNestingToMaxDepth(t *testing.T) {
	nest := func(depth int, inner string) []byte {
		var open, closing strings.Builder
		for i := range depth {
			if i%3 == 2 {
				fmt.Fprintf(&open, `{"z":1,"\ud83d\ude00":2,"\ue000":`)
				closing.WriteString(`}`)
			} else {
				open.WriteString(`[`)
				closing.WriteString(`]`)
			}
		}
		c := []byte(closing.String())
		slices.Reverse(c)
		return []byte(open.String() + inner + string(c))
	}
	for _, inner := range []string{`0`, `"x"`} {
		checkAgainstOracle(t, nest(MaxDepth, inner))
		got, err := HashDisplayCanonical(nest(MaxDepth, inner), DefaultRedaction())
		if err != nil || got.Depth != MaxDepth {
			t.Errorf("HashDisplayCanonical at MaxDepth: depth %d, %v", got.Depth, err)
		}
	}
	for _, inner := range []string{`[]`, `{}`, `[0]`, `{"a":0}`} {
		if _, err := Canonicalize(nest(MaxDepth, inner)); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("nesting %d with %s inside: %v, want ErrInvalidJSON", MaxDepth+1, inner, err)
		}
	}
}

// FuzzCanonicalizeOracle (attack27): Canonicalize, Hash and
// HashDisplayCanonical agree with an independent RFC 8785 writer.
func FuzzCanonicalizeOracle(f *testing.F) {
	fuzzSeeds(f)
	for _, kf := range keyForms {
		f.Add([]byte(`{"` + kf.esc + `":1,"\ue001":2,"\ud83d\ude01":3,"a":4}`))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkAgainstOracle(t, raw) })
}
