package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"toolgate/internal/approval"
)

// summaryCases are display copies (and texts that are not) whose summary
// must stay what the base's summarizeWhole gave: redaction markers at and
// around the cut, characters of 1 to 4 bytes and escapes where a string's
// decoded start is cut, surrogate pairs, bytes that are not UTF-8, long
// keys and literals, truncation notes, nesting at and past maxDepth, and
// text that is not one JSON value.
func summaryCases() []string {
	var cs []string
	add := func(s ...string) { cs = append(cs, s...) }
	add(`{"path":"new.txt","mode":420,"force":true,"x":null}`, `{}`, ` { } `, `{"edits":[{"a":1}],"opts":{"a":1,"b":2},"one":["x"],"e":[],"o":{}}`,
		`{"c":"a\nb\u202Ec"}`, `[1,2]`, `[]`, `[[]]`, `"top"`, `12.5e-3`, `-0`, `true`, `false`, `null`, `{"a":"\u0000\u001f\t\r\b\f\/\\\""}`,
		`{"k\u00e9y":"v\u00e9","\ud83d\ude00":"\ud83d\ude00x","lone":"\ud800","lowfirst":"\udc00\ud800"}`,
		"{\"bad\":\"\x80\xe3\x81\xff ok\"}", "{\"k\xff\":1}", `{"a" : 1 , "b" :[ 1 , 2 ] }`)
	// Not one JSON value.
	add(``, ` `, `{"a":`, `{"a":1,}`, `[1,]`, `[1 2]`, `01`, `{"a" 1}`, `{1:2}`, `{"a":1}x`, `{"a":1} {}`, `tru`, `truex`, `[-]`, `[1.]`,
		`[1e]`, `[.5]`, `{"a":"b`, "{\"a\":\"\x01\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, `[nul]`, `{,"a":1}`, `[,1]`, `{"a":1,,"b":2}`,
		"\ufeff{}", `{"a":+1}`, `[0x1]`, `{"a":[}`, `}`, `]`, `[1]]`, `{"a":1}}`, "{\"a\":1}\x00")
	// Nesting at and past maxDepth.
	for _, n := range []int{maxDepth, maxDepth + 1, maxDepth + 2} {
		add(strings.Repeat("[", n)+strings.Repeat("]", n), strings.Repeat("[", n)+"1"+strings.Repeat("]", n),
			`{"a":`+strings.Repeat(`{"b":`, n-1)+`1`+strings.Repeat("}", n))
	}
	// A redaction marker at every place around the cut, in a string long
	// enough that only its start is decoded.
	marker := "[redacted: looks like an API key]"
	long := strings.Repeat("z", 3000)
	for k := 0; k <= valueLen+4; k++ {
		pad := strings.Repeat("a", k)
		add(`{"c":"`+pad+marker+` and more","p":"x"}`, `{"c":"`+pad+marker+long+`"}`, `{"c":"`+pad+`[redacted: `+long+`"}`,
			`{"c":"`+pad+`[redacted: `+strings.Repeat("é", 199)+`]`+long+`"}`, `{"c":"`+pad+`[redacted: `+strings.Repeat("😀", 200)+`]`+long+`"}`,
			`{"c":"`+pad+`[redacted: `+strings.Repeat("😀", 201)+`]`+long+`"}`, `{"c":"`+pad+`[redacted: a\nb]`+long+`"}`,
			`{"c":"`+pad+`…[truncated for display: 4 of 9 characters shown]`+long+`"}`,
			`{"c":"`+pad+`…[truncated for display: `+strings.Repeat("7", 3000)+` of `+strings.Repeat("9", 3000)+` characters shown]`+long+`"}`,
			`{"c":"`+pad+`…[truncated for display: `+strings.Repeat("7", 3000)+`"}`)
	}
	// Characters of every width and escapes where the decoded start ends.
	for _, unit := range []string{"é", "日本", "😀", `\u00e9`, `\ud83d\ude00`, `\ud800`, `\ud800\ud800\udc00`, `\udc00`, `\n`, "\n", `\\`, "\x80", "\xe3\x81", "\xf0\x9f\x98", "a\u200b", `\u202e`} {
		for _, n := range []int{valueLen - 1, valueLen, valueLen + 1, 100, 300, 1000, 3000} {
			for _, lead := range []string{"", "a", "ab", "abc"} {
				s := lead + strings.Repeat(unit, n)
				add(`{"v":"`+s+`"}`, `{"`+s+`":1}`, `"`+s+`"`, `{"a":1,"v":"`+s+`","w":2}`)
			}
		}
	}
	// Long literals and keys, many members, hidden characters in keys.
	add(`{"n":`+strings.Repeat("9", 500)+`}`, `{"n":-`+strings.Repeat("1", 500)+`.5e+`+strings.Repeat("3", 300)+`}`, strings.Repeat("8", 400),
		`{"`+strings.Repeat("k", 300)+`":1}`, `{"a\u202eb":1,"c\td":"e\u2066f"}`)
	var many strings.Builder
	many.WriteString("{")
	for i := range 200 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"m%d":%d`, i, i)
	}
	add(many.String() + "}")
	for i := 1; i < 12; i++ { // a line that ends inside the i-th member
		add(`{` + strings.Repeat(`"kkkkkkkkkk":"vvvvvvvvvvvvvvv",`, i) + `"x":[1],"y":{"a":"b"}}`)
	}
	return cs
}

// realDisplays are display copies made by approval.Display with the
// default redaction from arguments with secrets (redacted by key and by
// pattern), long strings (cut with a truncation note), and the
// benchmarks' large shapes.
func realDisplays(t *testing.T) []string {
	t.Helper()
	raws := []string{
		`{"password":"hunter2hunter2","user":"bob"}`,
		`{"header":"Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789","url":"https://bob:s3cr3t@example.com/x"}`,
		`{"note":"` + strings.Repeat("a", 30) + ` Bearer abcdefghijklmnop0123 ` + strings.Repeat("b", 5000) + `"}`,
		`{"key":"sk-` + strings.Repeat("A", 40) + `","cfg":{"token":"x","apiKey":"y"},"list":["AKIAABCDEFGHIJKLMNOP"]}`,
		`{"text":"` + strings.Repeat("日本語", 2000) + `","n":1}`,
		`{"text":"` + strings.Repeat("x", 5000) + `","n":1}`,
		`{"a":"x\u200by\u202ez","b":"line\nline\tend"}`,
	}
	for _, shape := range benchShapes {
		raws = append(raws, string(largeArgs(shape, 64<<10)))
	}
	var out []string
	for _, raw := range raws {
		d, _, err := approval.Display(json.RawMessage(raw), approval.DefaultRedaction())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(d))
	}
	return out
}

// TestSummaryAsBase: summarizeWhole's line and its "shown whole" are the
// base's for every case, at the list's length and shorter ones.
func TestSummaryAsBase(t *testing.T) {
	cases := append(summaryCases(), realDisplays(t)...)
	for i, c := range cases {
		for _, maxLen := range []int{summaryLen, 40, 1, 2, 600} {
			want, wantWhole := summarizeWholeBase(json.RawMessage(c), maxLen)
			got, gotWhole := summarizeWhole(json.RawMessage(c), maxLen)
			if got != want || gotWhole != wantWhole {
				t.Errorf("case %d (%.80q…, %d bytes), max %d:\n got %v %q\nwant %v %q", i, c, len(c), maxLen, gotWhole, got, wantWhole, want)
			}
		}
	}
}

// TestSummaryShowsNoSecret: the line of a display copy never shows a
// value the display redacted.
func TestSummaryShowsNoSecret(t *testing.T) {
	secrets := []string{"hunter2", "abcdefghijklmnop", "s3cr3t", "sk-AAAA", "AKIAABCD"}
	for _, d := range realDisplays(t) {
		s, _ := summarizeWhole(json.RawMessage(d), summaryLen)
		for _, sec := range secrets {
			if strings.Contains(s, sec) {
				t.Errorf("the line %q shows %q", s, sec)
			}
		}
	}
}

// FuzzSummaryAsBase: summarizeWhole is the base's for any text.
func FuzzSummaryAsBase(f *testing.F) {
	for i, c := range summaryCases() { // a sample, so that the fuzzer gets going
		if len(c) < 2<<10 && i%7 == 0 {
			f.Add([]byte(c), uint8(summaryLen))
		}
	}
	f.Fuzz(func(t *testing.T, d []byte, m uint8) {
		maxLen := 1 + int(m)
		want, wantWhole := summarizeWholeBase(d, maxLen)
		got, gotWhole := summarizeWhole(d, maxLen)
		if got != want || gotWhole != wantWhole {
			t.Errorf("max %d: got %v %q, want %v %q", maxLen, gotWhole, got, wantWhole, want)
		}
	})
}

// TestSummaryMembersCannotBeForged (attack30): a string value or a key
// holding quotes, colons and commas cannot pass itself off as several
// members in the row (which the list may approve in bulk): before, the
// first line showed `command: "rm -rf ~ #", dry_run: true, note: "", cwd: "/"`.
func TestSummaryMembersCannotBeForged(t *testing.T) {
	for _, tt := range []struct{ display, want string }{
		{`{"command":"rm -rf ~ #\", dry_run: true, note: \"","cwd":"/"}`, `command: "rm -rf ~ #\", dry_run: true, note: \"", cwd: "/"`},
		{`{"cmd":"rm -rf ~","dry_run: true, z":""}`, `cmd: "rm -rf ~", "dry_run: true, z": ""`},
		{`{"a":"tab\\tnot a tab"}`, `a: "tab\\tnot a tab"`},
		{`{"a":"tab\tis"}`, `a: "tab\tis"`},
		{`{"path":"notes/a.txt","n":1}`, `path: "notes/a.txt", n: 1`},
	} {
		if got, _ := summarizeWhole(json.RawMessage(tt.display), summaryLen); got != tt.want {
			t.Errorf("summary of %s\n got %s\nwant %s", tt.display, got, tt.want)
		}
	}
}

// TestRowLookAlikeMarkers (fixes35): the row's summary keeps the "[" of
// agent text the display copy wrote \u005B apart from the copy's own
// markers, in values and keys, through the value's cut and the line's
// cut: rowSegments shows it as the escape titled as the agent's text and
// the copy's marker as a badge.
func TestRowLookAlikeMarkers(t *testing.T) {
	display := `{"\u005Bredacted key 1]":"[redacted key 2]","v":"a\u005Bredacted: x] [b]","tok":"[redacted: looks like a GitHub token]","pad":"` + strings.Repeat("p", 10) + `","z":"\u005Bredacted: late] ` + strings.Repeat("q", 60) + `"}`
	s, whole := summarizeWhole(json.RawMessage(display), summaryLen)
	if whole {
		t.Errorf("summary %q whole, want cut", s)
	}
	var got []string
	for _, sg := range rowSegments(s) {
		switch sg.Class {
		case "":
			if strings.Contains(sg.Text, lookAlikeMark) || strings.ContainsRune(sg.Text, utf8.RuneError) {
				t.Errorf("plain segment %q holds the mark or U+FFFD", sg.Text)
			}
		case "hidden":
			got = append(got, sg.Class+":"+sg.Text)
		default:
			got = append(got, sg.Class+":"+sg.Text)
		}
	}
	want := []string{`hidden:\u005B`, `redacted:[redacted key 2]`, `hidden:\u005B`, `redacted:[redacted: looks like a GitHub token]`, `hidden:\u005B`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("segments of %q:\n got %q\nwant %q", s, got, want)
	}
}
