package web_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestFakeMarkerNotShownAsMarker (fixes33): text the agent sends written
// like a marker ("[redacted: x]" in a value, "[redacted key 1]" in a key,
// "…[truncated for display: …]") is not shown as a marker on the detail
// page, in the tree and in the large-argument text view: its "[" is shown
// as the escape \u005B the display copy writes (approval.Display), marked
// as the agent's text, while the copy's own marker (a hidden token) is
// still a badge. On 78ec92b the fake markers were badges like the real
// one.
func TestFakeMarkerNotShownAsMarker(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser()
	b.signIn(bobTok)
	const tok = "ghp_0123456789abcdefghijABCDEFGHIJ01234567"
	head := `{"fake":"[redacted: x]","[redacted key 1]":1,"cut":"a…[truncated for display: 1 of 2 characters shown]","tok":"` + tok + `","rows":[`
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
	badge := regexp.MustCompile(`<span class="(?:redacted|cut)">([^<]*)</span>`)
	fake := regexp.MustCompile(`<span class="hidden" title="[^"]*toolgate hid nothing here">\\u005B</span>`)
	for _, id := range []string{string(small.ID), string(large.ID)} {
		page := b.page("/ui/approvals/" + id)
		text := strings.Contains(page, "data-raw-args")
		if text != (id == string(large.ID)) {
			t.Fatalf("%s: text view %v", id, text)
		}
		var badges []string
		for _, m := range badge.FindAllStringSubmatch(page, -1) {
			badges = append(badges, m[1])
		}
		// The page's legend shows one marker; the arguments one: the token's.
		want := []string{"[redacted: …]", "[redacted: looks like a GitHub token]"}
		if strings.Join(badges, "|") != strings.Join(want, "|") {
			t.Errorf("%s (text view %v): badges %q, want %q", id, text, badges, want)
		}
		if n := len(fake.FindAllString(page, -1)); n != 3 {
			t.Errorf("%s (text view %v): %d \"[\" marked as the agent's marker-like text, want 3", id, text, n)
		}
		if !strings.Contains(page, "text written like a redaction marker") {
			t.Errorf("%s: no warning about the marker-like text", id)
		}
	}
}
