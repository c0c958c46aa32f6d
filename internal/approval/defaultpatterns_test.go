package approval

import (
	"regexp"
	"slices"
	"testing"
)

// TestDefaultRedactionCompilesOnce: DefaultRedaction hands out the same
// compiled patterns each call (a stdio upstream process start built two
// redactors, each compiling all of them: ≈ 0.9 ms of CPU a compile), and a
// caller that changes or appends to its patterns (config appends the
// configured ones) has a slice of its own, so the next caller still sees
// the defaults alone.
func TestDefaultRedactionCompilesOnce(t *testing.T) {
	a, b := DefaultRedaction(), DefaultRedaction()
	if len(a.Patterns) == 0 || len(a.Patterns) != len(b.Patterns) {
		t.Fatalf("patterns: %d and %d", len(a.Patterns), len(b.Patterns))
	}
	for i := range a.Patterns {
		if a.Patterns[i] != b.Patterns[i] {
			t.Fatalf("pattern %d (%s) compiled again on the second call", i, a.Patterns[i])
		}
	}
	n := len(a.Patterns)
	a.Patterns[0] = regexp.MustCompile(`replaced`)
	a.Patterns = append(a.Patterns, regexp.MustCompile(`configured`))
	c := DefaultRedaction()
	if len(c.Patterns) != n || !slices.Equal(c.Patterns[1:], b.Patterns[1:]) || c.Patterns[0] != b.Patterns[0] {
		t.Fatalf("a caller's change to its copy reached the defaults: %v", c.Patterns)
	}
}

// BenchmarkDefaultRedaction is what a stdio upstream process start paid
// twice (its stderr log's and its failure tail's redactor) and every gate,
// trail and configuration load once: the patterns compiled on every call
// before branch approve44, once per process since.
func BenchmarkDefaultRedaction(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = DefaultRedaction()
	}
}
