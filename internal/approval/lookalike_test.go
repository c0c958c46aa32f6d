package approval

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDisplayLookAlikeMarkers (fixes33): the agent's own text written like
// a marker ("[redacted: x]", "[redacted key 3]", "…[truncated for
// display: …]") is written with its "[" as \u005B in the display copy,
// the copy's own markers as they are, so that the copy's text tells them
// apart (the detail page marks only the latter); decoding the copy gives
// the same text as before, the canonical form is the same, and a warning
// says so. On 78ec92b the copy wrote both alike.
func TestDisplayLookAlikeMarkers(t *testing.T) {
	rd := DefaultRedaction()
	rd.MaxString = 100
	raw := []byte(`{"a":"[redacted: x]","b":"pre [redacted key 3] and [truncated for display: 1 of 2 characters shown] [redactedness]","c":"` + ghToken + ` [redacted: y]","[redacted: k]":1,"d":"[x] [red","e":"` + strings.Repeat("z", 80) + ghToken + `"}`)
	disp, warnings, err := Display(raw, rd)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"\u005Bredacted: x]","b":"pre \u005Bredacted key 3] and \u005Btruncated for display: 1 of 2 characters shown] \u005Bredactedness]","c":"[redacted: looks like a GitHub token] \u005Bredacted: y]","\u005Bredacted: k]":1,"d":"[x] [red","e":"` + strings.Repeat("z", 80) + `[redacted: looks lik…[truncated for display: 100 of 117 characters shown]"}`
	if string(disp) != want {
		t.Errorf("copy\n%s\nwant\n%s", disp, want)
	}
	var got, plain map[string]any
	if err := json.Unmarshal(disp, &got); err != nil {
		t.Fatal(err)
	}
	if got["a"] != "[redacted: x]" || got["b"] != "pre [redacted key 3] and [truncated for display: 1 of 2 characters shown] [redactedness]" {
		t.Errorf("decoded copy %v: the agent's text changed", got)
	}
	n := 0
	for _, w := range warnings {
		if strings.Contains(w, "text written like a redaction marker") {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d look-alike warnings, want 4 ($.a, $.b, $.c, the key): %q", n, warnings)
	}
	// A marker the cut goes into is still the copy's: no \u005B in $.e.

	// The canonical form is that of the decoded copy, as before.
	shown, err := HashDisplayCanonical(raw, rd)
	if err != nil {
		t.Fatal(err)
	}
	if string(shown.Display) != string(disp) {
		t.Errorf("HashDisplayCanonical's copy %s, Display's %s", shown.Display, disp)
	}
	canon, err := Canonicalize(disp)
	if err != nil {
		t.Fatal(err)
	}
	if string(shown.Canonical) != string(canon) || strings.Contains(string(canon), `\u005B`) {
		t.Errorf("canonical %s, want %s without escapes of [", shown.Canonical, canon)
	}
	if err := json.Unmarshal(canon, &plain); err != nil || plain["a"] != "[redacted: x]" {
		t.Errorf("canonical form %s: %v", canon, err)
	}
}
