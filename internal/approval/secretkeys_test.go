package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// An orderedMember is one member of an object decoded in document order
// (orderedDecode).
type orderedMember struct {
	Key   string
	Value any
}

// orderedDecode decodes one JSON value with encoding/json's tokens:
// objects as []orderedMember in document order, arrays as []any, numbers
// as json.Number. It shares nothing with parse.
func orderedDecode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := orderedValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("trailing data: %w", err)
	}
	return v, nil
}

func orderedValue(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := []orderedMember{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := orderedValue(d)
			if err != nil {
				return nil, err
			}
			obj = append(obj, orderedMember{Key: k.(string), Value: v})
		}
		_, err := d.Token() // '}'
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for d.More() {
			v, err := orderedValue(d)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := d.Token() // ']'
		return arr, err
	}
	return tok, nil
}

// naiveKeysShown is the display copy of v (orderedDecode's) as the docs
// say it, written the obvious way: in a key that a pattern matches, every
// pattern's matches are "[redacted key N]", N from the last hidden key's
// number + 1 (from 1), bumped while the key shown is a key of the object
// as received or shown for an earlier key;
// a secret key's value (by the key as received) is a marker; every
// pattern runs over every string value, then the cut.
func naiveKeysShown(v any, rd *Redaction) any {
	switch x := v.(type) {
	case []orderedMember:
		out := make([]orderedMember, 0, len(x))
		used := map[string]bool{}
		for _, m := range x {
			used[m.Key] = true
		}
		last := 0
		for _, m := range x {
			key := m.Key
			for _, re := range rd.Patterns {
				if re.MatchString(m.Key) {
					for n := last + 1; ; n++ {
						key = naiveHide(m.Key, rd, func(*regexp.Regexp) string { return "[redacted key " + strconv.Itoa(n) + "]" })
						if !used[key] {
							last = n
							break
						}
					}
					used[key] = true
					break
				}
			}
			if why, ok := rd.secretKey(m.Key); ok {
				out = append(out, orderedMember{Key: key, Value: "[redacted: key " + fmt.Sprintf("%q", why) + "]"})
				continue
			}
			out = append(out, orderedMember{Key: key, Value: naiveKeysShown(m.Value, rd)})
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = naiveKeysShown(e, rd)
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

// checkKeysNaive fails t unless Display of raw decodes to naiveKeysShown
// of raw, HashDisplayCanonical gives the same copy and warnings and the
// canonical form of that copy, and neither the copy nor a warning holds
// any of secrets.
func checkKeysNaive(t *testing.T, raw []byte, rd Redaction, secrets ...string) {
	t.Helper()
	disp, warnings, err := Display(raw, rd)
	if err != nil {
		return // the parse's errors are checked elsewhere
	}
	orig, err := orderedDecode(raw)
	if err != nil {
		t.Fatalf("%.200q: Display took what encoding/json refuses: %v", raw, err)
	}
	got, err := orderedDecode(disp)
	if err != nil {
		t.Fatalf("%.200q: copy %.300q: %v", raw, disp, err)
	}
	if want := naiveKeysShown(orig, &rd); !reflect.DeepEqual(got, want) {
		t.Fatalf("%.200q: copy %.300q, the naive display %.300q", raw, got, want)
	}
	shown, err := HashDisplayCanonical(raw, rd)
	if err != nil {
		t.Fatalf("%.200q: HashDisplayCanonical: %v", raw, err)
	}
	if !bytes.Equal(shown.Display, disp) || !reflect.DeepEqual(shown.Warnings, warnings) {
		t.Fatalf("%.200q: HashDisplayCanonical's copy %.300q %q, Display's %.300q %q", raw, shown.Display, shown.Warnings, disp, warnings)
	}
	canon, err := Canonicalize(disp)
	if err != nil {
		t.Fatalf("%.200q: the copy %.300q does not canonicalize: %v", raw, disp, err)
	}
	if !bytes.Equal(canon, shown.Canonical) {
		t.Fatalf("%.200q: canonical copy %.300q, Canonicalize of the copy %.300q", raw, shown.Canonical, canon)
	}
	for _, s := range secrets {
		all := string(disp) + strings.Join(warnings, "\n") + string(shown.Canonical)
		if strings.Contains(all, s) {
			t.Fatalf("%.200q: %q shown in %.400q", raw, s, all)
		}
	}
}

// ghToken is a GitHub-token-shaped secret (the default patterns).
const ghToken = "ghp_0123456789abcdefghijABCDEFGHIJ01234567"

// TestSecretKeysHidden (fixes30): a key that a pattern matches is shown
// as a marker unique within its object; before, the key was shown as it
// is ("{"env":{"GITHUB=ghp_…":""}}" showed the token).
func TestSecretKeysHidden(t *testing.T) {
	rd := DefaultRedaction()
	raw := []byte(`{"env":{"GITHUB=` + ghToken + `":"","Bearer abcdefghijklmnop":1,"HOME":"/root"}}`)
	disp, warnings, err := Display(raw, rd)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"env":{"GITHUB=[redacted key 1]":"","[redacted key 2]":1,"HOME":"/root"}}`; string(disp) != want {
		t.Errorf("copy %s, want %s", disp, want)
	}
	wantWarnings := []string{
		`$.env["GITHUB=[redacted key 1]"]: key hidden (looks like a GitHub token); the hash covers the real key`,
		`$.env["[redacted key 2]"]: key hidden (looks like a bearer token); the hash covers the real key`,
	}
	if !reflect.DeepEqual(warnings, wantWarnings) {
		t.Errorf("warnings %q, want %q", warnings, wantWarnings)
	}
	checkKeysNaive(t, raw, rd, ghToken, "abcdefghijklmnop")

	// A marker never takes the text of a key of its object, hidden or
	// not; a hidden key's value is still redacted by the key's name.
	raw = []byte(`{"[redacted key 1]":1,"x` + ghToken + `":2,"[redacted key 3]":3,"token ` + ghToken + `":"v","[redacted key 2]":{"y` + ghToken + `":4}}`)
	disp, _, err = Display(raw, rd)
	if err != nil {
		t.Fatal(err)
	}
	// The keys' own marker texts are written \u005B… (fixes33: lookAlikes).
	if want := `{"\u005Bredacted key 1]":1,"x[redacted key 1]":2,"\u005Bredacted key 3]":3,"token [redacted key 2]":"[redacted: key \"token\"]","\u005Bredacted key 2]":{"y[redacted key 1]":4}}`; string(disp) != want {
		t.Errorf("copy %s, want %s", disp, want)
	}
	checkKeysNaive(t, raw, rd, ghToken)

	// Escaped keys, invisible runes in a hidden key, keys in arrays,
	// configured patterns.
	ar := attackRedaction(7)
	for _, raw := range []string{
		`{"\u0067hp_0123456789abcdefghijABCDEFGHIJ01234567":1}`,
		`{"k\u200bey42":"a","b":[{"秘密1234":{"PASS=hunter2":[]}}]}`,
		`[{"🔑abc":"🔑abc","AKIAABCDEFGHIJKLMNOP":null}]`,
		`{"a":1,"ab\u3042123":2,"[redacted key 1]":3}`,
	} {
		checkKeysNaive(t, []byte(raw), ar, ghToken, "秘密1234", "hunter2", "🔑abc", "AKIAABCDEFGHIJKLMNOP", "ab\u3042123")
	}
}

// FuzzDisplayKeysAsNaive (fixes30): for any text placed as keys (alone,
// beside markers' texts, twice over with a prefix, escaped) and values,
// Display's copy decodes to what the naive display gives, in order, and
// HashDisplayCanonical agrees with Display and Canonicalize.
func FuzzDisplayKeysAsNaive(f *testing.F) {
	for _, s := range append(secretTexts(), "秘密1234", "abあ123", "PASS=hunter2", "k\u200bey42", "🔑abc", "[redacted key 1]", "plain") {
		f.Add(s, uint8(0))
		f.Add(s, uint8(9))
	}
	f.Fuzz(func(t *testing.T, s string, cut uint8) {
		if !utf8.ValidString(s) {
			return
		}
		rd := attackRedaction(int(cut % 64))
		k1, _ := json.Marshal(s)
		k2, _ := json.Marshal("x" + s)
		docs := []string{
			`{` + string(k1) + `:` + string(k1) + `}`,
			`{"[redacted key 1]":0,` + string(k1) + `:1,"[redacted key 2]":2,` + string(k2) + `:[` + string(k1) + `]}`,
			`[{"a":{` + string(k2) + `:{` + string(k1) + `:"` + escapeAll(s) + `"}}}]`,
			`{"` + escapeAll(s) + `":1,"token":2}`,
		}
		for _, raw := range docs {
			checkKeysNaive(t, []byte(raw), rd)
		}
	})
}

// naiveHide is s with the text the patterns' matches in s cover hidden,
// written the obvious way: the matches of every pattern in s as received,
// merged while two overlap (or start at the same byte), each merged
// stretch replaced by marker of the pattern (the first in rd.Patterns)
// whose match starts it.
func naiveHide(s string, rd *Redaction, marker func(*regexp.Regexp) string) string {
	type span struct {
		a, b int
		re   *regexp.Regexp
		k    int
	}
	var spans []span
	for k, re := range rd.Patterns {
		for _, loc := range re.FindAllStringIndex(s, -1) {
			spans = append(spans, span{loc[0], loc[1], re, k})
		}
	}
	for merged := true; merged; {
		merged = false
		for i := 0; i < len(spans) && !merged; i++ {
			for j := i + 1; j < len(spans) && !merged; j++ {
				x, y := spans[i], spans[j]
				if x.a < y.b && y.a < x.b || x.a == y.a {
					if y.a < x.a || y.a == x.a && y.k < x.k {
						x.re, x.k = y.re, y.k
					}
					x.a, x.b = min(x.a, y.a), max(x.b, y.b)
					spans[i] = x
					spans = append(spans[:j], spans[j+1:]...)
					merged = true
				}
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].a < spans[j].a })
	out, last := "", 0
	for _, sp := range spans {
		out += s[last:sp.a] + marker(sp.re)
		last = sp.b
	}
	return out + s[last:]
}
