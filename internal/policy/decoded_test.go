package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// manyKeys is an arguments object of n members "k0".."k<n-1>" with value
// v (decoding it makes at least one string per key).
func manyKeys(n, v int) json.RawMessage {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, v)
	}
	b.WriteString("}")
	return json.RawMessage(b.String())
}

// TestEvaluateReusesDecoded (args29): an evaluation handed the Decoded of
// an earlier evaluation of the same arguments decides as one that decodes
// them, without decoding them again; arguments that differ are decoded.
func TestEvaluateReusesDecoded(t *testing.T) {
	const keys = 400
	e, err := Compile(newPolicy(Allow, Rule{Name: "watched", Server: "fs", Tools: []string{"write"}, Effect: Approve, When: "args.k0 == 1"}))
	if err != nil {
		t.Fatal(err)
	}
	c := Call{Server: "fs", Tool: "write", Principal: Principal{ID: "agent"}, Arguments: manyKeys(keys, 1), Now: propNow}
	first, _ := e.Evaluate(c)
	if first.Effect != Approve || first.Decoded == nil {
		t.Fatalf("admission: %s, decoded %v; want approve with what it decoded", first.Effect, first.Decoded)
	}
	c.Grants = []Grant{{ID: "g1", Principal: "agent", Server: "fs", Tool: "write", When: "args.k1 == 1", ExpiresAt: propNow.Add(1e12), ApprovedBy: []GrantApprover{{ID: "alice"}}}}
	fresh, _ := e.Evaluate(c)
	again := c
	again.Decoded = first.Decoded
	reused, _ := e.Evaluate(again)
	if reused.Effect != Allow || reused.Grant != "g1" || fresh.Effect != reused.Effect || fresh.Grant != reused.Grant || len(fresh.Errors) != len(reused.Errors) {
		t.Fatalf("with the admission's decode: %s %q %v; decoding again: %s %q %v", reused.Effect, reused.Grant, reused.Errors, fresh.Effect, fresh.Grant, fresh.Errors)
	}
	if reused.Decoded != first.Decoded {
		t.Error("the grant check's Decision.Decoded is not the one it was handed")
	}
	decoding := testing.AllocsPerRun(5, func() { _, _ = e.Evaluate(c) })
	reading := testing.AllocsPerRun(5, func() { _, _ = e.Evaluate(again) })
	t.Logf("%d keys: %.0f allocations decoding, %.0f with the admission's decode", keys, decoding, reading)
	if reading > decoding-keys {
		t.Errorf("an evaluation handed the admission's decode allocated %.0f times, decoding %.0f: it decoded the arguments again", reading, decoding)
	}
	if m, ok := e.MatchGrant(again, Approval{}); m != "g1" || ok != nil {
		t.Errorf("MatchGrant with the decode = %q, %v", m, ok)
	}

	// Other bytes (same length) are decoded, never read from the decode.
	other := c
	other.Arguments = manyKeys(keys, 2)
	other.Decoded = first.Decoded
	if d, _ := e.Evaluate(other); d.Effect != Allow || d.Grant != "" || d.Decoded == first.Decoded {
		t.Errorf("other arguments with an earlier decode: %s %q (same decode: %v); want allow by no rule or grant, decoded afresh", d.Effect, d.Grant, d.Decoded == first.Decoded)
	}
}

// BenchmarkGrantCheckLargeArgs (args29) is a held call's grant check on
// large arguments (4,000-byte strings under keys): the policy evaluated
// again with a grant whose predicate reads one member, decoding the
// arguments again (the base) or reading the admission's decode.
func BenchmarkGrantCheckLargeArgs(b *testing.B) {
	e, err := Compile(newPolicy(Allow, Rule{Name: "watched", Server: "fs", Tools: []string{"write"}, Effect: Approve, When: `args.path != ""`}))
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{64 << 10, 1 << 20} {
		var sb strings.Builder
		sb.WriteString(`{"path":"/tmp/x"`)
		for i := 0; sb.Len() < size; i++ {
			fmt.Fprintf(&sb, `,"part%d":%q`, i, strings.Repeat("y", 4000))
		}
		sb.WriteString("}")
		c := Call{Server: "fs", Tool: "write", Principal: Principal{ID: "agent"}, Arguments: json.RawMessage(sb.String()), Now: propNow}
		admitted, _ := e.Evaluate(c)
		c.Grants = []Grant{{ID: "g1", Principal: "agent", Server: "fs", Tool: "write", When: `args.path.startsWith("/tmp/")`, ExpiresAt: propNow.Add(1e12), ApprovedBy: []GrantApprover{{ID: "alice"}}}}
		for _, mode := range []string{"decode", "reuse"} {
			b.Run(fmt.Sprintf("%dKB/%s", size>>10, mode), func(b *testing.B) {
				cc := c
				if mode == "reuse" {
					cc.Decoded = admitted.Decoded
				}
				b.SetBytes(int64(len(c.Arguments)))
				b.ReportAllocs()
				for b.Loop() {
					if d, _ := e.Evaluate(cc); d.Grant != "g1" {
						b.Fatalf("decision %s %q", d.Effect, d.Grant)
					}
				}
			})
		}
	}
}
