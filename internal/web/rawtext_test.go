package web

import (
	"fmt"
	"strings"
	"testing"
)

// TestTextSegments (fixes32): the text view's split of a JSON text, down
// to the escapes: a surrogate pair is one character, a lone surrogate is
// marked, a plain escape and an escaped backslash are text, a marker is
// found only within one string, and the segments put back together are
// the text (but for raw hidden characters and bytes, shown escaped).
func TestTextSegments(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":"x\u202Ey"}`, `{"a":"x<hidden U+202E>\u202E</>y"}`},
		{`["\uD83D\uDE00","\uDB40\uDC01"]`, `["\uD83D\uDE00","<hidden U+E0001>\uDB40\uDC01</>"]`},
		{`["\uD800x"]`, `["<hidden U+FFFD>\uD800</>x"]`},
		{`["\u00e9\n\"\\u202E"]`, `["\u00e9\n\"\\u202E"]`},
		{"[\"a\u00a0b\xffc\"]", `["a<hidden U+00A0>\u00A0</>b<hidden U+FFFD>\xFF</>c"]`},
		{`{"[redacted key 1]":"[redacted: a","b":"c]"}`, `{"<redacted>[redacted key 1]</>":"[redacted: a","b":"c]"}`},
		{`{"k":"[redacted: key \"password\"]"}`, `{"k":"<redacted>[redacted: key \"password\"]</>"}`},
		{`"\u202e`, `"<hidden U+202E>\u202e</>`},
		{`x"\`, `x"\`},
		{``, ``},
	} {
		var b strings.Builder
		for _, s := range textSegments(tt.in) {
			switch s.Class {
			case "":
				b.WriteString(s.Text)
			case "hidden":
				_, after, _ := strings.Cut(s.Title, " U+")
				code, _, _ := strings.Cut(after, ":")
				fmt.Fprintf(&b, "<hidden U+%s>%s</>", code, s.Text)
			default:
				fmt.Fprintf(&b, "<%s>%s</>", s.Class, s.Text)
			}
		}
		if b.String() != tt.want {
			t.Errorf("textSegments(%q) = %q, want %q", tt.in, b.String(), tt.want)
		}
	}
}
