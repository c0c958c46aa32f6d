package gate

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestDirectTaskStates (issue 11): a direct task is working while its
// lease holds; completed or failed from its recorded result; cancelled by
// its caller (a finished one is left as it is); failed with an unknown
// outcome once its lease lapsed without a result (never re-run); another
// principal's lookups and cancels are not-found.
func TestDirectTaskStates(t *testing.T) {
	clk := newClock()
	f := newFixture(t, time.Minute, keyed(t, clk.opts(&Options{Lease: 3 * time.Second})))
	g := f.gate
	alice, bob := approval.Principal{ID: "alice"}, approval.Principal{ID: "bob"}
	ctx := t.Context()

	status := func(taskID string) (TaskState, string) {
		t.Helper()
		ts, err := g.Task(ctx, taskID, alice)
		if err != nil {
			t.Fatalf("Task %s: %v", taskID, err)
		}
		if ts.Direct == nil {
			t.Fatalf("Task %s is not a direct task: %+v", taskID, ts)
		}
		return ts, ts.Direct.Status
	}

	done, err := g.StartDirectTask(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, s := status(done.TaskID); s != TaskStatusWorking {
		t.Errorf("new task %s, want working", s)
	}
	if _, err := g.Task(ctx, done.TaskID, bob); !errors.Is(err, ErrTaskNotFound) {
		t.Errorf("another principal's Task = %v, want ErrTaskNotFound", err)
	}
	if _, err := g.CancelTask(ctx, done.TaskID, bob); !errors.Is(err, ErrTaskNotFound) {
		t.Errorf("another principal's CancelTask = %v, want ErrTaskNotFound", err)
	}
	g.FinishDirectTask(ctx, done.ID, Recorded{Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)}, done.ExpiresAt)
	ts, s := status(done.TaskID)
	if s != TaskStatusCompleted || ts.Result == nil || string(ts.Result.Result) != `{"content":[{"type":"text","text":"ok"}]}` {
		t.Errorf("finished task %s %+v, want completed with the result", s, ts.Result)
	}
	if _, err := g.CancelTask(ctx, done.TaskID, alice); err != nil {
		t.Errorf("cancelling a completed task: %v", err)
	}
	if _, s := status(done.TaskID); s != TaskStatusCompleted {
		t.Errorf("completed task after a cancel is %s", s)
	}

	failed, _ := g.StartDirectTask(ctx, alice)
	g.FinishDirectTask(ctx, failed.ID, Recorded{Error: json.RawMessage(`{"code":-32603,"message":"boom"}`)}, failed.ExpiresAt)
	if _, s := status(failed.TaskID); s != TaskStatusFailed {
		t.Errorf("task with an error %s, want failed", s)
	}

	running, _ := g.StartDirectTask(ctx, alice)
	if _, err := g.CancelTask(ctx, running.TaskID, alice); err != nil {
		t.Fatal(err)
	}
	if goOn, err := g.RenewDirectTask(ctx, running.ID); err != nil || goOn {
		t.Errorf("RenewDirectTask of a cancelled task = %v, %v; want stop", goOn, err)
	}
	if _, s := status(running.TaskID); s != TaskStatusCancelled {
		t.Errorf("cancelled task %s", s)
	}

	lost, _ := g.StartDirectTask(ctx, alice)
	clk.add(2 * time.Second)
	if goOn, err := g.RenewDirectTask(ctx, lost.ID); err != nil || !goOn {
		t.Fatalf("RenewDirectTask = %v, %v; want go on", goOn, err)
	}
	clk.add(2 * time.Second) // within the renewed lease
	if _, s := status(lost.TaskID); s != TaskStatusWorking {
		t.Errorf("task within its renewed lease %s, want working", s)
	}
	clk.add(2 * time.Second) // the lease lapsed: its instance is gone
	if ts, s := status(lost.TaskID); s != TaskStatusFailed || !ts.Direct.Unknown {
		t.Errorf("task whose lease lapsed: %s unknown=%v, want failed with an unknown outcome", s, ts.Direct.Unknown)
	}
	// Its call may have run: a cancel does not make it look cancelled.
	if _, err := g.CancelTask(ctx, lost.TaskID, alice); err != nil {
		t.Fatal(err)
	}
	if ts, s := status(lost.TaskID); s != TaskStatusFailed || !ts.Direct.Unknown {
		t.Errorf("unknown-outcome task after a cancel: %s unknown=%v, want still failed, unknown", s, ts.Direct.Unknown)
	}
}

