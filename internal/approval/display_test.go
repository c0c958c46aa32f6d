package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDisplay(t *testing.T) {
	small := DefaultRedaction()
	small.MaxString = 5
	tests := []struct {
		name         string
		in           string
		rd           Redaction
		want         string
		wantWarnings []string
	}{
		// Case C15: the three inputs, written with escapes and with raw characters.
		{
			name:         "C15 terminal escape",
			in:           `{"command":"rm -rf ~ \u001b[2K\u001b[1Gls -la"}`,
			rd:           DefaultRedaction(),
			want:         `{"command":"rm -rf ~ \u001B[2K\u001B[1Gls -la"}`,
			wantWarnings: []string{"$.command: contains U+001B ESCAPE"},
		},
		{
			name:         "C15 right-to-left override",
			in:           `{"path":"/srv/invoice\u202Efdp.exe"}`,
			rd:           DefaultRedaction(),
			want:         `{"path":"/srv/invoice\u202Efdp.exe"}`,
			wantWarnings: []string{"$.path: contains U+202E RIGHT-TO-LEFT OVERRIDE"},
		},
		{
			name:         "C15 zero width space",
			in:           `{"to":"acct\u200b-1"}`,
			rd:           DefaultRedaction(),
			want:         `{"to":"acct\u200B-1"}`,
			wantWarnings: []string{"$.to: contains U+200B ZERO WIDTH SPACE"},
		},
		{
			name:         "C15 raw characters",
			in:           "{\"path\":\"/srv/invoice\u202efdp.exe\",\"to\":\"acct\u200b-1\"}",
			rd:           DefaultRedaction(),
			want:         `{"path":"/srv/invoice\u202Efdp.exe","to":"acct\u200B-1"}`,
			wantWarnings: []string{"$.path: contains U+202E RIGHT-TO-LEFT OVERRIDE", "$.to: contains U+200B ZERO WIDTH SPACE"},
		},
		{
			name: "structure, key order and number literals kept",
			in:   ` { "b" : [ 1.0 , -0 , 9007199254740993 , 1E+2 ] , "a" : { "z" : null , "y" : true } , "s" : "é😀\/\"\\" } `,
			rd:   DefaultRedaction(),
			want: `{"b":[1.0,-0,9007199254740993,1E+2],"a":{"z":null,"y":true},"s":"é😀/\"\\"}`,
		},
		{
			name: "nested secret keys",
			in: `{"user":"bob","db":{"host":"h","Password":"hunter2","opts":{"api_key":{"k":[1,2]}}},` +
				`"headers":[{"Authorization":"Basic abc"},{"X-Session-Id":"s1"}],` +
				`"author":"alice","max_tokens":100,"auth":"x","client-secret":null,"PIN":1234,"spinner":"on"}`,
			rd: DefaultRedaction(),
			want: `{"user":"bob","db":{"host":"h","Password":"[redacted: key \"password\"]","opts":{"api_key":"[redacted: key \"apikey\"]"}},` +
				`"headers":[{"Authorization":"[redacted: key \"authorization\"]"},{"X-Session-Id":"[redacted: key \"sessionid\"]"}],` +
				`"author":"alice","max_tokens":100,"auth":"[redacted: key \"auth\"]","client-secret":"[redacted: key \"secret\"]","PIN":"[redacted: key \"pin\"]","spinner":"on"}`,
			wantWarnings: []string{
				`$.db.Password: value hidden (key "password"); the hash covers the real value`,
				`$.db.opts.api_key: value hidden (key "apikey"); the hash covers the real value`,
				`$.headers[0].Authorization: value hidden (key "authorization"); the hash covers the real value`,
				`$.headers[1]["X-Session-Id"]: value hidden (key "sessionid"); the hash covers the real value`,
				`$.auth: value hidden (key "auth"); the hash covers the real value`,
				`$["client-secret"]: value hidden (key "secret"); the hash covers the real value`,
				`$.PIN: value hidden (key "pin"); the hash covers the real value`,
			},
		},
		{
			name:         "invisible character in a secret key does not hide it",
			in:           `{"pass\u200bword":"hunter2"}`,
			rd:           DefaultRedaction(),
			want:         `{"pass\u200Bword":"[redacted: key \"password\"]"}`,
			wantWarnings: []string{`$["pass\u200Bword"]: key contains U+200B ZERO WIDTH SPACE`, `$["pass\u200Bword"]: value hidden (key "password"); the hash covers the real value`},
		},
		{
			name: "secret shapes",
			in: `{"t":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc-_123",` +
				`"cmd":"curl -H 'Authorization: Bearer abcdef123456789' https://x",` +
				`"aws":"key AKIAIOSFODNN7EXAMPLE here",` +
				`"gh":"ghp_0123456789abcdefghij0123456789abcdef",` +
				`"dsn":"postgres://admin:hunter2@db:5432/prod",` +
				`"pem":"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----",` +
				`"cut":"-----BEGIN RSA PRIVATE KEY-----\nMIIEow",` +
				`"words":"the bearer of bad news","url":"https://example.com/a:b@c","cert":"-----BEGIN CERTIFICATE-----"}`,
			rd: DefaultRedaction(),
			want: `{"t":"[redacted: looks like a JWT]",` +
				`"cmd":"curl -H 'Authorization: [redacted: looks like a bearer token]' https://x",` +
				`"aws":"key [redacted: looks like an AWS access key id] here",` +
				`"gh":"[redacted: looks like a GitHub token]",` +
				`"dsn":"postgres:[redacted: looks like credentials in a URL]db:5432/prod",` +
				`"pem":"[redacted: looks like a private key]",` +
				`"cut":"[redacted: looks like a private key]",` +
				`"words":"the bearer of bad news","url":"https://example.com/a:b@c","cert":"-----BEGIN CERTIFICATE-----"}`,
			wantWarnings: []string{
				"$.t: text hidden (looks like a JWT); the hash covers the real value",
				"$.cmd: text hidden (looks like a bearer token); the hash covers the real value",
				"$.aws: text hidden (looks like an AWS access key id); the hash covers the real value",
				"$.gh: text hidden (looks like a GitHub token); the hash covers the real value",
				"$.dsn: text hidden (looks like credentials in a URL); the hash covers the real value",
				"$.pem: text hidden (looks like a private key); the hash covers the real value",
				"$.cut: text hidden (looks like a private key); the hash covers the real value",
			},
		},
		{
			name:         "secret shapes in keys are not redacted, under arrays they are",
			in:           `{"list":["Bearer abcdefghijk",1]}`,
			rd:           DefaultRedaction(),
			want:         `{"list":["[redacted: looks like a bearer token]",1]}`,
			wantWarnings: []string{"$.list[0]: text hidden (looks like a bearer token); the hash covers the real value"},
		},
		{
			name: "truncation",
			in:   `{"s":"abcdefgh","e":"éééééé","ok":"abcde"}`,
			rd:   small,
			want: `{"s":"abcde…[truncated for display: 5 of 8 characters shown]","e":"ééééé…[truncated for display: 5 of 6 characters shown]","ok":"abcde"}`,
			wantWarnings: []string{
				"$.s: string of 8 characters truncated to 5 for display only; the hash covers the full value",
				"$.e: string of 6 characters truncated to 5 for display only; the hash covers the full value",
			},
		},
		{
			name:         "warning for a character beyond the cut",
			in:           `{"s":"abcdefgh\u200b"}`,
			rd:           small,
			want:         `{"s":"abcde…[truncated for display: 5 of 9 characters shown]"}`,
			wantWarnings: []string{"$.s: contains U+200B ZERO WIDTH SPACE", "$.s: string of 9 characters truncated to 5 for display only; the hash covers the full value"},
		},
		{
			name: "one warning per string and character, document order, paths",
			in:   `{"a":[{"b c":"x\u202e\u200b\u202e"},"\u200b"],"to\u200b":"\u200b","t":"\u200b"}`,
			rd:   DefaultRedaction(),
			want: `{"a":[{"b c":"x\u202E\u200B\u202E"},"\u200B"],"to\u200B":"\u200B","t":"\u200B"}`,
			wantWarnings: []string{
				`$.a[0]["b c"]: contains U+202E RIGHT-TO-LEFT OVERRIDE`,
				`$.a[0]["b c"]: contains U+200B ZERO WIDTH SPACE`,
				`$.a[1]: contains U+200B ZERO WIDTH SPACE`,
				`$["to\u200B"]: key contains U+200B ZERO WIDTH SPACE`,
				`$["to\u200B"]: contains U+200B ZERO WIDTH SPACE`,
				`$.t: contains U+200B ZERO WIDTH SPACE`,
			},
		},
		{
			name: "controls, separators and tag characters",
			in:   `{"c":"a\nb\tc\r\u0000\u0008\u007f\u0085\u009b\u2028\u00ad\ud800\udc00\udb40\udc41"}`,
			rd:   DefaultRedaction(),
			want: `{"c":"a\nb\tc\r\u0000\u0008\u007F\u0085\u009B\u2028\u00AD` + "\U00010000" + `\uDB40\uDC41"}`,
			wantWarnings: []string{
				"$.c: contains U+000D CARRIAGE RETURN",
				"$.c: contains U+0000 NULL",
				"$.c: contains U+0008 BACKSPACE",
				"$.c: contains U+007F DELETE",
				"$.c: contains U+0085 NEXT LINE",
				"$.c: contains U+009B C1 CONTROL",
				"$.c: contains U+2028 LINE SEPARATOR",
				"$.c: contains U+00AD SOFT HYPHEN",
				"$.c: contains U+E0041 TAG CHARACTER",
			},
		},
		{
			name: "zero Redaction hides nothing",
			in:   `{"password":"hunter2","t":"Bearer abcdefghijkl","s":"` + strings.Repeat("x", 5000) + `"}`,
			rd:   Redaction{},
			want: `{"password":"hunter2","t":"Bearer abcdefghijkl","s":"` + strings.Repeat("x", 5000) + `"}`,
		},
		{
			name: "top-level scalar",
			in:   `"\u200b"`,
			rd:   DefaultRedaction(),
			want: `"\u200B"`,
			wantWarnings: []string{
				"$: contains U+200B ZERO WIDTH SPACE",
			},
		},
		{
			name: "empty means {}",
			in:   ``,
			rd:   DefaultRedaction(),
			want: `{}`,
		},
		{
			name:         "custom unnamed pattern",
			in:           `{"s":"id=XYZ-123 ok"}`,
			rd:           Redaction{Patterns: []*regexp.Regexp{regexp.MustCompile(`XYZ-\d+`)}},
			want:         `{"s":"id=[redacted: looks like a secret] ok"}`,
			wantWarnings: []string{"$.s: text hidden (looks like a secret); the hash covers the real value"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			orig := bytes.Clone(in)
			got, warnings, err := Display(in, tt.rd)
			if err != nil {
				t.Fatalf("Display(%s): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("display copy mismatch (-want +got):\n%s", diff)
			}
			want := tt.wantWarnings
			if want == nil {
				want = []string{}
			}
			if diff := cmp.Diff(want, warnings); diff != "" {
				t.Errorf("warnings mismatch (-want +got):\n%s", diff)
			}
			if !json.Valid(got) {
				t.Errorf("display copy %s is not valid JSON", got)
			}
			if !bytes.Equal(in, orig) {
				t.Errorf("Display modified its input")
			}
		})
	}
}

// TestDisplayDecodesToOriginal checks that escaping is only visual: with
// nothing to redact or cut, decoding the display copy gives the original
// value, so its hash is the hash of the real arguments.
func TestDisplayDecodesToOriginal(t *testing.T) {
	for _, in := range []string{
		`{"command":"rm -rf ~ \u001b[2K\u001b[1Gls -la"}`,
		`{"path":"/srv/invoice\u202Efdp.exe"}`,
		`{"to":"acct\u200b-1","n":9007199254740993,"k\u2066":"\udb40\udc41\ufeff\u061c\u180e"}`,
	} {
		got, _, err := Display(json.RawMessage(in), DefaultRedaction())
		if err != nil {
			t.Fatalf("Display(%s): %v", in, err)
		}
		if diff := cmp.Diff(decodeStd(t, []byte(in)), decodeStd(t, got)); diff != "" {
			t.Errorf("Display(%s) = %s decodes differently (-raw +display):\n%s", in, got, diff)
		}
		hr, err := Hash(json.RawMessage(in))
		if err != nil {
			t.Fatal(err)
		}
		hd, err := Hash(got)
		if err != nil {
			t.Fatal(err)
		}
		if hr != hd {
			t.Errorf("Hash(display) = %s, want Hash(raw) = %s", hd, hr)
		}
	}
}

// TestDisplayFlagsListedCharacters checks every character the design names
// as control, bidi or invisible.
func TestDisplayFlagsListedCharacters(t *testing.T) {
	var rs []rune
	for r := rune(0); r < 0x20; r++ {
		rs = append(rs, r)
	}
	for r := rune(0x7F); r <= 0x9F; r++ {
		rs = append(rs, r)
	}
	rs = append(rs, 0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069,
		0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD, 0x180E, 0xE0001, 0xE007F,
		0x2028, 0x2029, 0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0x2061, 0x2064, 0x206A, 0xFFF9)
	for _, r := range rs {
		in, err := json.Marshal(map[string]string{"s": "a" + string(r) + "b"})
		if err != nil {
			t.Fatal(err)
		}
		got, warnings, err := Display(in, DefaultRedaction())
		if err != nil {
			t.Fatalf("U+%04X: %v", r, err)
		}
		if bytes.ContainsRune(got, r) {
			t.Errorf("U+%04X passes through unescaped: %q", r, got)
		}
		wantPrefix := fmt.Sprintf("$.s: contains U+%04X ", r)
		if r == '\t' || r == '\n' { // escaped, but ordinary in multi-line text: no warning
			if len(warnings) != 0 {
				t.Errorf("U+%04X: warnings %q, want none", r, warnings)
			}
			continue
		}
		if len(warnings) != 1 || !strings.HasPrefix(warnings[0], wantPrefix) {
			t.Errorf("U+%04X: warnings %q, want one starting %q", r, warnings, wantPrefix)
		}
	}
	for _, r := range []rune{' ', 'a', 0xA0, 0xE9, 0x05D0, 0x4E2D, 0x1F600, 0xFE0F} {
		in, _ := json.Marshal(map[string]string{"s": string(r)})
		got, warnings, err := Display(in, DefaultRedaction())
		if err != nil || len(warnings) != 0 || !bytes.ContainsRune(got, r) {
			t.Errorf("U+%04X: got %q, warnings %q, err %v; want it shown as is", r, got, warnings, err)
		}
	}
}

func TestDisplayErrors(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{`{"a":1,"a":2}`, ErrDuplicateKey},
		{`{"a":{"password":1,"password":2}}`, ErrDuplicateKey},
		{`{"a":`, ErrInvalidJSON},
		{`{"a":"\ud800"}`, ErrInvalidJSON},
		{"{\"a\":\"\xff\"}", ErrInvalidJSON},
	}
	for _, tt := range tests {
		if _, _, err := Display(json.RawMessage(tt.in), DefaultRedaction()); !errors.Is(err, tt.want) {
			t.Errorf("Display(%q) error = %v, want %v", tt.in, err, tt.want)
		}
	}
}

