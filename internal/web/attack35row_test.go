package web

import (
	"encoding/json"
	"strings"
	"testing"

	"toolgate/internal/approval"
)

// TestAttack35RowAgentTextNeverABadge (attack35): agent arguments that try
// to pass as the copy's markers in the inbox row, through the display
// copy (approval.Display, no redaction): look-alikes in keys and values,
// next to an array's count, after the agent's own escapes, cut by the
// value's and the line's cuts. No segment of theirs is a badge.
func TestAttack35RowAgentTextNeverABadge(t *testing.T) {
	pad := strings.Repeat("x", 50)
	for _, args := range []string{
		`{"a":[1,2,3],"b":"redacted: x]"}`,
		`{"[redacted key 1]":"[redacted: y]"}`,
		`{"k":"\\u005Bredacted: z]","l":"\\\\u005Bredacted: z]"}`,
		`{"v":"\u005bredacted: lower]"}`,
		`{"v":"` + pad + `[redacted: cut here by the value]"}`,
		`{"p":"` + pad + `","q":"` + pad + `","r":"` + pad + `","s":"[redacted: at the line's end]"}`,
		`{"v":"…[truncated for display: 1 of 2 characters shown]"}`,
		`{"v":"[[redacted: nested]]","w":"[redacted key 12]"}`,
	} {
		display, _, err := approval.Display(json.RawMessage(args), approval.Redaction{})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := summarizeWhole(display, summaryLen)
		for _, sg := range rowSegments(s) {
			if sg.Class == "redacted" || sg.Class == "cut" {
				t.Errorf("args %s: row %q shows %q as a marker", args, s, sg.Text)
			}
		}
	}
	// The control: the copy's own marker, as the copy writes it, is one.
	s, _ := summarizeWhole(json.RawMessage(`{"v":"[redacted: y]"}`), summaryLen)
	if sg := rowSegments(s); len(sg) < 2 || sg[1].Class != "redacted" {
		t.Errorf("the copy's own marker in %q: segments %+v, want a badge", s, sg)
	}
}
