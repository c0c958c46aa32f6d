package audit

import (
	"testing"

	"toolgate/internal/gate"
)

// TestDecidedWakesRunOncePerLinger: of the calls queued between two takes
// only the first (which starts Run's linger) and one that fills a Batch
// signal Run; after a take the next call signals again. Before, every call
// signalled (a goroutine wake-up per allowed call).
func TestDecidedWakesRunOncePerLinger(t *testing.T) {
	tr := New(nil, &Options{Batch: 8, QueueSize: 64})
	signals := 0
	decide := func(n int) {
		t.Helper()
		for range n {
			tr.Decided(t.Context(), gate.Decided{})
			select { // Run would take the signal here
			case <-tr.calls:
				signals++
			default:
			}
		}
	}
	decide(5)
	if signals != 1 {
		t.Fatalf("5 calls queued: %d signals, want 1", signals)
	}
	decide(3) // the 8th call fills the Batch
	if signals != 2 {
		t.Fatalf("a full batch queued: %d signals, want 2", signals)
	}
	tr.takeQueued()
	if len(tr.pending) != 8 || len(tr.queue) != 0 {
		t.Fatalf("take: %d pending, %d queued; want 8, 0", len(tr.pending), len(tr.queue))
	}
	decide(4)
	if signals != 3 {
		t.Fatalf("4 calls after a take: %d signals, want 3", signals)
	}
}
