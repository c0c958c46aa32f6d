package audit

import (
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
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":"value %d"`, i, i)
	}
	b.WriteString("}")
	args := json.RawMessage(b.String())
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
	// A second parse of 40 members costs more than 40 allocations.
	if got > hash+disp-40 {
		t.Errorf("callRecord: %v allocations; Hash %v + Display %v: the arguments were parsed twice", got, hash, disp)
	}
}
