package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/seal"
	"toolgate/internal/store"
)

func testKey(t *testing.T) seal.Key {
	t.Helper()
	k, err := seal.NewKey(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyed(t *testing.T, o *Options) *Options {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	o.Key = testKey(t)
	return o
}

func mustReview(t *testing.T, g *Gate, id approval.ID, v approval.Verdict) {
	t.Helper()
	if _, err := g.Review(t.Context(), id, alice, v, "because", ""); err != nil {
		t.Fatal(err)
	}
}

func mustStored(t *testing.T, s store.Store, id approval.ID) approval.Request {
	t.Helper()
	r, err := s.GetRequest(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMaxHoldAnswersPendingThenTheReSendRuns: a caller that cannot wait
// gets a Pending answer naming the approval, its inbox link and how to
// continue before MaxHold; the request stays pending with its lease
// released; the identical re-send after approval runs it, once.
func TestMaxHoldAnswersPendingThenTheReSendRuns(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{PublicURL: "https://tg.example/"})
	c := writeCall("/a")
	c.MaxHold = 200 * time.Millisecond
	a := f.gate.Admit(t.Context(), c)
	if a.Allowed || !a.Pending || a.ApprovalID == "" {
		t.Fatalf("admission %+v, want Pending", a)
	}
	link := "https://tg.example/ui/approvals/" + string(a.ApprovalID)
	for _, want := range []string{string(a.ApprovalID), link, "Re-send the identical call to continue", "0 of 1 approvals"} {
		if !strings.Contains(a.Message, want) {
			t.Errorf("message %q lacks %q", a.Message, want)
		}
	}
	if m := a.Meta["toolgate/approval"].(map[string]any); m["url"] != link || m["state"] != "pending" {
		t.Errorf("_meta %v", m)
	}
	r := mustStored(t, f.db, a.ApprovalID)
	if r.State != approval.StatePending || !r.LeaseLapsed(time.Now()) {
		t.Fatalf("request %s lease until %v: want pending with its lease released", r.State, r.LeaseUntil)
	}
	mustReview(t, f.gate, a.ApprovalID, approval.VerdictApprove)
	again := f.gate.Admit(t.Context(), writeCall("/a"))
	if !again.Allowed || again.ApprovalID != a.ApprovalID {
		t.Fatalf("re-send %+v, want it to run through %s", again, a.ApprovalID)
	}
	again.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: json.RawMessage(`{"content":[]}`)})
	third := f.gate.Admit(t.Context(), c)
	if !third.Pending || third.ApprovalID == a.ApprovalID {
		t.Fatalf("an identical new call %+v: want a new approval, never the used one", third)
	}
}

// TestResumeReplaysTheLedger: a re-send naming a consumed approval gets
// the recorded result and nothing runs; naming it with other arguments,
// or as another principal, is refused; an identical call that does not
// name it needs a new approval.
func TestResumeReplaysTheLedger(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	ch := admitAsync(t.Context(), f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	mustReview(t, f.gate, r.ID, approval.VerdictApprove)
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("%+v", a)
	}
	result := json.RawMessage(`{"content":[{"type":"text","text":"done"}],"structuredContent":{"n":9007199254740993}}`)
	a.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: result})

	c := writeCall("/a")
	c.Resume = r.ID
	re := f.gate.Admit(t.Context(), c)
	if re.Allowed || re.Replay == nil || !bytes.Equal(re.Replay.Result, result) {
		t.Fatalf("resume %+v, want the recorded result and no run", re)
	}
	if got := mustStored(t, f.db, r.ID); got.State != approval.StateConsumed || got.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("request %s/%s", got.State, got.DispatchOutcome)
	}
	other := writeCall("/b")
	other.Resume = r.ID
	if x := f.gate.Admit(t.Context(), other); x.Allowed || x.Replay != nil || !strings.Contains(x.Message, "different call") {
		t.Errorf("other arguments: %+v", x)
	}
	stranger := c
	stranger.Principal = approval.Principal{ID: "agent-2", Kind: "agent"}
	if x := f.gate.Admit(t.Context(), stranger); x.Allowed || x.Replay != nil {
		t.Errorf("another principal got %+v", x)
	}
	unknown := c
	unknown.Resume = "01900000-0000-7000-8000-000000000001"
	if x := f.gate.Admit(t.Context(), unknown); x.Allowed || x.Replay != nil || !strings.Contains(x.Message, "does not exist") {
		t.Errorf("unknown approval: %+v", x)
	}
}

