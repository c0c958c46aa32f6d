package api_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/api"
)

func TestEscapeJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "ascii unchanged", in: `{"a":[1,"b"]}`, want: `{"a":[1,"b"]}`},
		{name: "whitespace between tokens kept", in: "{\n\t\"a\": 1\r\n}", want: "{\n\t\"a\": 1\r\n}"},
		{name: "visible unicode kept", in: `{"name":"Zoë 日本 🙂"}`, want: `{"name":"Zoë 日本 🙂"}`},
		{name: "bidi override", in: "{\"p\":\"invoice\u202efdp.exe\"}", want: `{"p":"invoice\u202Efdp.exe"}`},
		{name: "zero width space", in: "{\"to\":\"acct\u200b-1\"}", want: `{"to":"acct\u200B-1"}`},
		{name: "key too", in: "{\"a\u2066\":1}", want: `{"a\u2066":1}`},
		{name: "raw escape control", in: "[\"\x1b[2K\"]", want: `["\u001B[2K"]`},
		{name: "C1 control", in: "[\"a\u0085b\"]", want: `["a\u0085b"]`},
		{name: "line separator", in: "[\"a\u2028b\"]", want: `["a\u2028b"]`},
		{name: "tag character", in: "[\"a\U000E0041\"]", want: `["a\uDB40\uDC41"]`},
		{name: "variation selector", in: "[\"a\ufe0f\"]", want: `["a\uFE0F"]`},
		{name: "hangul filler", in: "[\"\u3164\"]", want: `["\u3164"]`},
		{name: "invalid utf-8", in: "[\"a\xffb\"]", want: `["a\uFFFDb"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := api.EscapeJSON([]byte(tt.in))
			if string(got) != tt.want {
				t.Errorf("EscapeJSON(%q) = %s, want %s", tt.in, got, tt.want)
			}
			if !json.Valid(got) {
				t.Fatalf("result is not JSON: %s", got)
			}
			if !json.Valid([]byte(tt.in)) {
				return
			}
			var before, after any
			if err := json.Unmarshal([]byte(tt.in), &before); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &after); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("escaping changed the value (-before +after):\n%s", diff)
			}
		})
	}
}

func TestEscapeJSONNoCopyWhenClean(t *testing.T) {
	in := []byte(`{"a":"b"}`)
	if got := api.EscapeJSON(in); &got[0] != &in[0] || !bytes.Equal(got, in) {
		t.Error("EscapeJSON copied a clean input")
	}
}

func TestIsHidden(t *testing.T) {
	hidden := []rune{0, '\t', '\n', 0x1b, 0x7f, 0x9b, 0xad, 0x200b, 0x200d, 0x200e, 0x202e, 0x2066, 0x2028, 0x2060, 0xfeff, 0xe0001, 0xfe0f, 0x3164}
	shown := []rune{' ', 'a', '~', 0xa0, 0xe9, 0x4e2d, 0x1f642, 0xfffd}
	for _, r := range hidden {
		if !api.IsHidden(r) {
			t.Errorf("IsHidden(%U) = false", r)
		}
	}
	for _, r := range shown {
		if api.IsHidden(r) {
			t.Errorf("IsHidden(%U) = true", r)
		}
	}
}

// TestEscapeJSONShown: the reviewer's variant also escapes the spaces other
// than U+0020, and only inside the text (JSON's own whitespace stays);
// EscapeJSON leaves them for programs.
func TestEscapeJSONShown(t *testing.T) {
	in := []byte("{\"a\": \"rm\u00a0-rf\u3000\u2800 \u202e\"}")
	if got, want := string(api.EscapeJSONShown(in)), `{"a": "rm\u00A0-rf\u3000\u2800 \u202E"}`; got != want {
		t.Errorf("EscapeJSONShown = %s, want %s", got, want)
	}
	if got, want := string(api.EscapeJSON(in)), "{\"a\": \"rm\u00a0-rf\u3000\u2800 \\u202E\"}"; got != want {
		t.Errorf("EscapeJSON = %s, want %s", got, want)
	}
	for _, r := range []rune{' ', 'a', '\t'} {
		if api.IsLookAlikeSpace(r) {
			t.Errorf("IsLookAlikeSpace(%U) = true", r)
		}
	}
}
