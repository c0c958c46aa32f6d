package policy

import (
	"errors"
	"path"
	"testing"
)

// TestMatchAgreesWithPathMatch checks that, on names without '/', Match is
// path.Match: same results and same pattern errors.
func TestMatchAgreesWithPathMatch(t *testing.T) {
	cases := []struct{ pattern, name string }{
		{"", ""},
		{"", "a"},
		{"abc", "abc"},
		{"abc", "abd"},
		{"*", ""},
		{"*", "anything"},
		{"a*", "a"},
		{"a*", "abc"},
		{"a*", "ba"},
		{"*c", "abc"},
		{"a*b*c", "axxbyyc"},
		{"a*b*c", "axxbyyd"},
		{"a*b", "abab"},
		{"*delete*", "delete_file"},
		{"*delete*", "bulk_delete"},
		{"*delete*", "remove"},
		{"read_*", "read_file"},
		{"read_*", "file_read"},
		{"?", "a"},
		{"?", "é"},
		{"?", ""},
		{"??", "é"},
		{"a?c", "abc"},
		{"[abc]", "b"},
		{"[abc]", "d"},
		{"[^abc]", "d"},
		{"[^abc]", "a"},
		{"[a-c]x", "bx"},
		{"[a-c]x", "dx"},
		{"[\\-]", "-"},
		{"[\\]]", "]"},
		{"[x\\-]", "-"},
		{"\\*", "*"},
		{"\\*", "a"},
		{"a]", "a]"},
		{"a-b", "a-b"},
		{"*x", "xxxxxxxxxxxxxxxxxxxy"},
		{"*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		// Bad patterns.
		{"[", "a"},
		{"[]", "a"},
		{"[^]", "a"},
		{"[a-", "a"},
		{"[z-a]", "a"},
		{"[-]", "-"},
		{"[a", "x"},
		{"\\", "a"},
		{"x[", "y"},   // bad even though the name fails on the first char
		{"*[", "abc"}, // bad even after a star
	}
	for _, c := range cases {
		want, wantErr := path.Match(c.pattern, c.name)
		got, err := Match(c.pattern, c.name)
		if got != want || (err != nil) != (wantErr != nil) {
			t.Errorf("Match(%q, %q) = %v, %v; path.Match = %v, %v", c.pattern, c.name, got, err, want, wantErr)
		}
		if err != nil && !errors.Is(err, ErrBadPattern) {
			t.Errorf("Match(%q, %q) error %v does not wrap ErrBadPattern", c.pattern, c.name, err)
		}
	}
}

func TestMatchSlashIsOrdinary(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "a/b", true},
		{"a?b", "a/b", true},
		{"a*", "a/b/c", true},
		{"*/c", "a/b/c", true},
		{"[/]", "/", true},
		{"a/b", "a/b", true},
		{"a/b", "a_b", false},
	}
	for _, c := range cases {
		got, err := Match(c.pattern, c.name)
		if err != nil || got != c.want {
			t.Errorf("Match(%q, %q) = %v, %v; want %v", c.pattern, c.name, got, err, c.want)
		}
	}
}

func TestIsGlob(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{{"fs", false}, {"foo-bar", false}, {"f*", true}, {"f?", true}, {"[f]s", true}, {`f\s`, true}} {
		if got := IsGlob(c.in); got != c.want {
			t.Errorf("IsGlob(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	for b.Loop() {
		if _, err := Match("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"); err != nil {
			b.Fatal(err)
		}
	}
}