// TestResumeUnknownOutcomeNeverRuns: an approval consumed by a process
// that died before recording anything is reported as unknown.
func TestResumeUnknownOutcomeNeverRuns(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	ch := admitAsync(t.Context(), f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	mustReview(t, f.gate, r.ID, approval.VerdictApprove)
	if a := recv(t, ch); !a.Allowed {
		t.Fatalf("%+v", a)
	}
	// The process "dies" mid-dispatch: the sweeper records unknown.
	if _, err := f.db.UpdateRequest(t.Context(), r.ID, "test", func(r *approval.Request) error { return r.RecordOutcome(approval.OutcomeUnknown) }); err != nil {
		t.Fatal(err)
	}
	c := writeCall("/a")
	c.Resume = r.ID
	x := f.gate.Admit(t.Context(), c)
	if x.Allowed || x.Replay != nil || !strings.Contains(x.Message, "unknown") || !strings.Contains(x.Message, "not run again") {
		t.Fatalf("resume after a lost outcome: %+v", x)
	}
}

func TestTaskIDs(t *testing.T) {
	f := newFixture(t, time.Minute, keyed(t, nil))
	id := approval.ID("0190a1b2-c3d4-7000-8000-000000000042")
	tid := f.gate.TaskID(id, "agent-1")
	if !strings.HasPrefix(tid, "tgt_") || strings.Contains(tid, string(id)) || tid == f.gate.TaskID(id, "agent-2") {
		t.Fatalf("task id %q", tid)
	}
	if got, err := f.gate.taskApproval(tid, "agent-1"); err != nil || got != id {
		t.Fatalf("taskApproval = %s, %v", got, err)
	}
	for name, bad := range map[string][2]string{
		"other principal": {tid, "agent-2"},
		"tampered":        {tid[:len(tid)-2] + "AA", "agent-1"},
		"approval id":     {string(id), "agent-1"},
		"empty":           {"", "agent-1"},
	} {
		if _, err := f.gate.taskApproval(bad[0], bad[1]); !errors.Is(err, ErrTaskNotFound) {
			t.Errorf("%s: %v, want ErrTaskNotFound", name, err)
		}
	}
	if nokey := newFixture(t, time.Minute, nil); nokey.gate.TaskID(id, "agent-1") != "" {
		t.Error("without a key there are no task ids")
	}
	if a := newFixture(t, time.Minute, nil).gate.Admit(t.Context(), Call{Principal: agent, Server: "fs", Tool: "write_file", Arguments: []byte(`{}`), Task: true}); a.Allowed || a.Pending {
		t.Errorf("a task without a key: %+v, want a refusal", a)
	}
}

// TestTaskLifecycle: a task call is held in the background (OnHold says
// when it is recorded), its task keeps the sealed arguments until the call
// is consumed, and the task then reports the recorded result.
func TestTaskLifecycle(t *testing.T) {
	f := newFixture(t, time.Minute, keyed(t, &Options{PublicURL: "https://tg.example"}))
	held := make(chan approval.Request, 1)
	c := writeCall("/t")
	c.Task = true
	c.OnHold = func(r approval.Request) { held <- r }
	ch := admitAsync(t.Context(), f.gate, c)
	var r approval.Request
	select {
	case r = <-held:
	case a := <-ch:
		t.Fatalf("Admit returned %+v before holding", a)
	}
	tid := f.gate.TaskID(r.ID, agent.ID)
	ts, err := f.gate.Task(t.Context(), tid, agent)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Request.State != approval.StatePending || !ts.Runnable || !strings.HasPrefix(ts.Status, "awaiting approval "+string(r.ID)+": 0 of 1 approvals; expires ") ||
		!strings.HasSuffix(ts.Status, "https://tg.example/ui/approvals/"+string(r.ID)) {
		t.Fatalf("task %+v", ts)
	}
	if _, err := f.gate.Task(t.Context(), tid, approval.Principal{ID: "agent-2"}); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("another principal: %v, want ErrTaskNotFound", err)
	}
	call, err := f.gate.TaskCall(t.Context(), r.ID)
	if err != nil || string(call.Arguments) != string(c.Arguments) || call.Resume != r.ID || !call.Task || call.Principal.ID != agent.ID {
		t.Fatalf("TaskCall = %+v, %v", call, err)
	}
	row, err := f.db.GetTask(t.Context(), r.ID)
	if err != nil || bytes.Contains(row.Arguments, []byte("/t")) {
		t.Fatalf("stored task %+v, %v: the arguments must be sealed", row, err)
	}
	mustReview(t, f.gate, r.ID, approval.VerdictApprove)
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("%+v", a)
	}
	a.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`)})
	ts, err = f.gate.Task(t.Context(), tid, agent)
	if err != nil || ts.Request.State != approval.StateConsumed || ts.Result == nil || !strings.Contains(string(ts.Result.Result), "ran") || ts.Runnable {
		t.Fatalf("finished task %+v, %v", ts, err)
	}
}

func TestCancelTask(t *testing.T) {
	f := newFixture(t, time.Minute, keyed(t, nil))
	held := make(chan approval.Request, 1)
	c := writeCall("/c")
	c.Task = true
	c.OnHold = func(r approval.Request) { held <- r }
	ch := admitAsync(t.Context(), f.gate, c)
	r := <-held
	tid := f.gate.TaskID(r.ID, agent.ID)
	if _, err := f.gate.CancelTask(t.Context(), tid, approval.Principal{ID: "agent-2"}); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("another principal's cancel: %v", err)
	}
	got, err := f.gate.CancelTask(t.Context(), tid, agent)
	if err != nil || got.State != approval.StateCancelled {
		t.Fatalf("CancelTask = %+v, %v", got, err)
	}
	if a := recv(t, ch); a.Allowed || !strings.Contains(a.Message, "cancelled") {
		t.Fatalf("held task call after cancel: %+v", a)
	}
	if _, err := f.gate.CancelTask(t.Context(), tid, agent); err != nil {
		t.Fatalf("cancelling again is acknowledged: %v", err)
	}
}

// TestTaskRunsOnAnotherInstance: when the instance holding a task stops,
// another one sharing the store takes the task over (TaskCall, Resume)
// and runs it once approved.
func TestTaskRunsOnAnotherInstance(t *testing.T) {
	f := newFixture(t, time.Minute, keyed(t, &Options{Instance: "a", Lease: 300 * time.Millisecond}))
	b := New(f.db, f.pol, keyed(t, &Options{Instance: "b", Lease: 300 * time.Millisecond}))
	held := make(chan approval.Request, 1)
	c := writeCall("/x")
	c.Task = true
	c.OnHold = func(r approval.Request) { held <- r }
	ctx, stop := context.WithCancelCause(t.Context())
	ch := admitAsync(ctx, f.gate, c)
	r := <-held
	f.gate.Stop()
	stop(errors.New("instance a shuts down"))
	if a := recv(t, ch); a.Allowed {
		t.Fatalf("%+v", a)
	}
	if got := mustStored(t, f.db, r.ID); got.State != approval.StatePending {
		t.Fatalf("state %s after the holder stopped, want pending", got.State)
	}
	mustReview(t, b, r.ID, approval.VerdictApprove)
	call, err := b.TaskCall(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	call.ToolDigest = "sha256:d1"
	a := b.Admit(t.Context(), call)
	if !a.Allowed || a.ApprovalID != r.ID {
		t.Fatalf("instance b: %+v", a)
	}
	a.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: json.RawMessage(`{"content":[]}`)})
	if _, err := b.TaskCall(t.Context(), r.ID); !errors.Is(err, errTaskNotRunnable) {
		t.Fatalf("a consumed task can run again: %v", err)
	}
}

// TestRequestState: a requestState names its approval for its own caller
// and call, once; a tampered, foreign, mismatched or reused one is
// refused; once the approval was consumed, presenting it again replays.
func TestRequestState(t *testing.T) {
	f := newFixture(t, time.Minute, keyed(t, nil))
	c := writeCall("/m")
	c.Defer = true
	a := f.gate.Admit(t.Context(), c)
	if !a.Pending || a.Held == nil || a.Held.Mode != "retry" {
		t.Fatalf("deferred call %+v, want Pending at once with a retry-mode request", a)
	}
	st, err := f.gate.RequestState(*a.Held)
	if err != nil {
		t.Fatal(err)
	}
	round := writeCall("/m")
	if _, err := f.gate.OpenRequestState(t.Context(), st[:len(st)-3]+"AAA", round); !errors.Is(err, ErrBadRequestState) {
		t.Errorf("tampered: %v", err)
	}
	stranger := round
	stranger.Principal = approval.Principal{ID: "agent-2"}
	if _, err := f.gate.OpenRequestState(t.Context(), st, stranger); !errors.Is(err, ErrBadRequestState) {
		t.Errorf("another principal: %v", err)
	}
	if _, err := f.gate.OpenRequestState(t.Context(), st, writeCall("/other")); !errors.Is(err, ErrBadRequestState) {
		t.Errorf("other arguments: %v", err)
	}
	id, err := f.gate.OpenRequestState(t.Context(), st, round)
	if err != nil || id != a.ApprovalID {
		t.Fatalf("OpenRequestState = %s, %v", id, err)
	}
	if _, err := f.gate.OpenRequestState(t.Context(), st, round); !errors.Is(err, ErrBadRequestState) {
		t.Fatalf("second use: %v", err)
	}
	// The next round waits for the decision, up to MaxHold.
	round.Resume, round.MaxHold = id, 150*time.Millisecond
	if x := f.gate.Admit(t.Context(), round); !x.Pending || x.ApprovalID != id {
		t.Fatalf("round while pending: %+v", x)
	}
	st2, _ := f.gate.RequestState(mustStored(t, f.db, id))
	if _, err := f.gate.OpenRequestState(t.Context(), st2, writeCall("/m")); err != nil {
		t.Fatal(err)
	}
	mustReview(t, f.gate, id, approval.VerdictApprove)
	run := f.gate.Admit(t.Context(), round)
	if !run.Allowed || run.ApprovalID != id {
		t.Fatalf("round after approval: %+v", run)
	}
	run.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: json.RawMessage(`{"content":[]}`)})
	if again, err := f.gate.OpenRequestState(t.Context(), st2, writeCall("/m")); err != nil || again != id {
		t.Fatalf("the last state again after the run = %s, %v: want its approval, for a replay", again, err)
	}
}

func TestLedgerKeepsABoundedResult(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{ResultMaxBytes: 64})
	ch := admitAsync(t.Context(), f.gate, writeCall("/big"))
	r := waitPending(t, f.db, 1)[0]
	mustReview(t, f.gate, r.ID, approval.VerdictApprove)
	a := recv(t, ch)
	big := `{"content":[{"type":"text","text":"` + strings.Repeat("é", 100) + `"}],"isError":true}`
	a.FinishWith(t.Context(), approval.OutcomeToolError, Recorded{Result: json.RawMessage(big)})
	got, err := f.db.GetResult(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var standIn struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
		Meta    map[string]struct {
			Truncated bool `json:"truncated"`
			Size      int  `json:"size"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(got.Result, &standIn); err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || got.Size != len(big) || !standIn.IsError || !standIn.Meta[ledgerMeta].Truncated ||
		standIn.Meta[ledgerMeta].Size != len(big) || !strings.Contains(standIn.Content[0].Text, "result_max_bytes") {
		t.Fatalf("ledger kept %+v: %s", got, got.Result)
	}
}
