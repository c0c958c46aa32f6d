package gate

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestDispatchRecordsOutcomeAndResultInOneWrite: after an approved call
// ran, its outcome and its result reach the store in one write
// (store.RecordDispatch), not two (PutResult, then UpdateRequest): one
// transaction fewer per approval in approve-all (docs/performance.md,
// "Approving them all"), and the two land together.
func TestDispatchRecordsOutcomeAndResultInOneWrite(t *testing.T) {
	f := newFaultyFixture(t, time.Minute, nil)
	ch := admitAsync(t.Context(), f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	mustReview(t, f.gate, r.ID, approval.VerdictApprove)
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("admission %+v, want allowed", a)
	}
	f.store.reset()
	result := json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`)
	a.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: result})

	if n := f.store.count("RecordOutcome"); n != 1 {
		t.Errorf("RecordOutcome called %d times, want 1", n)
	}
	for _, separate := range []string{"PutResult", "UpdateRequest", "UpdateRequestWithChain", "RecordDispatch"} {
		if n := f.store.count(separate); n != 0 {
			t.Errorf("%s called %d times after the dispatch, want 0 (one write records outcome and result)", separate, n)
		}
	}
	if got := mustStored(t, f.db, r.ID); got.State != approval.StateConsumed || got.DispatchOutcome != approval.OutcomeOK {
		t.Errorf("request %s, outcome %q; want consumed, ok", got.State, got.DispatchOutcome)
	}
	rec, err := f.db.GetResult(t.Context(), r.ID)
	if err != nil || !bytes.Equal(rec.Result, result) {
		t.Errorf("ledger result %s, %v; want %s", rec.Result, err, result)
	}
}

// TestResultKeptWhenTheOutcomeCannotBeRecorded: when the outcome cannot
// be recorded (here another writer recorded one first), the combined
// write fails as a whole, and the result is still kept on its own for a
// re-send naming the approval, as before the two were combined.
func TestResultKeptWhenTheOutcomeCannotBeRecorded(t *testing.T) {
	f := newFaultyFixture(t, time.Minute, nil)
	ch := admitAsync(t.Context(), f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	mustReview(t, f.gate, r.ID, approval.VerdictApprove)
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("admission %+v, want allowed", a)
	}
	if _, err := f.db.UpdateRequest(t.Context(), r.ID, "sweeper", func(r *approval.Request) error { return r.RecordOutcome(approval.OutcomeUnknown) }); err != nil {
		t.Fatal(err)
	}
	f.store.reset()
	result := json.RawMessage(`{"content":[{"type":"text","text":"ran late"}]}`)
	a.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: result})

	if n := f.store.count("PutResult"); n != 1 {
		t.Errorf("PutResult called %d times, want 1 (the result on its own)", n)
	}
	if got := mustStored(t, f.db, r.ID); got.DispatchOutcome != approval.OutcomeUnknown {
		t.Errorf("outcome %q, want the first one recorded (unknown) kept", got.DispatchOutcome)
	}
	rec, err := f.db.GetResult(t.Context(), r.ID)
	if err != nil || !bytes.Equal(rec.Result, result) {
		t.Errorf("ledger result %s, %v; want %s", rec.Result, err, result)
	}
}
