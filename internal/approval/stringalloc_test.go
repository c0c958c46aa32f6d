package approval

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// allocatedBy is the bytes f allocates, from the runtime's count.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLargeStringAllocations bounds what the hash, the canonical form,
// the display copy and all three at once allocate for a 1 MB string
// argument with escapes (a file body): about twice its size at most (one
// copy of the document, the decoded string for the display's checks, the
// output; 2.25× with the runtime's own). The base
// decoded the string by appending to a growing builder, copied it into
// the tree, held the whole canonical form to hash it and sized the
// display's buffer by the argument although the copy is cut: 5.3 to 7.3
// times the size.
func TestLargeStringAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("1 MB argument")
	}
	rd := DefaultRedaction()
	for name, body := range map[string]string{
		"code": strings.Repeat(`\tif err != nil {\n\t\treturn fmt.Errorf(\"open %s: %w\", name, err)\n\t}\n`, 1<<20/64),
		"utf8": strings.Repeat(`héllo wörld, 日本語のテキスト \"q\" `, 1<<20/48),
	} {
		raw := json.RawMessage(`{"path":"/tmp/x","content":"` + body + `"}`)
		size := float64(len(raw))
		for op, f := range map[string]func() error{
			"Hash":                 func() error { _, err := Hash(raw); return err },
			"Canonicalize":         func() error { _, err := Canonicalize(raw); return err },
			"Display":              func() error { _, _, err := Display(raw, rd); return err },
			"HashDisplayCanonical": func() error { _, err := HashDisplayCanonical(raw, rd); return err },
		} {
			var err error
			per := float64(allocatedBy(func() { err = f() })) / size
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s of the %s argument: %.2f× its size", op, name, per)
			if per > 2.25 { // the document's copy, the decoded string, 32 KB for SHA-256
				t.Errorf("%s of a 1 MB %s string argument allocated %.2f× its size, want at most 2.25×", op, name, per)
			}
		}
	}
}
