package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// TestCallRecordParsesArgumentsOnce: an allowed call's record takes the
// arguments' hash and display copy from one parse (HashDisplay); it used
// to parse them for each (Hash, then Display). The arguments have 40
// string members, so one parse is far more than the record's own
// allocations.
func TestCallRecordParsesArgumentsOnce(t *testing.T) {
	args := fortyMembers()
	tr := New(nil, nil)
	d := gate.Decided{At: time.Unix(1, 0), Principal: approval.Principal{ID: "alice"}, Server: "up", Tool: "echo", Arguments: args, Allowed: true, Rule: "all"}
	rec := tr.callRecord(d)
	h, _ := approval.Hash(args)
	if rec.ArgumentsHash != h || len(rec.Arguments) == 0 {
		t.Fatalf("record hash %q arguments %s; want %q and the display copy", rec.ArgumentsHash, rec.Arguments, h)
	}
	rd := approval.DefaultRedaction()
	hash := testing.AllocsPerRun(20, func() { _, _ = approval.Hash(args) })
	disp := testing.AllocsPerRun(20, func() { _, _, _ = approval.Display(args, rd) })
	got := testing.AllocsPerRun(20, func() { _ = tr.callRecord(d) })
	t.Logf("callRecord %v, Hash %v, Display %v", got, hash, disp)
	// A second parse of 40 members costs more than 40 allocations.
	if got > hash+disp-40 {
		t.Errorf("callRecord: %v allocations; Hash %v + Display %v: the arguments were parsed twice", got, hash, disp)
	}
}

// TestCallRecordCanonicalParsesArgumentsOnce: an allowed call's chained
// record (callRecord, then Canonical) writes the display copy's canonical
// form from the parse that made the copy (HashDisplayCanonical); it used
// to parse the copy again (json.Valid, Canonicalize). The record is what
// canonicalDecoded gives, for arguments with redacted and hidden values.
func TestCallRecordCanonicalParsesArgumentsOnce(t *testing.T) {
	tr := New(nil, nil)
	call := func(args string) gate.Decided {
		return gate.Decided{At: time.Unix(1, 0), Principal: approval.Principal{ID: "alice"}, Server: "up", Tool: "echo", Arguments: json.RawMessage(args), Allowed: true, Rule: "all"}
	}
	for _, args := range []string{`{}`, `{"b":1,"a":[1,2,{"z":null,"y":true}]}`, `{"password":"hunter2","nested":{"api_key":{"x":[1]}},"t":"a\u200bb<&>"}`,
		`{"auth":"Bearer abcdefghijklmnopqrstuvwxyz0123456789","n":1E2}`, `[1,"x"]`, `"only"`} {
		rec := tr.callRecord(call(args))
		got, err := rec.Canonical()
		want, werr := rec.canonicalDecoded()
		if err != nil || werr != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: record %s (%v), canonicalDecoded %s (%v)", args, got, err, want, werr)
		}
	}
	d := call(string(fortyMembers()))
	parse := testing.AllocsPerRun(20, func() { _, _ = approval.Canonicalize(d.Arguments) })
	rec := testing.AllocsPerRun(20, func() { _ = tr.callRecord(d) })
	chained := testing.AllocsPerRun(20, func() {
		if _, err := tr.callRecord(d).Canonical(); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("chained %v, callRecord %v, a parse %v", chained, rec, parse)
	// Parsing the copy of 40 members again costs more than 40.
	if chained-rec > parse-40 {
		t.Errorf("Canonical of a call's record: %v allocations (callRecord %v, a parse %v): the display copy was parsed again", chained-rec, rec, parse)
	}
}

// fortyMembers is an object of 40 string members: one parse of it costs
// far more allocations than a record's own.
func fortyMembers() json.RawMessage {
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k\u00e9%d":"value %d"`, i, i) // an escaped key: a string per key per parse
	}
	b.WriteString("}")
	return json.RawMessage(b.String())
}
