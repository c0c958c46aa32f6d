package approval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSkipSafeIsNotFlagged: every rune whose UTF-8 form skipSafe skips is
// one the base shows as it is, skipped whole; and the runes of the blocks
// safeLead left to be decoded one by one (kana, Devanagari, Thai,
// punctuation past U+206F) are skipped.
func TestSkipSafeIsNotFlagged(t *testing.T) {
	base := baseFlagged(t)
	for r := rune(0x80); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		b := utf8.AppendRune(nil, r)
		if n := skipSafe(string(b)+"x", 0); n != 0 && (base(r) || n != len(b)) {
			t.Fatalf("U+%04X: skipSafe = %d, flagged by the base %v, %d bytes", r, n, base(r), len(b))
		}
	}
	for _, r := range []rune{0x0905, 0x0E01, 0x10D0, 0x2122, 0x3001, 0x3042, 0x30C6, 0xFF21} {
		if n := skipSafe(string(r), 0); n != 3 {
			t.Errorf("U+%04X: skipSafe = %d, want 3 (no flagged rune shares its first two bytes)", r, n)
		}
	}
	// Invalid text is never skipped by the second byte: a three-byte
	// lead without its continuation bytes, an overlong form.
	for _, s := range []string{"\xe3\x81", "\xe3\x81x", "\xe3xx", "\xe0\x81\x81", "\xef\xbfx"} {
		if n := skipSafe(s, 0); n != 0 {
			t.Errorf("%q: skipSafe = %d, want 0", s, n)
		}
	}
}

// unprefixed is rd with each pattern rewritten so that it has no literal
// prefix (an alternative that never matches) and so is always run: the
// base's way, one MatchString per pattern per string.
func unprefixed(tb testing.TB, rd Redaction) Redaction {
	tb.Helper()
	out := rd
	out.Patterns = make([]*regexp.Regexp, len(rd.Patterns))
	for k, re := range rd.Patterns {
		u := regexp.MustCompile(`(?:` + re.String() + `)|[^\x00-\x{10FFFF}]`)
		if p, _ := u.LiteralPrefix(); p != "" {
			tb.Fatalf("%s: prefix %q", u, p)
		}
		out.Patterns[k] = u
	}
	return out
}

// sameAsEveryPattern fails t unless Display and HashDisplayCanonical of
// raw with rd answer as with every pattern run on every string.
func sameAsEveryPattern(tb testing.TB, raw []byte, rd, every Redaction) {
	tb.Helper()
	d, w, err := Display(raw, rd)
	wd, ww, werr := Display(raw, every)
	if !bytes.Equal(d, wd) || !slices.Equal(w, ww) || errText(err) != errText(werr) {
		tb.Fatalf("%.200q: Display %.300q %q %v; every pattern run %.300q %q %v", raw, d, w, err, wd, ww, werr)
	}
	a, err := HashDisplayCanonical(raw, rd)
	b, werr := HashDisplayCanonical(raw, every)
	if !bytes.Equal(a.Display, b.Display) || !slices.Equal(a.Warnings, b.Warnings) || !bytes.Equal(a.Canonical, b.Canonical) || errText(err) != errText(werr) {
		tb.Fatalf("%.200q: HashDisplayCanonical %.300q %q %v; every pattern run %.300q %q %v", raw, a.Display, a.Warnings, err, b.Display, b.Warnings, werr)
	}
}

// patternRedactions are redactions whose patterns the prefix index
// handles each way: default ones (pairs of ASCII), a prefix of one byte,
// one that starts past ASCII, one whose second byte is past ASCII, none
// ((?i), a class), a match that only appears once an earlier pattern's
// marker is in the text, and more than 64 patterns.
func patternRedactions() []Redaction {
	def := DefaultRedaction()
	custom := Redaction{MaxString: 300, Patterns: []*regexp.Regexp{
		regexp.MustCompile(`(?P<an_x>x[0-9]{3})`),
		regexp.MustCompile(`(?P<an_accent>é+secret)`),
		regexp.MustCompile(`(?P<a_mixed>aé[a-z]+!)`),
		regexp.MustCompile(`(?i)(?P<a_password>password=\S+)`),
		regexp.MustCompile(`[0-9]{6}`),
		regexp.MustCompile(`(?P<a_chain>looks like an x\])`), // matches the first pattern's marker
	}}
	many := Redaction{Patterns: slices.Clone(def.Patterns)}
	for i := range 60 {
		many.Patterns = append(many.Patterns, regexp.MustCompile(fmt.Sprintf(`(?P<number_%d>n%02d[a-z]{4})`, i, i)))
	}
	many.Patterns = append(many.Patterns, regexp.MustCompile(`(?P<the_last>zz[0-9]{2})`))
	return []Redaction{def, custom, many, {MaxString: 40}}
}

