package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// smallObjects is a JSON argument of about size bytes holding an array of
// small objects (the shape of a bulk tool argument), and their count.
func smallObjects(size int) (json.RawMessage, int) {
	var sb strings.Builder
	sb.WriteString(`{"items":[`)
	n := 0
	for ; sb.Len() < size; n++ {
		if n > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%d,"name":"item %d","tags":["a","b"],"v":1.5}`, n, n)
	}
	sb.WriteString(`]}`)
	return json.RawMessage(sb.String()), n
}

// TestHashDisplayCanonicalLargeArgumentAllocations bounds what hashing and
// displaying a 1 MB argument of small objects allocates: the gate does it
// for every call before policy, and max_request_bytes allows 8 MiB. Growing
// each array's and object's slice by append and a set of keys per object
// cost 13.8 allocations per object and 41× the argument's size in bytes.
func TestHashDisplayCanonicalLargeArgumentAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("1 MB argument")
	}
	raw, objects := smallObjects(1 << 20)
	allocs := testing.AllocsPerRun(2, func() {
		if _, err := HashDisplayCanonical(raw, Redaction{}); err != nil {
			t.Fatal(err)
		}
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := HashDisplayCanonical(raw, Redaction{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	bytesPer := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(raw))
	t.Logf("%d objects: %.1f allocations per object, %.1f× the argument's size in bytes", objects, allocs/float64(objects), bytesPer)
	if per := allocs / float64(objects); per > 9 {
		t.Errorf("HashDisplayCanonical allocated %.1f times per small object of a 1 MB argument, want at most 9", per)
	}
	if bytesPer > 25 {
		t.Errorf("HashDisplayCanonical allocated %.1f× a 1 MB argument's size, want at most 25×", bytesPer)
	}
}

// TestDuplicateKeyAtEveryPosition: a duplicate key is refused wherever it
// sits, before and past the count up to which keys are compared one by one
// (scanKeys), and a large object without one is accepted with its members
// sorted.
func TestDuplicateKeyAtEveryPosition(t *testing.T) {
	const members = 3*scanKeys + 5
	for dupAt := 1; dupAt < members; dupAt++ {
		for _, of := range []int{0, dupAt / 2, dupAt - 1} {
			var sb strings.Builder
			sb.WriteByte('{')
			at := 0
			for i := range members {
				if i > 0 {
					sb.WriteByte(',')
				}
				key := "k" + strconv.Itoa(members-i) // not in sorted order
				if i == dupAt {
					key, at = "k"+strconv.Itoa(members-of), sb.Len()
				}
				fmt.Fprintf(&sb, `%q:%d`, key, i)
			}
			sb.WriteByte('}')
			_, err := Canonicalize([]byte(sb.String()))
			if !errors.Is(err, ErrDuplicateKey) {
				t.Fatalf("member %d repeating member %d's key: err = %v, want ErrDuplicateKey", dupAt, of, err)
			}
			if want := "offset " + strconv.Itoa(at) + ":"; !strings.Contains(err.Error(), want) {
				t.Fatalf("member %d repeating member %d's key: %v, want %q", dupAt, of, err, want)
			}
		}
	}
	var sb strings.Builder
	sb.WriteByte('{')
	for i := range members {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"k%03d":%d`, members-i, i)
	}
	sb.WriteByte('}')
	out, err := Canonicalize([]byte(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), `{"k001":`+strconv.Itoa(members-1)+`,"k002":`) {
		t.Fatalf("Canonicalize of %d members in reverse order = %.40s…, want them sorted", members, out)
	}
}

// BenchmarkHashDisplayCanonicalObjects hashes and displays a 4 MB argument
// of small objects (smallObjects).
func BenchmarkHashDisplayCanonicalObjects(b *testing.B) {
	raw, _ := smallObjects(4 << 20)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := HashDisplayCanonical(raw, Redaction{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTreeOfSmallObjectsAllocations bounds the tree of a 1 MB argument of
// small objects: a few allocations in all (the nodes in one slice, the
// strings spans of one copy of the document) and at most 8× its size for
// HashDisplayCanonical (the copy, 12 bytes per value, the display copy
// and its canonical form). The base's nodes of 72 bytes, a slice per
// array and object and a string per key, number and string value cost
// 8 allocations per object (147,725 for 18,462) and 19× the size.
func TestTreeOfSmallObjectsAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("1 MB argument")
	}
	if raceEnabled {
		t.Skip("-race: regexp allocates its matchers (sync.Pool drops them)")
	}
	raw, objects := smallObjects(1 << 20)
	rd := DefaultRedaction()
	allocs := testing.AllocsPerRun(2, func() {
		if _, err := HashDisplayCanonical(raw, rd); err != nil {
			t.Fatal(err)
		}
	})
	per := float64(allocatedBy(func() { _, _ = HashDisplayCanonical(raw, rd) })) / float64(len(raw))
	t.Logf("%d objects: %.0f allocations, %.2f× the argument's size in bytes", objects, allocs, per)
	if allocs > 100 {
		t.Errorf("HashDisplayCanonical of %d small objects allocated %.0f times, want at most 100", objects, allocs)
	}
	if per > 8 {
		t.Errorf("HashDisplayCanonical of a 1 MB argument of small objects allocated %.2f× its size, want at most 8×", per)
	}
}
