package approval

import (
	"strings"
	"testing"
)

// TestOverlappingPatternsHideTheirUnion (attack32): text that two
// Redaction patterns match in overlapping parts is hidden as a whole. The
// patterns were applied one after another, each to the text the ones before
// had already rewritten: a marker put in by an earlier pattern (its spaces,
// its colon) kept a later one from matching, and what only the later one
// covered was shown. A URL whose user is an AWS access key id (SES's SMTP
// credentials) showed its password, in a string value and, since attack31
// shows the rest of a hidden key, in a key.
func TestOverlappingPatternsHideTheirUnion(t *testing.T) {
	rd := DefaultRedaction()
	const url = "smtp://AKIAIOSFODNN7EXAMPLE:hunter2hunter2@email-smtp.example.com:587"
	raw := []byte(`{"url":"` + url + `","servers":{"` + url + `":1}}`)
	disp, warnings, err := Display(raw, rd)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(disp), "hunter2") || strings.Contains(string(disp), "AKIA") {
		t.Errorf("copy shows a secret: %s", disp)
	}
	want := `{"url":"smtp:[redacted: looks like credentials in a URL]email-smtp.example.com:587","servers":{"smtp:[redacted key 1]email-smtp.example.com:587":1}}`
	if string(disp) != want {
		t.Errorf("copy %s\nwant %s\n(warnings %q)", disp, want, warnings)
	}
	for _, w := range []string{
		`$.url: text hidden (looks like an AWS access key id); the hash covers the real value`,
		`$.url: text hidden (looks like credentials in a URL); the hash covers the real value`,
	} {
		if !contains(warnings, w) {
			t.Errorf("warnings %q lack %q", warnings, w)
		}
	}
	sh, err := HashDisplayCanonical(raw, rd)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sh.Canonical), "hunter2") {
		t.Errorf("canonical copy shows a secret: %s", sh.Canonical)
	}
	checkKeysNaive(t, raw, rd, "hunter2")

	// A GitHub token inside a longer match of another pattern: the
	// Bearer's whole match is hidden, whichever pattern comes first.
	raw = []byte(`{"h":"//u:` + ghToken + `-and-more@host"}`)
	disp, _, err = Display(raw, rd)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(disp), "and-more") {
		t.Errorf("copy shows the rest of a URL's password: %s", disp)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
