package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// FuzzCallRecordCanonical (attack25): an allowed call's record, chained
// from the display copy's canonical form written by the parse that made
// the copy (approval.HashDisplayCanonical), is what canonicalDecoded
// gives (the verifier's reading of the stored record), and its hash is
// the gate's (approval.Hash), for any arguments.
func FuzzCallRecordCanonical(f *testing.F) {
	for _, s := range []string{`{}`, ``, `{"b":1,"a":[1,2,{"z":null,"y":true}]}`, `{"password":"hunter2","t":"a\u200bb<&>"}`,
		`{"auth":"Bearer abcdefghijklmnopqrstuvwxyz0123456789","n":1E2,"m":-0}`, `[1,"x"]`, `"only"`, `{"a":1,"a":2}`,
		`{"\ud83d\ude00":"\u2028\u0000"}`, "{\"x\":\"\xff\"}", strings.Repeat("[", approval.MaxDepth-1) + strings.Repeat("]", approval.MaxDepth-1),
		strings.Repeat("[", approval.MaxDepth) + strings.Repeat("]", approval.MaxDepth)} {
		f.Add([]byte(s))
	}
	tr := New(nil, nil)
	f.Fuzz(func(t *testing.T, args []byte) {
		d := gate.Decided{At: time.Unix(1, 0), Principal: approval.Principal{ID: "alice"}, Server: "up", Tool: "echo",
			Arguments: json.RawMessage(bytes.Clone(args)), Allowed: true, Rule: "all"}
		rec := tr.callRecord(d)
		if h, err := approval.Hash(args); err == nil && rec.ArgumentsHash != h {
			t.Fatalf("%q: the record's hash %s, the gate's %s", args, rec.ArgumentsHash, h)
		}
		got, err := rec.Canonical()
		want, werr := rec.canonicalDecoded()
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: record %s (%v), canonicalDecoded %s (%v)", args, got, err, want, werr)
		}
	})
}
