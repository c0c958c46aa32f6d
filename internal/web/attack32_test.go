package web_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestKeyMarkerHighlighted (attack32): the marker that hides a secret in
// an object key ("[redacted key N]", only the match since attack31) is
// marked on the detail page as a value's redaction marker is, in the tree
// and in the text view of large arguments; it was shown as plain key text,
// so "GITHUB=[redacted key 1]" read as a key of that literal name.
func TestKeyMarkerHighlighted(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	b.signIn(bobTok)
	const tok = "ghp_0123456789abcdefghijABCDEFGHIJ01234567"
	small := e.request(1, `{"env":{"GITHUB=`+tok+`":"x"}}`)
	var sb strings.Builder
	sb.WriteString(`{"env":{"GITHUB=` + tok + `":"x"},"rows":[`)
	for i := range 2000 { // 4 values each: past the tree's 5,000
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%d,"name":"r%d"}`, i, i)
	}
	sb.WriteString(`]}`)
	large := e.request(2, sb.String())
	for _, id := range []string{string(small.ID), string(large.ID)} {
		page := b.page("/ui/approvals/" + id)
		if strings.Contains(page, tok) {
			t.Fatalf("%s: the token is shown", id)
		}
		if want := `GITHUB=<span class="redacted">[redacted key 1]</span>`; !strings.Contains(page, want) {
			i := strings.Index(page, "GITHUB=")
			t.Errorf("%s: no %q in the page; it has %q", id, want, page[i:min(len(page), i+80)])
		}
	}
}
