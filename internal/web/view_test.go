package web

import (
	"encoding/json"
	"strings"
	"testing"

	"toolgate/internal/api"
)

func TestSummarize(t *testing.T) {
	long := strings.Repeat("a", 50)
	tests := []struct {
		name, display, want string
	}{
		{"members in order", `{"path":"new.txt","mode":420,"force":true,"x":null}`, `path: "new.txt", mode: 420, force: true, x: null`},
		{"no arguments", `{}`, `(no arguments)`},
		{"nested values abbreviated", `{"edits":[{"a":1}],"opts":{"a":1,"b":2},"one":["x"]}`, `edits: [1 item], opts: {2 keys}, one: [1 item]`},
		{"line breaks and hidden characters visible", `{"c":"a\nb\u202Ec"}`, `c: "a⏎b\u202Ec"`},
		{"a long value is cut, a marker is not", `{"c":"` + long + `[redacted: looks like an API key] and more","p":"x"}`,
			`c: "` + long + `[redacted: looks like an API key]…", p: "x"`},
		{"not an object", `[1,2]`, `[2 items]`},
		{"not JSON", `{"a":`, `{"a":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := summarize(json.RawMessage(tt.display), summaryLen); got != tt.want {
				t.Errorf("summarize(%s) = %q, want %q", tt.display, got, tt.want)
			}
		})
	}
	if got := summarize(json.RawMessage(`{"a":"`+strings.Repeat("b", 300)+`","c":"`+strings.Repeat("d", 300)+`"}`), 40); len([]rune(got)) != 40 || !strings.HasSuffix(got, "…") {
		t.Errorf("a long summary is %d characters (%q), want 40 ending in …", len([]rune(got)), got)
	}
}

func TestSegments(t *testing.T) {
	segs := segments("x\u200by[redacted: key \"password\"]…[truncated for display: 4 of 9 characters shown]\tz\n", false)
	var got []string
	for _, s := range segs {
		got = append(got, s.Class+":"+s.Text)
	}
	want := []string{`:x`, `hidden:\u200B`, `:y`, `redacted:[redacted: key "password"]`, `cut:…[truncated for display: 4 of 9 characters shown]`,
		`hidden:\t`, `:z`, `hidden:\n`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("segments = %q, want %q", got, want)
	}
	// In a text block, line feeds and tabs stay; other hidden characters do not.
	block := segments("a\tb\nc\rd\u202e", true)
	var text strings.Builder
	for _, s := range block {
		text.WriteString(s.Text)
	}
	if text.String() != "a\tb\nc\\rd\\u202E" {
		t.Errorf("block text %q", text.String())
	}
}

func TestParseValueKeepsOrderAndLiterals(t *testing.T) {
	n, err := parseValue([]byte(`{"z":1,"a":9007199254740993,"m":1e400}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range n.Items {
		got = append(got, m.Key+"="+m.Literal)
	}
	if want := "z=1|a=9007199254740993|m=1e400"; strings.Join(got, "|") != want {
		t.Errorf("members %q, want %s", got, want)
	}
	deep := strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)
	if _, err := parseValue([]byte(deep)); err == nil {
		t.Error("a value nested past maxDepth parsed; want an error (the page would recurse without bound)")
	}
}

// TestSubjectNamesAPromptOrResource: the inbox titles a held prompts/get
// or resources/read with its server and the prompt or resource (it said
// "prompt_get " and nothing more: the name is in Tool, Target is empty).
func TestSubjectNamesAPromptOrResource(t *testing.T) {
	for _, c := range []struct {
		a                   api.Approval
		wantKind, wantTitle string
	}{
		{api.Approval{Server: "fs", Tool: "write_file"}, "", "fs · write_file"},
		{api.Approval{Kind: "prompt_get", Server: "ev", Tool: "args-prompt"}, "prompt", "ev · args-prompt"},
		{api.Approval{Kind: "resource_read", Server: "docs", Tool: "file:///a.md"}, "resource", "docs · file:///a.md"},
	} {
		if kind, title := subject(c.a); kind != c.wantKind || title != c.wantTitle {
			t.Errorf("subject(%s %s %s) = %q, %q; want %q, %q", c.a.Kind, c.a.Server, c.a.Tool, kind, title, c.wantKind, c.wantTitle)
		}
	}
}
