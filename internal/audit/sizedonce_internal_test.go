package audit

import (
	"testing"
)

// TestCanonicalPlainAllocatesOnce: the canonical JSON of an event-log
// record (a review, with no arguments; one with a display copy) is
// written into a buffer sized for it, one allocation, not grown from 256
// bytes (two allocations, ≈ 1 KB for a 400-byte record: alloc41). Each
// record's bytes are its own (the chain keeps them until the insert).
func TestCanonicalPlainAllocatesOnce(t *testing.T) {
	reviewed := Record{Seq: 123456, At: "2026-12-06T18:00:00.000Z", Type: "reviewed", EventSeq: 99999,
		ApprovalID: "01900000-0000-7000-8000-000000000003", Actor: "bob", State: "approved", Principal: "agent-1",
		Kind: "tool_call", Server: "fs", Tool: "write_file", Verdict: "approve", PolicyRevision: 3,
		ArgumentsHash: "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}
	requested := reviewed
	requested.Type, requested.Verdict, requested.State = "requested", "", "pending"
	requested.Arguments = []byte(`{"content":"x","path":"/bench/1"}`)
	requested.argumentsCanonical = requested.Arguments
	requested.DisplayWarnings = []string{"content: truncated"}
	for _, r := range []Record{reviewed, requested} {
		want, err := r.canonicalDecoded()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := r.canonicalPlain()
		if !ok || string(got) != string(want) {
			t.Fatalf("%s: canonicalPlain = %s, %v; want %s", r.Type, got, ok, want)
		}
		if raceEnabled {
			continue // the detector's instrumentation allocates more
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = r.canonicalPlain() }); n != 1 {
			t.Errorf("%s: canonicalPlain made %v allocations, want 1", r.Type, n)
		}
	}
}
