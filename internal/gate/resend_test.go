package gate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

func retryPolicy(timeout time.Duration) *policy.Policy {
	p := testPolicy(timeout)
	p.Approval.Mode = policy.ModeRetry
	return p
}

func TestRetryMode(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{RetryWait: 100 * time.Millisecond})
	f.pol.p.Store(retryPolicy(time.Minute))
	c := writeCall("/r")

	first := f.gate.Admit(t.Context(), c)
	if first.Allowed || !strings.Contains(first.Message, "approval required") || first.ApprovalID == "" {
		t.Fatalf("first call: %+v, want approval required", first)
	}
	meta, _ := first.Meta["toolgate/approval"].(map[string]any)
	if meta["id"] != string(first.ApprovalID) || meta["expires_at"] == "" {
		t.Fatalf("_meta = %v", first.Meta)
	}
	// While pending, an identical re-send waits RetryWait and answers with the same id.
	again := f.gate.Admit(t.Context(), c)
	if again.Allowed || again.ApprovalID != first.ApprovalID || !strings.Contains(again.Message, "still pending") {
		t.Fatalf("re-send while pending: %+v", again)
	}
	// A re-send with other arguments never uses this approval.
	if _, err := f.gate.Review(t.Context(), first.ApprovalID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	other := f.gate.Admit(t.Context(), writeCall("/other"))
	if other.Allowed || other.ApprovalID == first.ApprovalID {
		t.Fatalf("different arguments: %+v", other)
	}
	// The first identical re-send after approval runs, once.
	run := f.gate.Admit(t.Context(), c)
	if !run.Allowed || run.ApprovalID != first.ApprovalID {
		t.Fatalf("re-send after approval: %+v", run)
	}
	run.Finish(t.Context(), approval.OutcomeOK)
	// The next identical re-send needs a new approval.
	next := f.gate.Admit(t.Context(), c)
	if next.Allowed || next.ApprovalID == first.ApprovalID || !strings.Contains(next.Message, "approval required") {
		t.Fatalf("second re-send: %+v, want a new request", next)
	}
}

func TestRetryModeDenialAnsweredOnce(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{RetryWait: 50 * time.Millisecond})
	f.pol.p.Store(retryPolicy(time.Minute))
	c := writeCall("/d")
	first := f.gate.Admit(t.Context(), c)
	if _, err := f.gate.Review(t.Context(), first.ApprovalID, alice, approval.VerdictDeny, "too risky", ""); err != nil {
		t.Fatal(err)
	}
	denied := f.gate.Admit(t.Context(), c)
	if denied.Allowed || denied.ApprovalID != first.ApprovalID || !strings.Contains(denied.Message, "too risky") {
		t.Fatalf("re-send after denial: %+v", denied)
	}
	fresh := f.gate.Admit(t.Context(), c)
	if fresh.ApprovalID == first.ApprovalID || !strings.Contains(fresh.Message, "approval required") {
		t.Fatalf("the re-send after the answered denial: %+v, want a new request", fresh)
	}
}