// secretTexts are texts with each default pattern's secret, the custom
// ones', and near misses, in runs of ASCII, escapes and other scripts.
func secretTexts() []string {
	return []string{
		"Bearer abcdefghijklmnop", "bearer\tabcdefghijklmnop==", "BEARER abcdefgh", "Bearer short",
		"eyJhbGciOi.eyJzdWIiOiIx.sig_-", "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
		"-----BEGIN PRIVATE KEY-----\nno end", "AKIAABCDEFGHIJKLMNOP", "ASIAABCDEFGHIJKLMNOP", "AKIA1234",
		"ghp_" + strings.Repeat("a", 36), "github_pat_" + strings.Repeat("b", 30), "ghx_nope",
		"xoxb-1234567890-abc", "sk-" + strings.Repeat("c", 24), "sk_live_" + strings.Repeat("d", 24), "skate",
		"rk_test_" + strings.Repeat("e", 20), "AIza" + strings.Repeat("f", 35), "https://u:p@host/", "// comment: x@y",
		"x123", "ééésecret", "aébc!", "PassWord=hunter2", "123456", "n07abcd", "zz42",
	}
}

// TestPatternsAsEveryPattern: a pattern the walk (or, for a key, the
// prefix index's pass) rules out is one that would not have matched. Strings long enough for the prefix index (and
// short ones, searched for the prefix) with each secret among ASCII,
// escapes, kana and accented text, secrets split by escapes, and
// patterns that only match once an earlier one rewrote the text.
func TestPatternsAsEveryPattern(t *testing.T) {
	var docs []string
	fill := []string{"", `\t\"q\"\n`, "héllo ", "日本語のテキスト ", "\u200b"}
	for _, secret := range secretTexts() {
		enc, _ := json.Marshal(secret)
		s := string(enc[1 : len(enc)-1])
		for _, f := range fill {
			docs = append(docs,
				`{"s":"`+f+s+`"}`,
				`{"s":"`+strings.Repeat(f+"x", scanPatternsFrom/(len(f)+1))+s+f+`"}`,
				`{"s":"`+s+strings.Repeat(f+"y", scanPatternsFrom/(len(f)+1))+`"}`,
				`["`+strings.Repeat("日", scanPatternsFrom/6)+s+strings.Repeat("é", scanPatternsFrom/4)+`"]`,
				// Keys: ruled out by the prefix index (prefixIndex.pairs).
				`{"`+f+s+`":1,"k`+s+f+`":{"`+s+`":2}}`,
			)
		}
	}
	long := strings.Repeat("日本 ", scanPatternsFrom/7+1)
	docs = append(docs,
		`{"s":"`+long+`Bear\u0065r abcdefghijklmnop"}`, `{"s":"`+long+`e\u0079JhbGciOi.eyJzdWIiOiIx.sig"}`,
		`{"s":"`+long+`\/\/u:p@host"}`, `{"s":"`+long+`x1\u0032345 x999"}`, `{"s":"`+long+`日AKIAABCDEFGHIJKLMNOP"}`,
		`{"s":"`+long+`Bearer Bearer abcdefghijklmnop"}`, `{"s":"`+long+`x12x123x1234"}`,
	)
	for _, rd := range patternRedactions() {
		every := unprefixed(t, rd)
		for _, doc := range docs {
			sameAsEveryPattern(t, []byte(doc), rd, every)
		}
	}
}

// FuzzPatternsAsEveryPattern is TestPatternsAsEveryPattern for any
// document, each string repeated past the prefix index's threshold.
func FuzzPatternsAsEveryPattern(f *testing.F) {
	for _, s := range secretTexts() {
		enc, _ := json.Marshal(s)
		f.Add(string(enc[1:len(enc)-1]), 0)
		f.Add(string(enc[1:len(enc)-1]), 3)
	}
	rds := patternRedactions()
	every := make([]Redaction, len(rds))
	for i, rd := range rds {
		every[i] = unprefixed(f, rd)
	}
	f.Fuzz(func(t *testing.T, s string, which int) {
		i := (which%len(rds) + len(rds)) % len(rds)
		for _, doc := range []string{`{"s":"` + s + `"}`, `{"` + s + `":1,"é` + s + `x":2}`, `["` + strings.Repeat(s, 1+scanPatternsFrom/max(1, len(s))) + `"]`} {
			sameAsEveryPattern(t, []byte(doc), rds[i], every[i])
		}
	})
}
