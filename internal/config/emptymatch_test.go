package config

import (
	"regexp"
	"testing"

	"toolgate/internal/approval"
)

// TestEmptyMatch (fixes32): emptyMatch refuses exactly the patterns that
// find an empty match in some text, checked against regexp itself on texts
// with word boundaries, line ends and none. On 31ac484 only a pattern
// matching "" was refused; `\b` and the like were taken and marked the
// copy with markers hiding nothing.
func TestEmptyMatch(t *testing.T) {
	texts := []string{"", "a", "ab cd", "sk-abc def", "x", "xx y", " ", "\n", "a\nb", "-", "é"}
	for _, tt := range []struct {
		p    string
		want bool
	}{
		{`\b`, true},
		{`\B`, true},
		{`x*\b`, true},
		{`(?:sk-[a-z]+|\b)`, true},
		{`\bx?`, true},
		{`(\b){2,3}`, true},
		{`(?m)^`, true},
		{`(?:)`, true},
		{`[0-9]*`, true},
		{`x{0}`, true},
		{`\bsk-[a-z]+\b`, false},
		{`x+`, false},
		{`(?:x|y)+\b`, false},
		{`\bx{1,}`, false},
		{`(?m)^x$`, false},
		{`.`, false},
		{`(?s).`, false},
		{`[^a]`, false},
		{`ghp_[A-Za-z0-9]{36}`, false},
	} {
		if got := emptyMatch(tt.p); got != tt.want {
			t.Errorf("emptyMatch(%q) = %v, want %v", tt.p, got, tt.want)
		}
		re := regexp.MustCompile(tt.p)
		empty := false
		for _, s := range texts {
			for _, loc := range re.FindAllStringIndex(s, -1) {
				empty = empty || loc[0] == loc[1]
			}
		}
		if empty != tt.want {
			t.Errorf("%q: an empty match in the sample texts is %v, want %v (the table is wrong)", tt.p, empty, tt.want)
		}
	}
	if emptyMatch(`((`) {
		t.Error(`emptyMatch("((") = true, want false for a pattern that does not parse`)
	}
	// The default patterns never match empty.
	for _, re := range approval.DefaultRedaction().Patterns {
		if emptyMatch(re.String()) {
			t.Errorf("default pattern %q can match empty", re)
		}
	}
}
