package approval

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzHashDisplayCanonical (attack25): for any input, HashDisplayCanonical
// agrees with the separate functions the gate and the audit verifier use:
// its Hash is Hash(raw) (the approval binding: admit, consume and the
// audit record must hash alike), its copy and warnings are Display's, its
// Canonical is Canonicalize of the copy, its Depth the copy's nesting; and
// it fails exactly when Hash fails.
func FuzzHashDisplayCanonical(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `[]`, `"x"`, `12`, `-0`, `-0.0e-0`, `1E+400`, `123456789012345678901234567890`,
		`{"b":1,"a":[1,2,{"z":null,"y":true}]}`, `{"password":"hunter2","nested":{"api_key":{"x":[1,2]}},"z":1}`,
		`{"t":"a\u200bb","k\u200b":1}`, `{"\ud83d\ude00":"\ud83d\ude00","\ue000":1,"\uffff":2}`,
		`{"s":"` + strings.Repeat("é", 30) + `"}`, `{"e":"\u00e9\"\\\/\b\f\n\r\t\u0001<&>\u2028"}`,
		`{"auth":"Bearer abcdefghijklmnopqrstuvwxyz0123456789"}`, `{"key":"AKIAABCDEFGHIJKLMNOP and more"}`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":`, "{\"bad\":\"\xff\"}", "{\"\xfe\":1}", `"\ud800"`,
		`{"x":"` + strings.Repeat("\u200b", 20) + `"}`, `[[[[[[[[{"token":[[[[1]]]]}]]]]]]]]`,
		"{\"pem\":\"-----BEGIN PRIVATE KEY-----\\nabc\\n-----END PRIVATE KEY-----\"}",
		`{"u":"https://user:pass@example.com/x"}`, "\ufeff{}", ` {"a" : [ 1 , 2 ] } `,
	} {
		f.Add([]byte(s), 0)
		f.Add([]byte(s), 7)
	}
	f.Fuzz(func(t *testing.T, raw []byte, maxString int) {
		rd := DefaultRedaction()
		rd.MaxString = maxString % 64
		hash, herr := Hash(raw)
		got, gerr := HashDisplayCanonical(slices.Clone(raw), rd)
		if (herr == nil) != (gerr == nil) {
			t.Fatalf("%q: HashDisplayCanonical error %v, Hash's %v", raw, gerr, herr)
		}
		if herr != nil {
			return
		}
		if got.Hash != hash {
			t.Fatalf("%q: hash %s, Hash's %s", raw, got.Hash, hash)
		}
		disp, warnings, err := Display(raw, rd)
		if err != nil {
			t.Fatalf("%q: Display failed where Hash did not: %v", raw, err)
		}
		if !bytes.Equal(got.Display, disp) || !slices.Equal(got.Warnings, warnings) {
			t.Fatalf("%q: copy %s %q, Display's %s %q", raw, got.Display, got.Warnings, disp, warnings)
		}
		want, err := Canonicalize(disp)
		if got.Depth < MaxDepth && (err != nil || !bytes.Equal(got.Canonical, want)) {
			t.Fatalf("%q: canonical %s, Canonicalize of the copy %s (%v)", raw, got.Canonical, want, err)
		}
		if d := nesting(t, disp); got.Depth != d {
			t.Fatalf("%q: depth %d, the copy's %d", raw, got.Depth, d)
		}
		if !json.Valid(disp) {
			t.Fatalf("%q: display copy %q is not valid JSON", raw, disp)
		}
	})
}
