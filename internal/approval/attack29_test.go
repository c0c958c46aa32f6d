package approval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// naiveShown is the display copy of v (decoded by encoding/json, numbers
// as json.Number) as a reader of the Redaction docs would write it: every
// secret key's value a marker, every pattern run over every string in
// turn, then the cut. It shares nothing with parse, unescape, scan or the
// prefix index (attack29: an oracle independent of parse28's matcher).
func naiveShown(v any, rd *Redaction) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if why, ok := rd.secretKey(k); ok {
				out[k] = "[redacted: key " + fmt.Sprintf("%q", why) + "]"
				continue
			}
			out[k] = naiveShown(e, rd)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = naiveShown(e, rd)
		}
		return out
	case string:
		s := naiveHide(x, rd, func(re *regexp.Regexp) string { return "[redacted: looks like " + patternWhat(re) + "]" })
		if n := utf8.RuneCountInString(s); rd.MaxString > 0 && n > rd.MaxString {
			s = string([]rune(s)[:rd.MaxString]) + fmt.Sprintf("…[truncated for display: %d of %d characters shown]", rd.MaxString, n)
		}
		return s
	}
	return v
}

// decodeNumbers decodes one JSON value with numbers as json.Number.
func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// checkNaive fails t unless Display of raw decodes to naiveShown of raw,
// and no string of the copy still matches a pattern (but in a cut).
func checkNaive(t *testing.T, raw []byte, rd Redaction) {
	t.Helper()
	disp, _, err := Display(raw, rd)
	if err != nil {
		return // the parse's errors are checked elsewhere
	}
	orig, err := decodeNumbers(raw)
	if err != nil {
		t.Fatalf("%.200q: Display took what encoding/json refuses: %v", raw, err)
	}
	got, err := decodeNumbers(disp)
	if err != nil {
		t.Fatalf("%.200q: copy %.300q: %v", raw, disp, err)
	}
	if want := naiveShown(orig, &rd); !reflect.DeepEqual(got, want) {
		t.Fatalf("%.200q: copy %.300q, the naive display %.300q", raw, got, want)
	}
}

// attackRedaction is DefaultRedaction with configured patterns whose
// prefixes start past ASCII, are case-folded, or are two ASCII bytes
// followed by runes of U+0800–U+3FFF (the range skipSafe skips by its
// first two bytes).
func attackRedaction(maxString int) Redaction {
	rd := DefaultRedaction()
	rd.MaxString = maxString
	rd.Patterns = append(rd.Patterns,
		regexp.MustCompile(`(?P<a_kana_secret>秘密[0-9]{4})`),
		regexp.MustCompile(`(?P<an_ab_secret>ab\x{3042}[0-9]{3})`),
		regexp.MustCompile(`(?i)(?P<a_folded>pass=\S{4,})`),
		regexp.MustCompile(`(?P<a_zw_secret>k\x{200B}ey[0-9]{2})`),
		regexp.MustCompile(`(?P<a_smp>\x{1F511}[a-z]{3})`),
	)
	return rd
}

// FuzzDisplayAsNaive (attack29): for any string placed in a document, short
// and repeated past the prefix index's threshold, raw and JSON-escaped
// (\uXXXX for every rune, surrogate pairs above U+FFFF), Display's copy
// decodes to what the naive display gives.
func FuzzDisplayAsNaive(f *testing.F) {
	for _, s := range append(secretTexts(), "秘密1234", "abあ123", "PASS=hunter2", "k\u200bey42", "🔑abc", "xAKIA\u3042AKIAABCDEFGHIJKLMNOP") {
		f.Add(s, uint8(0))
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, s string, cut uint8) {
		if !utf8.ValidString(s) {
			return
		}
		rd := attackRedaction(int(cut % 64))
		long := strings.Repeat(s+"あ", 1+scanPatternsFrom/max(1, len(s)+3))
		for _, text := range []string{s, long, "日" + s, s + strings.Repeat("x", scanPatternsFrom)} {
			raw, _ := json.Marshal(map[string]any{"v": text, "a": []any{text}})
			checkNaive(t, raw, rd)
			checkNaive(t, []byte(`{"v":"`+escapeAll(text)+`"}`), rd)
		}
	})
}

// escapeAll writes every rune of s as a \uXXXX escape (a surrogate pair
// above U+FFFF).
func escapeAll(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r > 0xFFFF {
			hi, lo := utf16Units(r)
			fmt.Fprintf(&b, `\u%04x\u%04X`, hi, lo)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// TestDisplayAsNaive runs FuzzDisplayAsNaive's checks on its seeds.
func TestDisplayAsNaive(t *testing.T) {
	for _, s := range append(secretTexts(), "秘密1234", "abあ123", "PASS=hunter2", "k\u200bey42", "🔑abc") {
		for _, cut := range []int{0, 7, 40} {
			rd := attackRedaction(cut)
			long := strings.Repeat(s+"あ", 1+scanPatternsFrom/(len(s)+3))
			for _, text := range []string{s, long, s + strings.Repeat("x", scanPatternsFrom)} {
				raw, _ := json.Marshal(map[string]any{"v": text})
				checkNaive(t, raw, rd)
				checkNaive(t, []byte(`{"v":"`+escapeAll(text)+`"}`), rd)
			}
		}
	}
}