func TestDroppedCallerResendTakesOver(t *testing.T) { // DESIGN "abandoned calls"
	f := newFixture(t, time.Minute, &Options{Lease: 30 * time.Second})
	ctx, cancel := context.WithCancelCause(t.Context())
	ch := admitAsync(ctx, f.gate, writeCall("/x"))
	r := waitPending(t, f.db, 1)[0]
	cancel(errors.New("client connection dropped"))
	recv(t, ch)
	// Approved while nobody holds it: nothing runs.
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	got, _ := f.db.GetRequest(t.Context(), r.ID)
	if got.State != approval.StateApproved {
		t.Fatalf("state %s, want approved (unconsumed)", got.State)
	}
	// The identical re-send takes it over at once (the lease was released) and runs once.
	a := f.gate.Admit(t.Context(), writeCall("/x"))
	if !a.Allowed || a.ApprovalID != r.ID {
		t.Fatalf("re-send: %+v, want it to run through %s", a, r.ID)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	if rs, _, _ := f.db.ListRequests(t.Context(), store.Filter{}); len(rs) != 1 {
		t.Fatalf("%d requests, want 1", len(rs))
	}
}

func TestResendAfterProcessDeathWaitsForTheLease(t *testing.T) { // case C13
	f := newFixture(t, time.Minute, &Options{Lease: 300 * time.Millisecond})
	// A request held by a process that died: its lease is still running.
	dead := New(f.db, f.pol, &Options{Instance: "dead", Lease: 300 * time.Millisecond})
	ctx, cancel := context.WithCancelCause(t.Context())
	dead.Stop() // like kill -9: nothing is cleaned up on the way out
	ch := admitAsync(ctx, dead, writeCall("/c13"))
	r := waitPending(t, f.db, 1)[0]
	// Simulate the death: the dead holder stops renewing without releasing.
	cancel(errShutdownForTest)
	recv(t, ch)
	if _, err := f.db.UpdateRequest(t.Context(), r.ID, "test", func(cur *approval.Request) error {
		cur.Renew("dead", time.Now().Add(300*time.Millisecond))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	resend := admitAsync(t.Context(), f.gate, writeCall("/c13"))
	// Wait until the live gate holds it, then approve; it runs once.
	for range 400 {
		cur, _ := f.db.GetRequest(t.Context(), r.ID)
		if cur.HeldBy == f.gate.instance {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, resend)
	if !a.Allowed || a.ApprovalID != r.ID {
		t.Fatalf("re-send: %+v", a)
	}
	got, _ := f.db.GetRequest(t.Context(), r.ID)
	if !got.ExpiresAt.Equal(r.ExpiresAt) {
		t.Fatalf("expiry changed from %v to %v", r.ExpiresAt, got.ExpiresAt)
	}
	if n, _ := f.db.CountPending(t.Context(), ""); n != 0 {
		t.Fatalf("%d pending, want 0 (no duplicate request)", n)
	}
}

var errShutdownForTest = errors.New("gateway shutting down")

func TestTwoLiveIdenticalCallsNeverShare(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(errors.New("test over"))
	a := admitAsync(ctx, f.gate, writeCall("/same"))
	waitPending(t, f.db, 1)
	b := admitAsync(ctx, f.gate, writeCall("/same"))
	rs := waitPending(t, f.db, 2)
	if rs[0].ID == rs[1].ID {
		t.Fatal("two live calls share one request")
	}
	if _, err := f.gate.Review(t.Context(), rs[0].ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	first := recv(t, a)
	if !first.Allowed || first.ApprovalID != rs[0].ID {
		t.Fatalf("first: %+v", first)
	}
	select {
	case got := <-b:
		t.Fatalf("second call returned %+v, want still held", got)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestArgumentsChangedAfterApprovalInvalidate(t *testing.T) { // case C11
	f := newFixture(t, time.Minute, nil)
	c := writeCall("/pay")
	c.Outgoing = func() json.RawMessage { return json.RawMessage(`{"path":"/pay","content":"x","dry_run":false}`) }
	ch := admitAsync(t.Context(), f.gate, c)
	r := waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if a.Allowed || !strings.Contains(a.Message, approval.ReasonArguments) {
		t.Fatalf("admission %+v, want invalidated: %s", a, approval.ReasonArguments)
	}
	got, _ := f.db.GetRequest(t.Context(), r.ID)
	if got.State != approval.StateInvalidated {
		t.Fatalf("state %s, want invalidated", got.State)
	}
	// Unchanged outgoing bytes (whitespace aside) are accepted and returned for dispatch.
	c2 := writeCall("/ok")
	c2.Outgoing = func() json.RawMessage { return json.RawMessage(`{ "content":"x", "path":"/ok" }`) }
	ch = admitAsync(t.Context(), f.gate, c2)
	r = waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); !a.Allowed || string(a.Arguments) != `{ "content":"x", "path":"/ok" }` {
		t.Fatalf("admission %+v", a)
	}
}

func TestQuorumOfTwo(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	p := testPolicy(time.Minute)
	p.Approval.Approvals = 2
	f.pol.p.Store(p)
	ch := admitAsync(t.Context(), f.gate, writeCall("/q"))
	r := waitPending(t, f.db, 1)[0]
	if got, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil || got.State != approval.StatePending {
		t.Fatalf("first approval: %v %s, want still pending", err, got.State)
	}
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); !errors.Is(err, approval.ErrDuplicate) {
		t.Fatalf("same approver twice: %v, want ErrDuplicate", err)
	}
	select {
	case a := <-ch:
		t.Fatalf("released after one approval: %+v", a)
	case <-time.After(100 * time.Millisecond):
	}
	if got, err := f.gate.Review(t.Context(), r.ID, approval.Principal{ID: "carol"}, approval.VerdictApprove, "", ""); err != nil || got.State != approval.StateApproved {
		t.Fatalf("second approval: %v %s", err, got.State)
	}
	if a := recv(t, ch); !a.Allowed {
		t.Fatalf("%+v", a)
	}
}

func TestSweepMarksDispatchOutcomeUnknown(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{Lease: 150 * time.Millisecond, SweepInterval: 20 * time.Millisecond})
	ch := admitAsync(t.Context(), f.gate, writeCall("/u"))
	r := waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("%+v", a)
	}
	// The process "dies" mid-dispatch: Finish never comes, and nothing
	// renews its lease (it was this gate's, which does not run). Another
	// process's sweeper finds the lease lapsed.
	sweeper := New(f.db, f.pol, &Options{Lease: 150 * time.Millisecond, SweepInterval: 20 * time.Millisecond})
	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		if err := sweeper.Run(runCtx); err != nil {
			t.Errorf("Run: %v", err)
		}
		close(done)
	}()
	defer func() { stop(); <-done }()
	for range 500 {
		got, _ := f.db.GetRequest(t.Context(), r.ID)
		if got.DispatchOutcome == approval.OutcomeUnknown {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("dispatch outcome never became unknown")
}

// TestConcurrentIdenticalRetriesShareOneRequest: identical retry-mode
// calls that arrive together in one process make one request, not one
// each (10 such calls made 2 to 5 pending duplicates for the approvers).
// Each call looked for an open identical request, found none, and
// created its own.
func TestConcurrentIdenticalRetriesShareOneRequest(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		// The calls that find the request answer "still pending" at once.
		f := newFixtureOn(t, db, time.Minute, &Options{RetryWait: time.Millisecond})
		f.pol.p.Store(retryPolicy(time.Minute))
		const calls = 12
		ids := make(chan approval.ID, calls)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				<-start
				a := f.gate.Admit(t.Context(), writeCall("/same"))
				if a.Allowed {
					t.Errorf("a call ran: %+v", a)
				}
				ids <- a.ApprovalID
			})
		}
		close(start)
		wg.Wait()
		close(ids)
		seen := map[approval.ID]int{}
		for id := range ids {
			seen[id]++
		}
		if len(seen) != 1 {
			t.Errorf("%d identical calls made %d requests %v, want one", calls, len(seen), seen)
		}
		l, _, err := db.ListRequests(t.Context(), store.Filter{State: approval.StatePending, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != 1 {
			t.Errorf("%d pending requests, want 1", len(l))
		}
	})
}
