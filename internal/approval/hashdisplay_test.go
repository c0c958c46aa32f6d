package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestParsedIsHashAndDisplay: one Parse answers as Hash and Display do,
// errors included.
func TestParsedIsHashAndDisplay(t *testing.T) {
	rd := DefaultRedaction()
	for _, raw := range []string{
		``, `{}`, `{"to":"acct-1","amount":5}`, `{"b":1,"a":[1,2,{"z":null,"y":true}]}`,
		`{"password":"hunter2","nested":{"api_key":"x"}}`, `{"t":"a\u200bb"}`, `{"s":"` + strings.Repeat("é", 3000) + `"}`,
		`{"a":1,"a":2}`, `{"a":`, `[1,2]`, `"x"`, `{"n":12345678901234567890}`, `{} x`,
	} {
		h, herr := Hash(json.RawMessage(raw))
		d, w, derr := Display(json.RawMessage(raw), rd)
		gh, gd, gw, gerr := hashDisplay(json.RawMessage(raw), rd)
		if (herr == nil) != (gerr == nil) || (herr != nil && herr.Error() != gerr.Error()) || (derr == nil) != (herr == nil) {
			t.Errorf("%.40s: Parse error %v; Hash %v, Display %v", raw, gerr, herr, derr)
			continue
		}
		if herr != nil {
			if !errors.Is(gerr, ErrInvalidJSON) && !errors.Is(gerr, ErrDuplicateKey) {
				t.Errorf("%.40s: error %v wraps neither sentinel", raw, gerr)
			}
			continue
		}
		if gh != h || string(gd) != string(d) || !slices.Equal(gw, w) {
			t.Errorf("%.40s: Parse's Hash and Display %s %s %q; Hash and Display %s %s %q", raw, gh, gd, gw, h, d, w)
		}
	}
}

// TestDisplayBuildsNoPathWithoutWarnings: a display copy with nothing to
// warn about builds no member's or element's path (issue 13: one string
// per member, for the audit record of every allowed call), while the
// warnings still name the full path.
func TestDisplayBuildsNoPathWithoutWarnings(t *testing.T) {
	rd := DefaultRedaction()
	plain := json.RawMessage(`{"path":"/tmp/x","content":"hello","mode":1,"tags":["a","b",{"deep":[true,null]}],"more":{"k":"v","w":"x"}}`)
	parsed := testing.AllocsPerRun(100, func() { _, _ = parse(plain) })
	displayed := testing.AllocsPerRun(100, func() { _, _, _ = Display(plain, rd) })
	// Beyond the parse: the copy's buffer, the redaction's copy, the
	// warnings' list header, two more under -race (the base built 14
	// path strings more).
	if displayed > parsed+5 {
		t.Errorf("displaying 11 members and elements allocated %v times, the parse %v: want at most 5 more (no path without a warning)", displayed, parsed)
	}
	_, warnings, err := Display(json.RawMessage(`{"a":[{"b c":{"d":"x\u200by"}}]}`), rd)
	if err != nil {
		t.Fatal(err)
	}
	if want := `$.a[0]["b c"].d: contains U+200B ZERO WIDTH SPACE`; len(warnings) != 1 || warnings[0] != want {
		t.Errorf("warnings %q, want [%q]", warnings, want)
	}
}

// TestHashDisplayCanonicalIsCanonicalizeOfTheCopy: the display copy's
// canonical form written from the one parse is Canonicalize of the copy,
// its depth the copy's nesting, and the hash, copy and warnings are
// one Parse's, for arguments with redacted keys and text, invisible
// characters, cut strings, numbers, escapes and deep nesting.
func TestHashDisplayCanonicalIsCanonicalizeOfTheCopy(t *testing.T) {
	rd := DefaultRedaction()
	rd.MaxString = 10
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	deepSecret := `{"password":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`
	for _, raw := range []string{
		``, `{}`, `[]`, `"x"`, `12`, `{"to":"acct-1","amount":5}`, `{"b":1,"a":[1,2,{"z":null,"y":true}]}`,
		`{"password":"hunter2","nested":{"api_key":{"x":[1,2]}},"z":1}`, `{"t":"a\u200bb","k\u200b":1}`,
		`{"s":"` + strings.Repeat("é", 30) + `"}`, `{"n":1E2,"m":-0.5e-3,"big":12345678901234567890,"f":1.0}`,
		`{"e":"\u00e9\"\\\/\b\f\n\r\t\u0001<&>\u2028","\ud83d\ude00":"x","é":2,"a":3}`,
		`{"auth":"Bearer abcdefghijklmnopqrstuvwxyz0123456789"}`, `{"key":"AKIAABCDEFGHIJKLMNOP and more"}`,
		deep, deepSecret, `{"a":1,"a":2}`, `{"a":`, "{\"bad\":\"\xff\"}", "{\"\xfe\":1}",
	} {
		h, disp, w, err := hashDisplay(json.RawMessage(raw), rd)
		got, gerr := HashDisplayCanonical(json.RawMessage(raw), rd)
		if (err == nil) != (gerr == nil) {
			t.Errorf("%.40s: error %v, Parse's %v", raw, gerr, err)
			continue
		}
		if err != nil {
			continue
		}
		if got.Hash != h || !bytes.Equal(got.Display, disp) || !slices.Equal(got.Warnings, w) {
			t.Errorf("%.40s: %s %s %q, Parse's %s %s %q", raw, got.Hash, got.Display, got.Warnings, h, disp, w)
		}
		want, cerr := Canonicalize(disp)
		if cerr != nil || !bytes.Equal(got.Canonical, want) {
			t.Errorf("%.40s: canonical %s, Canonicalize of the copy %s (%v)", raw, got.Canonical, want, cerr)
		}
		if d := nesting(t, disp); got.Depth != d {
			t.Errorf("%.40s: depth %d, the copy's %d", raw, got.Depth, d)
		}
	}
}

// nesting is the deepest nesting of arrays and objects in the JSON text b.
func nesting(t *testing.T, b []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// hashDisplay is the hash and display copy of raw from one Parse.
func hashDisplay(raw json.RawMessage, rd Redaction) (string, json.RawMessage, []string, error) {
	p, err := Parse(raw)
	if err != nil {
		return "", nil, nil, err
	}
	d, w := p.Display(rd)
	return p.Hash(), d, w, nil
}
