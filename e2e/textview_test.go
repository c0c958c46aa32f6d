package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestLargeArgumentsTextViewInBrowser (fixes32): in headless Chromium, the
// detail page of a held call whose arguments are past the tree's 5,000
// values shows them as text with the display copy's escape of U+202E
// marked as a hidden character (titled), as the tree marks it, and no
// redaction badge made of a "[redacted: " in one value and a "]" in a
// later one (since fixes33 that "[" is the display copy's \u005B, marked
// as the agent's own text) (on 31ac484 the escape was plain text and one badge spanned
// the members between).
func TestLargeArgumentsTextViewInBrowser(t *testing.T) {
	g, _, _ := inboxGateway(t)
	b := newBrowser(t)
	cs := g.connect(t, nil, nil)
	b.signIn(g.Admin, approverToken)

	var sb strings.Builder
	sb.WriteString(`{"note":"a\u202Eb","forged":"[redacted: x","between":"y","after":"z]","rows":[`)
	for i := range 2000 { // 4 values each
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%d,"name":"r%d"}`, i, i)
	}
	sb.WriteString(`]}`)
	args := sb.String()
	ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
	// The display copy writes the "[" of agent text that reads like a
	// marker as \u005B (fixes33): the approval is found by that copy.
	a := awaitPendingArgs(t, g.Admin, strings.Replace(args, `"[redacted: x"`, `"\u005Bredacted: x"`, 1))
	b.open(g.Admin, "/ui/approvals/"+a.ID)
	b.wait(waitFor(t), "the text view", css(`article[data-approval-id="%s"] pre.rawargs`, a.ID))
	hidden := eval[[]string](b, `Array.from(document.querySelectorAll("pre.rawargs span.hidden")).map(e => e.textContent + " " + e.title)`)
	if len(hidden) != 2 || !strings.HasPrefix(hidden[0], `\u202E hidden character U+202E`) ||
		!strings.HasPrefix(hidden[1], `\u005B the agent's own text, written like a redaction marker`) {
		t.Errorf("escapes marked in the text view: %q; want the \\u202E and the forged marker's \\u005B, titled", hidden)
	}
	if badges := eval[[]string](b, `Array.from(document.querySelectorAll("pre.rawargs .redacted")).map(e => e.textContent)`); len(badges) != 0 {
		t.Errorf("redaction badges in the text view: %q; want none (no value was redacted)", badges)
	}
	if n := eval[int](b, `document.querySelectorAll("article .member").length`); n != 0 {
		t.Errorf("%d tree members; want the text view", n)
	}
	// Deny it, so the held call ends with the test.
	if status, body, err := adminDo(t.Context(), "POST", g.Admin+"/v1/approvals/"+a.ID+"/deny", approverToken, map[string]string{"reason": "test over"}); err != nil || status != 200 {
		t.Fatalf("deny: %d %s %v", status, body, err)
	}
	mustIsError(t, await(t, ch))
}
