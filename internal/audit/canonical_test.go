package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"toolgate/internal/approval"
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
	got, ok := r.canonicalPlain()
	if err != nil {
		if ok {
			t.Fatalf("%+v: canonicalPlain wrote %s, the encoding fails: %v", r, got, err)
		}
		return
	}
	if !ok {
		if r.Monitor == nil && !bytes.Contains(want, []byte("\ufffd")) {
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
	for _, args := range []string{strings.Repeat("[", approval.MaxDepth-1) + strings.Repeat("]", approval.MaxDepth-1), strings.Repeat("[", approval.MaxDepth) + strings.Repeat("]", approval.MaxDepth), `{"a":1,"a":2}`, `{"a":1}`, `{ "b" : [1, 2.50, "<&>\u2028\u00e9"], "a" : {"z":null,"y":true} }`, `[]`, `"s"`, `{"\u00e9":1,"e":2}`} {
		r.Arguments = []byte(args)
		checkCanonicalPlain(t, r)
		for _, w := range [][]string{nil, {}, {"one"}, {"a <b>", "\n\"", "é"}} {
			r.DisplayWarnings = w
			checkCanonicalPlain(t, r)
		}
	}
	r.Arguments, r.DisplayWarnings, r.Monitor = nil, nil, &policy.Monitor{}
	checkCanonicalPlain(t, r)
}

// allowedRecord is an allowed call's record as Trail.callRecord makes it
// (the perf harness's echo call: a 100-byte message).
var allowedRecord = Record{Seq: 12345, At: "2026-12-02T16:00:00.123Z", Type: TypeAllowed, Principal: "agent", Kind: "tool_call", Server: "echo", Tool: "echo", Rule: "echo allowed", Policy: "sha256:0123456789abcdef", ArgumentsHash: "sha256:fedcba9876543210", Arguments: []byte(`{"message":"` + strings.Repeat("x", 100) + `"}`)}

// TestCanonicalAllowedCallIsWrittenDirectly: an allowed call's record
// takes the direct path, with fewer allocations than encoding it and
// canonicalizing the encoding (35 before, for this record).
func TestCanonicalAllowedCallIsWrittenDirectly(t *testing.T) {
	r := allowedRecord
	if _, ok := r.canonicalPlain(); !ok {
		t.Fatal("canonicalPlain declined an allowed call's record")
	}
	checkCanonicalPlain(t, r)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := r.Canonical(); err != nil {
			t.Fatal(err)
		}
	}); n > 12 {
		t.Errorf("Canonical allocated %v times, want at most 12", n)
	}
}

// FuzzCanonicalPlain is TestCanonicalPlainIsCanonicalize on generated
// strings and integers (go test -run '^$' -fuzz FuzzCanonicalPlain ./internal/audit/).
func FuzzCanonicalPlain(f *testing.F) {
	for _, s := range canonStrings {
		f.Add(s, "b", int64(1))
	}
	f.Fuzz(func(t *testing.T, a, b string, n int64) {
		r := Record{Seq: n, At: a, Type: b, Actor: b, Reason: a, Tool: a + b, EventSeq: n / 2, Arguments: []byte(b)}
		if n%2 == 0 {
			r.DisplayWarnings = []string{a, b}
		}
		checkCanonicalPlain(t, r)
	})
}

// BenchmarkRecordCanonical is Canonical of an allowed call's record.
func BenchmarkRecordCanonical(b *testing.B) {
	r := allowedRecord
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Canonical(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLinkHasherIsLinkHash: the batch's link hasher gives LinkHash's
// "sha256:" + hex SHA-256 of prev followed by the record, link after
// link, with one allocation per link (the hash's string; LinkHash made a
// hash state, a sum, its hex and the joined string: 4).
func TestLinkHasherIsLinkHash(t *testing.T) {
	var l linkHasher
	prev := ""
	for _, rec := range []string{`{"seq":1}`, `{"seq":2,"type":"allowed"}`, `{}`} {
		sum := sha256.Sum256([]byte(prev + rec))
		want := "sha256:" + hex.EncodeToString(sum[:])
		if got := l.hash(prev, []byte(rec)); got != want || LinkHash(prev, []byte(rec)) != want {
			t.Fatalf("link of %s after %q: %s (LinkHash %s), want %s", rec, prev, got, LinkHash(prev, []byte(rec)), want)
		}
		prev = want
	}
	rec := []byte(`{"seq":3,"type":"allowed","tool":"echo"}`)
	if n := testing.AllocsPerRun(100, func() { _ = l.hash(prev, rec) }); n > 1 {
		t.Errorf("a link's hash allocated %v times, want 1", n)
	}
}
