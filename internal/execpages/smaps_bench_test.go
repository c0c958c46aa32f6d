package execpages

import (
	"os"
	"testing"
)

// BenchmarkReadSmaps is what Release allocates to find the executable's
// mappings (its smaps read and parse), without the madvise: garbage that
// each release leaves on the heap of a quiet process.
func BenchmarkReadSmaps(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readSmaps("/proc/self/smaps"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadSmapsSize: the test binary's own smaps parse into mappings.
func TestReadSmapsSize(t *testing.T) {
	ms, err := readSmaps("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 5 {
		t.Fatalf("%d mappings in %d bytes of smaps", len(ms), len(raw))
	}
}
