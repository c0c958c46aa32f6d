package web_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestTextViewHighlightsAsTheTree (fixes32): the text view of large
// arguments marks what the tree marks: the display copy's escape of a
// hidden character (\u202E) and a look-alike space as a hidden character
// with its title, and a redaction marker only within one string, as the
// tree finds it in a value or key: a forged "[redacted: " in one value and
// a "]" in a later one made one badge of the members between them. A
// backslash the agent sent before "u202E" is text, not an escape. On
// 31ac484 the escapes were plain text and the badge spanned the members.
func TestTextViewHighlightsAsTheTree(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	b.signIn(bobTok)
	const tok = "ghp_0123456789abcdefghijABCDEFGHIJ01234567"
	head := `{"note":"a\u202eb","sp":"c\u00a0d","lit":"\\u202E","forged":"[redacted: x","between":"y","after":"z]","` + tok + `":1,"rows":[`
	var sb strings.Builder
	sb.WriteString(head)
	for i := range 2000 { // 4 values each: past the tree's 5,000
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%d,"name":"r%d"}`, i, i)
	}
	sb.WriteString(`]}`)
	large := e.request(1, sb.String())
	small := e.request(2, head+`]}`)
	for _, id := range []string{string(small.ID), string(large.ID)} {
		page := b.page("/ui/approvals/" + id)
		text := strings.Contains(page, "data-raw-args")
		if text != (id == string(large.ID)) {
			t.Fatalf("%s: text view %v", id, text)
		}
		for _, want := range []string{
			`<span class="hidden" title="hidden character U&#43;202E: it was escaped so it cannot hide or reorder text">\u202E</span>`,
			`<span class="hidden" title="look-alike space U&#43;00A0: it was escaped so it cannot pass for a plain space">\u00A0</span>`,
			`<span class="redacted">[redacted key 1]</span>`,
		} {
			if !strings.Contains(page, want) {
				t.Errorf("%s (text view %v): no %q", id, text, want)
			}
		}
		if want := `&#34;lit&#34;:&#34;\\u202E&#34;`; text && !strings.Contains(page, want) {
			t.Errorf("%s: no %q: the agent's backslash-u text is marked as an escape", id, want)
		}
		for _, m := range regexp.MustCompile(`<span class="redacted">([^<]*)</span>`).FindAllStringSubmatch(page, -1) {
			if strings.Contains(m[1], "between") || strings.Contains(m[1], "[redacted: x") {
				t.Errorf("%s (text view %v): a redaction badge spans members: %q", id, text, m[1])
			}
		}
	}
}
