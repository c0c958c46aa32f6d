package audit

import (
	"bytes"
	"reflect"
	"testing"

	"toolgate/internal/policy"
)

// canonStrings are string values for TestCanonicalPlainIsCanonicalize:
// characters json.Marshal escapes (HTML, U+2028) and Canonicalize writes
// literally, control characters, quotes, non-ASCII, invalid UTF-8.
var canonStrings = []string{"", "a", `<&>`, "\u2028\u2029", "\x00\x01\b\t\n\f\r\x1f", `"\/`, "é😀", "\xff", "tool_call"}

// fillRecord sets every string field of r to s and every int64 field to
// n (Arguments, DisplayWarnings and Monitor are left as they are).
func fillRecord(r *Record, s string, n int64) {
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(s)
		case reflect.Int64:
			f.SetInt(n)
		}
	}
}

// checkCanonicalPlain fails t when canonicalPlain answers r other than
// canonicalDecoded (json.Marshal, then approval.Canonicalize).
func checkCanonicalPlain(t *testing.T, r Record) {
	t.Helper()
	want, err := r.canonicalDecoded()
	if err != nil {
		t.Fatalf("%+v: %v", r, err)
	}
	got, ok := r.canonicalPlain()
	if !ok {
		if r.Arguments == nil && r.DisplayWarnings == nil && r.Monitor == nil && !bytes.Contains(want, []byte("\ufffd")) {
			t.Errorf("%+v: canonicalPlain declined a plain record", r)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("canonicalPlain:\n got %s\nwant %s", got, want)
	}
	if c, err := r.Canonical(); err != nil || !bytes.Equal(c, want) {
		t.Errorf("Canonical: %s (%v), want %s", c, err, want)
	}
}

// TestCanonicalPlainIsCanonicalize: a record without arguments, warnings
// or a monitor verdict is written directly (canonicalPlain) with the
// bytes the chain hashed before (Canonicalize of its encoding), for every
// field set or empty, each string value of canonStrings and integers
// 0, 1, -7 and past 2^53; a field added to Record fails it (the direct
// writer would drop it).
func TestCanonicalPlainIsCanonicalize(t *testing.T) {
	for _, s := range canonStrings {
		for _, n := range []int64{0, 1, -7, 1<<62 + 1} {
			var r Record
			fillRecord(&r, s, n)
			checkCanonicalPlain(t, r)
			// One field at a time, the rest empty.
			v := reflect.ValueOf(&r).Elem()
			for i := range v.NumField() {
				var one Record
				ov := reflect.ValueOf(&one).Elem()
				if f := v.Field(i); f.Kind() == reflect.String || f.Kind() == reflect.Int64 {
					ov.Field(i).Set(f)
					checkCanonicalPlain(t, one)
				}
			}
		}
	}
	var r Record
	fillRecord(&r, "x", 3)
	r.Arguments = []byte(`{"a":1}`)
	checkCanonicalPlain(t, r)
	r.Arguments, r.Monitor = nil, &policy.Monitor{}
	checkCanonicalPlain(t, r)
}

// TestCanonicalAllowedCallIsWrittenDirectly: an allowed call's record
// takes the direct path, with fewer allocations than encoding it and
// canonicalizing the encoding (about 40 before).
func TestCanonicalAllowedCallIsWrittenDirectly(t *testing.T) {
	r := Record{Seq: 12345, At: "2026-12-02T16:00:00.123Z", Type: TypeAllowed, PolicyRevision: 3, Principal: "agent", Kind: "tool_call", Server: "echo", Tool: "echo", Rule: "echo allowed", Policy: "sha256:0123456789abcdef", ArgumentsHash: "sha256:fedcba9876543210"}
	if _, ok := r.canonicalPlain(); !ok {
		t.Fatal("canonicalPlain declined an allowed call's record")
	}
	checkCanonicalPlain(t, r)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := r.Canonical(); err != nil {
			t.Fatal(err)
		}
	}); n > 2 {
		t.Errorf("Canonical allocated %v times, want at most 2", n)
	}
}

// FuzzCanonicalPlain is TestCanonicalPlainIsCanonicalize on generated
// strings and integers (go test -run '^$' -fuzz FuzzCanonicalPlain ./internal/audit/).
func FuzzCanonicalPlain(f *testing.F) {
	for _, s := range canonStrings {
		f.Add(s, "b", int64(1))
	}
	f.Fuzz(func(t *testing.T, a, b string, n int64) {
		r := Record{Seq: n, At: a, Type: b, Actor: b, Reason: a, Tool: a + b, EventSeq: n / 2}
		checkCanonicalPlain(t, r)
	})
}

// BenchmarkRecordCanonical is Canonical of an allowed call's record.
func BenchmarkRecordCanonical(b *testing.B) {
	r := Record{Seq: 12345, At: "2026-12-02T16:00:00.123Z", Type: TypeAllowed, PolicyRevision: 3, Principal: "agent", Kind: "tool_call", Server: "echo", Tool: "echo", Rule: "echo allowed", Policy: "sha256:0123456789abcdef", ArgumentsHash: "sha256:fedcba9876543210"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Canonical(); err != nil {
			b.Fatal(err)
		}
	}
}