// FuzzDisplay checks that the display copy is always valid JSON, and that
// without redaction or truncation it is the same value as the input.
func FuzzDisplay(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		plain, _, err := Display(in, Redaction{})
		if err != nil {
			if _, cerr := Canonicalize(in); cerr == nil {
				t.Fatalf("Display(%q) = %v, but Canonicalize accepts it", in, err)
			}
			return
		}
		if len(in) == 0 {
			return
		}
		want, err := Canonicalize(in)
		if err != nil {
			t.Fatalf("Display accepted %q, Canonicalize did not: %v", in, err)
		}
		got, err := Canonicalize(plain)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Display(%q) = %q: canonical form %q, %v; want %q", in, plain, got, err, want)
		}
		red, _, err := Display(in, DefaultRedaction())
		if err != nil {
			t.Fatalf("Display with DefaultRedaction(%q): %v", in, err)
		}
		if _, err := Canonicalize(red); err != nil {
			t.Fatalf("redacted display copy %q of %q does not parse: %v", red, in, err)
		}
	})
}

// BenchmarkDisplay builds the display copy of a 2 MiB argument.
func BenchmarkDisplay(b *testing.B) {
	raw := json.RawMessage(`{"path":"/tmp/x","content":"` + strings.Repeat("abcdefgh\\n", 2<<20/10) + `","n":[1,2,3]}`)
	rd := DefaultRedaction()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, _, err := Display(raw, rd); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLargeArgument checks case C09: a 2 MiB argument is hashed in full
// while its display copy is cut, with a warning saying so.
func TestLargeArgument(t *testing.T) {
	big := strings.Repeat("a", 2<<20)
	raw := json.RawMessage(`{"content":"` + big + `"}`)
	changed := json.RawMessage(`{"content":"` + big[:len(big)-1] + `b"}`)
	h1, err := Hash(raw)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := Hash(changed)
	if err != nil {
		t.Fatal(err)
	}
	if h1 == h2 {
		t.Errorf("changing the last character of a 2 MiB argument kept the hash")
	}
	d, warnings, err := Display(raw, DefaultRedaction())
	if err != nil {
		t.Fatal(err)
	}
	if len(d) > 5000 {
		t.Errorf("display copy is %d bytes, want it cut near 4096 characters", len(d))
	}
	want := []string{"$.content: string of 2097152 characters truncated to 4096 for display only; the hash covers the full value"}
	if diff := cmp.Diff(want, warnings); diff != "" {
		t.Errorf("warnings mismatch (-want +got):\n%s", diff)
	}
}