// TestDirectTaskInputRound (issue 11, SEP-2322/SEP-2663): a parked direct
// task is input_required with its pending requests; an update naming only
// keys not asked (or already answered) changes nothing; answers are taken one key at a time (the
// answered key leaves inputRequests); the last answer hands the round back
// (working, leased), once; another principal's update is not-found; a
// parked task can be cancelled and its round is then never handed out.
func TestDirectTaskInputRound(t *testing.T) {
	clk := newClock()
	f := newFixture(t, time.Minute, keyed(t, clk.opts(&Options{Lease: 3 * time.Second})))
	g := f.gate
	alice, bob := approval.Principal{ID: "alice"}, approval.Principal{ID: "bob"}
	ctx := t.Context()
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	round := InputRound{Server: "s", Tool: "ask", Arguments: raw(`{"a":1}`), State: "up-state", Capabilities: raw(`{"elicitation":{}}`),
		Requests: map[string]json.RawMessage{"one": raw(`{"method":"elicitation/create"}`), "two": raw(`{"method":"elicitation/create"}`)}}

	st, err := g.StartDirectTask(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := g.ParkDirectTask(ctx, st.ID, round); err != nil || !ok {
		t.Fatalf("ParkDirectTask = %v, %v", ok, err)
	}
	pending := func() []string {
		t.Helper()
		ts, err := g.Task(ctx, st.TaskID, alice)
		if err != nil || ts.Direct == nil || ts.Direct.Status != TaskStatusInputRequired {
			t.Fatalf("parked task = %+v, %v; want input_required", ts.Direct, err)
		}
		var keys []string
		for k := range ts.Direct.InputRequests {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return keys
	}
	if got := pending(); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("pending %v, want [one two]", got)
	}
	if _, _, run, err := g.AnswerDirectTask(ctx, st.TaskID, alice, map[string]json.RawMessage{"three": raw(`{}`)}); err != nil || run {
		t.Errorf("update of a key not asked = %v, %v; want ignored", run, err)
	}
	if got := pending(); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("pending after an update of a key not asked %v, want [one two]", got)
	}
	if _, _, _, err := g.AnswerDirectTask(ctx, st.TaskID, bob, map[string]json.RawMessage{"one": raw(`{}`)}); !errors.Is(err, ErrTaskNotFound) {
		t.Errorf("another principal's update = %v, want ErrTaskNotFound", err)
	}
	if _, _, run, err := g.AnswerDirectTask(ctx, st.TaskID, alice, map[string]json.RawMessage{"one": raw(`{"action":"accept"}`), "three": raw(`{}`)}); err != nil || run {
		t.Fatalf("partial update = %v, %v; want kept, not run", run, err)
	}
	if got := pending(); !slices.Equal(got, []string{"two"}) {
		t.Fatalf("pending after a partial update %v, want [two]", got)
	}
	if _, _, run, err := g.AnswerDirectTask(ctx, st.TaskID, alice, map[string]json.RawMessage{"one": raw(`{"action":"decline"}`)}); err != nil || run {
		t.Errorf("update of a key already answered = %v, %v; want ignored", run, err)
	}
	got, next, run, err := g.AnswerDirectTask(ctx, st.TaskID, alice, map[string]json.RawMessage{"two": raw(`{"action":"decline"}`)})
	if err != nil || !run || got.ID != st.ID {
		t.Fatalf("last update = %+v, %v, %v; want the round to run", got, run, err)
	}
	if next.State != "up-state" || string(next.Arguments) != `{"a":1}` || string(next.Responses["one"]) != `{"action":"accept"}` || string(next.Responses["two"]) != `{"action":"decline"}` {
		t.Errorf("round to run %+v, want the upstream state, the arguments and both answers", next)
	}
	ts, err := g.Task(ctx, st.TaskID, alice)
	if err != nil || ts.Direct.Status != TaskStatusWorking {
		t.Fatalf("answered task %+v, %v; want working", ts.Direct, err)
	}
	if _, _, run, err := g.AnswerDirectTask(ctx, st.TaskID, alice, map[string]json.RawMessage{"two": raw(`{}`)}); err != nil || run {
		t.Errorf("update of a working task = %v, %v; want acknowledged, nothing run", run, err)
	}
	clk.add(2 * time.Second)
	if ts, _ := g.Task(ctx, st.TaskID, alice); ts.Direct.Status != TaskStatusWorking {
		t.Errorf("resumed task within its lease is %s, want working", ts.Direct.Status)
	}

	// A parked task can be cancelled; its round is then never handed out.
	if ok, err := g.ParkDirectTask(ctx, st.ID, round); err != nil || !ok {
		t.Fatalf("ParkDirectTask again = %v, %v", ok, err)
	}
	if _, err := g.CancelTask(ctx, st.TaskID, alice); err != nil {
		t.Fatal(err)
	}
	if ts, _ := g.Task(ctx, st.TaskID, alice); ts.Direct.Status != TaskStatusCancelled {
		t.Errorf("cancelled parked task is %s", ts.Direct.Status)
	}
	if _, _, run, err := g.AnswerDirectTask(ctx, st.TaskID, alice, map[string]json.RawMessage{"one": raw(`{}`), "two": raw(`{}`)}); err != nil || run {
		t.Errorf("update of a cancelled task = %v, %v; want acknowledged, nothing run", run, err)
	}
	if ok, err := g.ParkDirectTask(ctx, st.ID, round); err != nil || ok {
		t.Errorf("ParkDirectTask of a cancelled task = %v, %v; want false", ok, err)
	}
}
