package storetest

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// ledgerTests cover store.LedgerStore (issue 11).
var ledgerTests = []struct {
	name string
	fn   func(*testing.T, store.Store)
}{
	{"ResultWrittenOnce", testResultWrittenOnce},
	{"ResultError", testResultError},
	{"RecordDispatch", testRecordDispatch},
	{"RecordOutcome", testRecordOutcome},
	{"TaskRoundTrip", testTaskRoundTrip},
	{"DirectTask", testDirectTask},
	{"SwapTask", testSwapTask},
	{"RequestStateSingleUse", testRequestStateSingleUse},
	{"SecretFirstWins", testSecretFirstWins},
	{"PruneLedger", testPruneLedger},
	{"UnheldApprovedTasks", testUnheldApprovedTasks},
}

func testResultWrittenOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := store.Result{
		RequestID: id(1, 1), Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"n":9007199254740993}}`),
		Size: 90, RecordedAt: t0.Add(1500 * time.Microsecond), ExpiresAt: t0.Add(time.Hour),
	}
	if _, err := s.GetResult(ctx, want.RequestID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetResult before any = %v, want ErrNotFound", err)
	}
	// Concurrent writers (two instances finishing): exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			r := want
			if i > 0 {
				r.Result = json.RawMessage(`{"content":[],"other":` + strconv.Itoa(i) + `}`)
			}
			errs[i] = s.PutResult(ctx, r)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrAlreadyExists):
			t.Fatalf("PutResult = %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won, want 1", won)
	}
	got, err := s.GetResult(ctx, want.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != want.Size || !got.RecordedAt.Equal(store.Millis(want.RecordedAt)) || got.RecordedAt.Location() != time.UTC {
		t.Errorf("GetResult = %+v", got)
	}
	if err := s.PutResult(ctx, store.Result{RequestID: id(1, 2)}); err == nil {
		t.Error("a result with neither result nor error must be refused")
	}
}

func testResultError(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := store.Result{RequestID: id(1, 3), Error: json.RawMessage(`{"code":-32000,"message":"upstream down"}`), Size: 40, Truncated: true,
		RecordedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.PutResult(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetResult(ctx, r.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Result != nil || string(got.Error) != string(r.Error) || !got.Truncated {
		t.Errorf("GetResult = %+v, want the error back", got)
	}
}

// testRecordDispatch: the outcome and the result of a dispatch are written
// in one transaction; a result already recorded is kept; when the
// request's change fails, or the request is unknown, nothing is written.
func testRecordDispatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	consumed := func(rid approval.ID) {
		t.Helper()
		if err := s.CreateRequest(ctx, pending(rid)); err != nil {
			t.Fatalf("CreateRequest(%s) = %v", rid, err)
		}
		if _, err := s.UpdateRequest(ctx, rid, "test", func(r *approval.Request) error { r.State = approval.StateConsumed; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	outcome := func(o approval.Outcome) func(*approval.Request) error {
		return func(r *approval.Request) error { return r.RecordOutcome(o) }
	}
	res := func(rid approval.ID, text string) store.Result {
		return store.Result{RequestID: rid, Result: json.RawMessage(`{"content":[{"type":"text","text":"` + text + `"}]}`),
			Size: 42, RecordedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	}
	result := func(rid approval.ID) string {
		t.Helper()
		got, err := s.GetResult(ctx, rid)
		if errors.Is(err, store.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(got.Result)
	}

	a := id(5, 1)
	consumed(a)
	got, err := s.RecordDispatch(ctx, res(a, "first"), "toolgate", outcome(approval.OutcomeOK))
	if err != nil || got.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("RecordDispatch = %s, %v; want outcome ok", got.DispatchOutcome, err)
	}
	if r := mustGet(t, s, a); r.DispatchOutcome != approval.OutcomeOK {
		t.Errorf("stored outcome %q, want ok", r.DispatchOutcome)
	}
	if want := string(res(a, "first").Result); result(a) != want {
		t.Errorf("result %s, want %s", result(a), want)
	}
	// fn refuses (an outcome is recorded already): nothing is written.
	if _, err := s.RecordDispatch(ctx, res(a, "second"), "toolgate", outcome(approval.OutcomeUnknown)); !errors.Is(err, approval.ErrResolved) {
		t.Errorf("second RecordDispatch = %v, want ErrResolved", err)
	}
	if want := string(res(a, "first").Result); result(a) != want {
		t.Errorf("result after a refused RecordDispatch %s, want the first %s", result(a), want)
	}

	// A result recorded before is kept; the outcome is still recorded.
	b := id(5, 2)
	consumed(b)
	if err := s.PutResult(ctx, res(b, "earlier")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordDispatch(ctx, res(b, "later"), "toolgate", outcome(approval.OutcomeToolError)); err != nil {
		t.Fatalf("RecordDispatch with a result already there = %v", err)
	}
	if r := mustGet(t, s, b); r.DispatchOutcome != approval.OutcomeToolError {
		t.Errorf("stored outcome %q, want tool_error", r.DispatchOutcome)
	}
	if want := string(res(b, "earlier").Result); result(b) != want {
		t.Errorf("result %s, want the earlier %s kept", result(b), want)
	}

	// fn fails on a pending request: neither the outcome nor the result.
	c := id(5, 3)
	mustCreate(t, s, pending(c))
	if _, err := s.RecordDispatch(ctx, res(c, "never"), "toolgate", outcome(approval.OutcomeOK)); !errors.Is(err, approval.ErrResolved) {
		t.Errorf("RecordDispatch on a pending request = %v, want ErrResolved", err)
	}
	if got := result(c); got != "" {
		t.Errorf("result %s written although the request's change failed", got)
	}
	// An unknown request: ErrNotFound, no result.
	if _, err := s.RecordDispatch(ctx, res(id(5, 4), "never"), "toolgate", outcome(approval.OutcomeOK)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RecordDispatch of an unknown request = %v, want ErrNotFound", err)
	}
	if got := result(id(5, 4)); got != "" {
		t.Errorf("result %s written for an unknown request", got)
	}
	if _, err := s.RecordDispatch(ctx, store.Result{RequestID: a}, "toolgate", outcome(approval.OutcomeOK)); err == nil {
		t.Error("a result with neither result nor error must be refused")
	}
}

func testTaskRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := store.Task{
		RequestID: id(2, 1),
		Principal: approval.Principal{ID: "session:abc", Kind: "agent", Tenant: "acme", Groups: []string{"ops"}, OnBehalfOf: "carol", SessionID: "abc"},
		Arguments: []byte{0, 1, 2, 255},
		CreatedAt: t0.Add(time.Millisecond + 300*time.Microsecond), ExpiresAt: t0.Add(time.Hour),
	}
	if err := s.CreateTask(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTask(ctx, want); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second CreateTask = %v, want ErrAlreadyExists", err)
	}
	got, err := s.GetTask(ctx, want.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.NormalizeTask(want), got); diff != "" {
		t.Errorf("GetTask (-want +got):\n%s", diff)
	}
	if err := s.DropTaskArguments(ctx, want.RequestID); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetTask(ctx, want.RequestID)
	if err != nil || got.Arguments != nil {
		t.Fatalf("after DropTaskArguments: %+v, %v", got, err)
	}
	if err := s.DropTaskArguments(ctx, id(2, 9)); err != nil {
		t.Errorf("DropTaskArguments of an unknown task = %v", err)
	}
	if _, err := s.GetTask(ctx, id(2, 9)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTask unknown = %v", err)
	}
}

// testDirectTask: a direct task keeps its state and lease; RenewTask
// extends the lease only while it works and reports a cancellation;
// CancelDirectTask moves only a working task without a result.
func testDirectTask(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := store.Task{
		RequestID: id(2, 20), Principal: approval.Principal{ID: "a"},
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
		State: store.TaskWorking, LeaseUntil: t0.Add(30*time.Second + 700*time.Microsecond),
	}
	if err := s.CreateTask(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTask(ctx, want.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.NormalizeTask(want), got); diff != "" {
		t.Errorf("GetTask (-want +got):\n%s", diff)
	}
	state, err := s.RenewTask(ctx, want.RequestID, t0.Add(time.Minute))
	if err != nil || state != store.TaskWorking {
		t.Fatalf("RenewTask = %q, %v; want working", state, err)
	}
	if got, _ := s.GetTask(ctx, want.RequestID); !got.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Errorf("lease after RenewTask = %v, want %v", got.LeaseUntil, t0.Add(time.Minute))
	}
	if ok, err := s.CancelDirectTask(ctx, want.RequestID); err != nil || !ok {
		t.Fatalf("CancelDirectTask = %v, %v; want true", ok, err)
	}
	if ok, err := s.CancelDirectTask(ctx, want.RequestID); err != nil || ok {
		t.Errorf("second CancelDirectTask = %v, %v; want false", ok, err)
	}
	state, err = s.RenewTask(ctx, want.RequestID, t0.Add(2*time.Minute))
	if err != nil || state != store.TaskCancelled {
		t.Fatalf("RenewTask of a cancelled task = %q, %v; want cancelled", state, err)
	}
	if got, _ := s.GetTask(ctx, want.RequestID); !got.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Errorf("a cancelled task's lease was renewed: %v", got.LeaseUntil)
	}
	// A task with a result is finished: it cannot be cancelled any more.
	done := store.Task{RequestID: id(2, 21), Principal: approval.Principal{ID: "a"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), State: store.TaskWorking, LeaseUntil: t0.Add(time.Minute)}
	if err := s.CreateTask(ctx, done); err != nil {
		t.Fatal(err)
	}
	if err := s.PutResult(ctx, store.Result{RequestID: done.RequestID, Result: json.RawMessage(`{"content":[]}`), RecordedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.CancelDirectTask(ctx, done.RequestID); err != nil || ok {
		t.Errorf("CancelDirectTask of a task with a result = %v, %v; want false", ok, err)
	}
	// An approval's task has no state of its own.
	if ok, err := s.CancelDirectTask(ctx, id(2, 1)); err != nil || ok {
		t.Errorf("CancelDirectTask of an unknown task = %v, %v; want false", ok, err)
	}
	if _, err := s.RenewTask(ctx, id(2, 22), t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RenewTask of an unknown task = %v, want ErrNotFound", err)
	}
}

// testSwapTask: SwapTask moves a direct task between states only from the
// state and sealed arguments named (a compare-and-set), never once a
// result is recorded; a parked (input_required) task can be cancelled.
func testSwapTask(t *testing.T, s store.Store) {
	ctx := t.Context()
	task := store.Task{RequestID: id(2, 30), Principal: approval.Principal{ID: "a"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
		State: store.TaskWorking, LeaseUntil: t0.Add(time.Minute)}
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	round1, round2 := []byte("round-1"), []byte("round-2")
	if ok, err := s.SwapTask(ctx, task.RequestID, store.TaskInputRequired, nil, store.TaskWorking, nil, time.Time{}); err != nil || ok {
		t.Fatalf("SwapTask from the wrong state = %v, %v; want false", ok, err)
	}
	if ok, err := s.SwapTask(ctx, task.RequestID, store.TaskWorking, nil, store.TaskInputRequired, round1, time.Time{}); err != nil || !ok {
		t.Fatalf("SwapTask working -> input_required = %v, %v; want true", ok, err)
	}
	got, err := s.GetTask(ctx, task.RequestID)
	if err != nil || got.State != store.TaskInputRequired || string(got.Arguments) != "round-1" || !got.LeaseUntil.IsZero() {
		t.Fatalf("after parking: %+v, %v", got, err)
	}
	if ok, err := s.SwapTask(ctx, task.RequestID, store.TaskInputRequired, round2, store.TaskInputRequired, round1, time.Time{}); err != nil || ok {
		t.Errorf("SwapTask from other arguments = %v, %v; want false", ok, err)
	}
	if ok, err := s.SwapTask(ctx, task.RequestID, store.TaskInputRequired, round1, store.TaskInputRequired, round2, time.Time{}); err != nil || !ok {
		t.Fatalf("SwapTask round-1 -> round-2 = %v, %v; want true", ok, err)
	}
	if ok, err := s.SwapTask(ctx, task.RequestID, store.TaskInputRequired, round2, store.TaskWorking, nil, t0.Add(2*time.Minute)); err != nil || !ok {
		t.Fatalf("SwapTask input_required -> working = %v, %v; want true", ok, err)
	}
	got, err = s.GetTask(ctx, task.RequestID)
	if err != nil || got.State != store.TaskWorking || got.Arguments != nil || !got.LeaseUntil.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("after resuming: %+v, %v", got, err)
	}
	if ok, err := s.SwapTask(ctx, task.RequestID, store.TaskWorking, nil, store.TaskInputRequired, round1, time.Time{}); err != nil || !ok {
		t.Fatalf("SwapTask working -> input_required again = %v, %v", ok, err)
	}
	if ok, err := s.CancelDirectTask(ctx, task.RequestID); err != nil || !ok {
		t.Fatalf("CancelDirectTask of a parked task = %v, %v; want true", ok, err)
	}
	if ok, err := s.SwapTask(ctx, task.RequestID, store.TaskInputRequired, round1, store.TaskWorking, nil, t0); err != nil || ok {
		t.Errorf("SwapTask of a cancelled task = %v, %v; want false", ok, err)
	}
	done := store.Task{RequestID: id(2, 31), Principal: approval.Principal{ID: "a"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), State: store.TaskWorking, LeaseUntil: t0.Add(time.Minute)}
	if err := s.CreateTask(ctx, done); err != nil {
		t.Fatal(err)
	}
	if err := s.PutResult(ctx, store.Result{RequestID: done.RequestID, Result: json.RawMessage(`{"content":[]}`), RecordedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.SwapTask(ctx, done.RequestID, store.TaskWorking, nil, store.TaskInputRequired, round1, time.Time{}); err != nil || ok {
		t.Errorf("SwapTask of a task with a result = %v, %v; want false", ok, err)
	}
}

func testRequestStateSingleUse(t *testing.T, s store.Store) {
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = s.UseRequestState(ctx, "nonce-1", id(3, 1), t0.Add(time.Minute)) })
	}
	wg.Wait()
	used := 0
	for _, err := range errs {
		switch {
		case err == nil:
			used++
		case !errors.Is(err, store.ErrAlreadyExists):
			t.Fatal(err)
		}
	}
	if used != 1 {
		t.Fatalf("a request state was used %d times, want 1", used)
	}
	if err := s.UseRequestState(ctx, "nonce-2", id(3, 1), t0.Add(time.Minute)); err != nil {
		t.Errorf("another nonce: %v", err)
	}
}

func testSecretFirstWins(t *testing.T, s store.Store) {
	ctx := t.Context()
	var wg sync.WaitGroup
	got := make([][]byte, 6)
	errs := make([]error, 6)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = s.Secret(ctx, "gateway-key", []byte("secret-"+strconv.Itoa(i)), t0) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if string(got[i]) != string(got[0]) {
			t.Fatalf("instances got different secrets: %v and %v", got[0], got[i])
		}
	}
	again, err := s.Secret(ctx, "gateway-key", []byte{9, 9, 9}, t0)
	if err != nil || string(again) != string(got[0]) {
		t.Fatalf("Secret again = %v, %v; want the stored %v", again, err, got[0])
	}
}

func testPruneLedger(t *testing.T, s store.Store) {
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutResult(ctx, store.Result{RequestID: id(4, 1), Result: json.RawMessage(`{}`), RecordedAt: t0, ExpiresAt: t0.Add(time.Minute)}))
	must(s.PutResult(ctx, store.Result{RequestID: id(4, 2), Result: json.RawMessage(`{}`), RecordedAt: t0, ExpiresAt: t0.Add(time.Hour)}))
	must(s.CreateTask(ctx, store.Task{RequestID: id(4, 3), Principal: approval.Principal{ID: "a"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)}))
	must(s.UseRequestState(ctx, "n", id(4, 4), t0.Add(time.Minute)))
	n, err := s.PruneLedger(ctx, t0.Add(time.Minute))
	if err != nil || n != 3 {
		t.Fatalf("PruneLedger = %d, %v; want 3 rows", n, err)
	}
	if _, err := s.GetResult(ctx, id(4, 1)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired result kept: %v", err)
	}
	if _, err := s.GetResult(ctx, id(4, 2)); err != nil {
		t.Errorf("live result pruned: %v", err)
	}
	if err := s.UseRequestState(ctx, "n", id(4, 4), t0.Add(2*time.Minute)); err != nil {
		t.Errorf("a pruned nonce is forgotten: %v", err)
	}
}

// testRecordOutcome: RecordOutcome writes what RecordDispatch (and
// UpdateRequest) with fn RecordOutcome write, the same request, event and
// ledger row, and nothing unless the request is consumed without an
// outcome: in particular not after the sweeper recorded "unknown" for a
// dispatching process whose lease lapsed (a take-over), the check a
// backend may make in SQL instead of reading the row first.
func testRecordOutcome(t *testing.T, s store.Store) {
	ctx := t.Context()
	holder := "instance-a"
	consumed := func(rid approval.ID) {
		t.Helper()
		mustCreate(t, s, pending(rid))
		mustUpdate(t, s, rid, "test", func(r *approval.Request) error {
			r.State, r.ConsumedAt = approval.StateConsumed, t0.Add(time.Minute)
			r.Renew(holder, t0.Add(2*time.Minute))
			return nil
		})
	}
	outcome := func(o approval.Outcome) func(*approval.Request) error {
		return func(r *approval.Request) error { return r.RecordOutcome(o) }
	}
	res := func(rid approval.ID, text string) *store.Result {
		return &store.Result{RequestID: rid, Result: json.RawMessage(`{"content":[{"type":"text","text":"` + text + `"}]}`),
			Size: 42, RecordedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	}
	result := func(rid approval.ID) string {
		t.Helper()
		got, err := s.GetResult(ctx, rid)
		if errors.Is(err, store.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(got.Result)
	}
	// written is what a write left on rid: the request, its events after
	// the consume (ids and times aside) and its result.
	type written struct {
		r      approval.Request
		events []approval.Event
		result string
	}
	written1 := func(rid approval.ID) written {
		t.Helper()
		w := written{r: mustGet(t, s, rid), result: result(rid)}
		w.r.ID = ""
		for _, ev := range eventsOf(allEvents(t, s), rid)[2:] { // requested, consumed
			ev.Seq, ev.RequestID, ev.At = 0, "", time.Time{}
			w.events = append(w.events, ev)
		}
		if w.result != "" {
			w.result = "(the result)"
		}
		return w
	}

	// Recorded as RecordDispatch records it, with and without a result;
	// one of them takes its lease from its instance (RenewLeases).
	for i, withResult := range []bool{true, false} {
		a, b := id(6, 2*i+1), id(6, 2*i+2)
		consumed(a)
		consumed(b)
		if _, err := s.RenewLeases(ctx, holder, []approval.ID{a, b}, t0.Add(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
		var (
			got, want approval.Request
			err       error
			rec       *store.Result
		)
		if withResult {
			rec = res(a, "ran")
			want, err = s.RecordDispatch(ctx, *res(b, "ran"), "toolgate", outcome(approval.OutcomeOK))
		} else {
			want, err = s.UpdateRequest(ctx, b, "toolgate", outcome(approval.OutcomeOK))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err = s.RecordOutcome(ctx, a, approval.OutcomeOK, rec, "toolgate"); err != nil {
			t.Fatalf("RecordOutcome (result %v) = %v", withResult, err)
		}
		got = mustGet(t, s, a)
		if got.DispatchOutcome != approval.OutcomeOK || got.State != approval.StateConsumed {
			t.Errorf("RecordOutcome stored %s with outcome %q, want consumed, ok", got.State, got.DispatchOutcome)
		}
		got.ID, want.ID = "", ""
		if diff := cmp.Diff(want, got, cmpRequest); diff != "" {
			t.Errorf("RecordOutcome stored other than RecordDispatch returned (-dispatch +outcome):\n%s", diff)
		}
		if diff := cmp.Diff(written1(b), written1(a), cmp.AllowUnexported(written{}), cmpRequest); diff != "" {
			t.Errorf("RecordOutcome wrote other than RecordDispatch (-dispatch +outcome):\n%s", diff)
		}
	}

	// Taken over: the dispatching process's lease lapsed and the sweeper
	// recorded "unknown". The late outcome writes nothing at all.
	c := id(6, 10)
	consumed(c)
	mustUpdate(t, s, c, "toolgate", outcome(approval.OutcomeUnknown))
	before := written1(c)
	if err := s.RecordOutcome(ctx, c, approval.OutcomeOK, res(c, "late"), "toolgate"); !errors.Is(err, approval.ErrResolved) {
		t.Errorf("RecordOutcome after the sweeper's unknown = %v, want ErrResolved", err)
	}
	if err := s.RecordOutcome(ctx, c, approval.OutcomeOK, nil, "toolgate"); !errors.Is(err, approval.ErrResolved) {
		t.Errorf("RecordOutcome without a result after the sweeper's unknown = %v, want ErrResolved", err)
	}
	if diff := cmp.Diff(before, written1(c), cmp.AllowUnexported(written{}), cmpRequest); diff != "" {
		t.Errorf("a refused RecordOutcome wrote (-before +after):\n%s", diff)
	}

	// Not consumed (approved, pending): refused, nothing written.
	d := id(6, 11)
	mustCreate(t, s, pending(d))
	if err := s.RecordOutcome(ctx, d, approval.OutcomeOK, res(d, "never"), "toolgate"); !errors.Is(err, approval.ErrResolved) {
		t.Errorf("RecordOutcome on a pending request = %v, want ErrResolved", err)
	}
	mustReview(t, s, d, "alice", approval.VerdictApprove, t0.Add(time.Minute))
	if err := s.RecordOutcome(ctx, d, approval.OutcomeOK, res(d, "never"), "toolgate"); !errors.Is(err, approval.ErrResolved) {
		t.Errorf("RecordOutcome on an approved request = %v, want ErrResolved", err)
	}
	if r := mustGet(t, s, d); r.State != approval.StateApproved || r.DispatchOutcome != approval.OutcomeNone || result(d) != "" {
		t.Errorf("after refused outcomes: %s, outcome %q, result %q; want approved, none, none", r.State, r.DispatchOutcome, result(d))
	}
	if n := len(eventsOf(allEvents(t, s), d)); n != 3 { // requested, reviewed, approved
		t.Errorf("%d events after refused outcomes, want 3", n)
	}
	// Unknown request: ErrNotFound. Unknown outcome, a result of another
	// request: refused before anything is written.
	if err := s.RecordOutcome(ctx, id(6, 12), approval.OutcomeOK, nil, "toolgate"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RecordOutcome of an unknown request = %v, want ErrNotFound", err)
	}
	e := id(6, 13)
	consumed(e)
	if err := s.RecordOutcome(ctx, e, "exploded", nil, "toolgate"); err == nil {
		t.Error("an unknown outcome must be refused")
	}
	if err := s.RecordOutcome(ctx, e, approval.OutcomeOK, res(d, "other"), "toolgate"); err == nil {
		t.Error("a result of another request must be refused")
	}
	if r := mustGet(t, s, e); r.DispatchOutcome != approval.OutcomeNone || result(e) != "" || result(d) != "" {
		t.Errorf("refused outcomes wrote: outcome %q, results %q %q", r.DispatchOutcome, result(e), result(d))
	}
	// A result recorded before is kept; the outcome is still recorded.
	if err := s.PutResult(ctx, *res(e, "earlier")); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordOutcome(ctx, e, approval.OutcomeToolError, res(e, "later"), "toolgate"); err != nil {
		t.Fatalf("RecordOutcome with a result already there = %v", err)
	}
	if r := mustGet(t, s, e); r.DispatchOutcome != approval.OutcomeToolError || result(e) != string(res(e, "earlier").Result) {
		t.Errorf("outcome %q, result %s; want tool_error and the earlier result kept", r.DispatchOutcome, result(e))
	}
}
