package gate

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestHeldCallParsesArgumentsOnce: the admission of a call that makes an
// approval request parses its arguments once, for the request's argument
// hash and its display copy (approval.Parse); it parsed them for each
// (approval.Hash, then approval.Display). Counted by allocations: the
// arguments' keys are written with an escape, which a parse decodes into a
// string of its own per key, so each parse of keyed arguments costs keys
// allocations more than one of the same arguments with the keys written
// plainly (same display copy, same hash, same request otherwise).
func TestHeldCallParsesArgumentsOnce(t *testing.T) {
	const keys, calls = 400, 8
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Hour))
	g := New(db, pol, &Options{MaxPendingPerPrincipal: 4 * calls})

	// args are arguments of keys members whose keys decode to "kéN",
	// written escaped or not, and a value v (each call its own request).
	args := func(escaped bool, v int) json.RawMessage {
		var b strings.Builder
		fmt.Fprintf(&b, `{"v":%d`, v)
		for i := range keys {
			if escaped {
				fmt.Fprintf(&b, `,"k\u00e9%d":1`, i)
			} else {
				fmt.Fprintf(&b, `,"k%s%d":1`, "\u00e9", i)
			}
		}
		b.WriteString("}")
		return json.RawMessage(b.String())
	}
	var holds []HeldCall
	admit := func(escaped bool, v int) uint64 {
		c := Call{Principal: agent, Server: "fs", Tool: "write_file", Arguments: args(escaped, v), ToolDigest: "sha256:d1"}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		adm := new(Admission)
		_, held := g.AdmitOrHold(t.Context(), &c, adm)
		runtime.ReadMemStats(&after)
		if !held {
			t.Fatalf("call not held: %+v", *adm)
		}
		holds = append(holds, adm.TakeHold())
		return after.Mallocs - before.Mallocs
	}
	admit(false, -1) // the first request's one-time work
	var plain, escaped uint64
	for i := range calls {
		plain += admit(false, 2*i)
		escaped += admit(true, 2*i+1)
	}
	parses := (float64(escaped) - float64(plain)) / calls / keys
	t.Logf("%d calls of %d keys: %d allocations plain, %d escaped: %.2f parses per held call", calls, keys, plain, escaped, parses)
	if parses > 1.5 {
		t.Errorf("the admission of a held call parsed its arguments %.2f times, want 1 (its hash and display copy from one parse)", parses)
	}
	runtime.KeepAlive(holds)
}
