package gate

import (
	"encoding/json"
	"errors"
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
