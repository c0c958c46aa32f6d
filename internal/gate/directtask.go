package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Direct tasks (issue 11, the Tasks extension): a call that policy allowed,
// from a 2026-07-28 client that declares the extension, to a tool whose
// execution.taskSupport is optional or required, runs as a task with no
// approval behind it. Its record (store.Task with State set) is created
// before the caller gets the task, so any instance answers tasks/get at
// once; the instance running the call renews its lease and records the
// outcome in the result ledger under the task's own id. Its id is a task
// id like an approval's (unguessable, bound to the principal); a working
// task whose lease lapsed without a result has an unknown outcome and is
// never run again (the call may have run).

// Statuses of a task on the wire (SEP-2663).
const (
	TaskStatusWorking   = "working"
	TaskStatusCompleted = "completed"
	TaskStatusFailed    = "failed"
	TaskStatusCancelled = "cancelled"
)

// A DirectTask is a direct task as tasks/get reports it.
type DirectTask struct {
	// ID is the task's record id (not an approval's).
	ID approval.ID
	// Status is one of the TaskStatus* values: completed or failed once a
	// result (or error) is recorded, cancelled once its caller cancelled
	// it, failed (Unknown) when its instance stopped vouching for it.
	Status string
	// Unknown is set when the outcome is unknown: nothing was recorded and
	// the lease lapsed.
	Unknown bool
	// InputRequests are, while Status is input_required, the upstream's
	// input requests not answered yet (key: the upstream's id).
	InputRequests map[string]json.RawMessage
}

// A StartedTask is a direct task just recorded.
type StartedTask struct {
	// TaskID is its id on the wire (for the principal that made it).
	TaskID string
	// ID is its record id.
	ID approval.ID
	// CreatedAt and ExpiresAt are its lifetime (ExpiresAt: when it and its
	// result may be forgotten).
	CreatedAt, ExpiresAt time.Time
}

// StartDirectTask records a direct task of principal p, working, leased to
// this instance until Options.Lease from now, expiring ResultTTL after
// now (its result expires with it).
func (g *Gate) StartDirectTask(ctx context.Context, p approval.Principal) (StartedTask, error) {
	if !g.opts.Key.Valid() {
		return StartedTask{}, errors.New("direct task: the gateway has no key for task ids")
	}
	id, err := approval.NewID()
	if err != nil {
		return StartedTask{}, fmt.Errorf("direct task: %w", err)
	}
	now := g.now()
	t := store.NormalizeTask(store.Task{RequestID: id, Principal: p, CreatedAt: now, ExpiresAt: now.Add(g.opts.ResultTTL),
		State: store.TaskWorking, LeaseUntil: now.Add(g.opts.Lease)})
	if err := g.store.CreateTask(ctx, t); err != nil {
		return StartedTask{}, fmt.Errorf("direct task: %w", err)
	}
	return StartedTask{TaskID: g.TaskID(id, p.ID), ID: id, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}, nil
}

// RenewDirectTask extends the lease of direct task id by Options.Lease
// and reports whether it should go on (false once its caller cancelled
// it, or it is gone).
func (g *Gate) RenewDirectTask(ctx context.Context, id approval.ID) (bool, error) {
	state, err := g.store.RenewTask(ctx, id, g.now().Add(g.opts.Lease))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return true, err // a store outage does not stop a running call
	}
	return state == store.TaskWorking, nil
}

// LeaseInterval is how often a runner renews a direct task's lease.
func (g *Gate) LeaseInterval() time.Duration { return g.opts.Lease / 3 }

// FinishDirectTask records what direct task id's call gave in the result
// ledger, until the task expires (expires). A failure is only logged: the
// task then reports an unknown outcome once its lease lapses.
func (g *Gate) FinishDirectTask(ctx context.Context, id approval.ID, d Recorded, expires time.Time) {
	if rec := g.ledgerRecordUntil(id, d, expires); rec != nil {
		g.recordResult(ctx, *rec)
	}
}

// directTask completes TaskState ts of direct task t: its status from the
// ledger, its state and its lease.
func (g *Gate) directTask(ctx context.Context, t store.Task, ts *TaskState) error {
	d := &DirectTask{ID: t.RequestID, Status: TaskStatusWorking}
	rec, err := g.store.GetResult(ctx, t.RequestID)
	switch {
	case err == nil:
		ts.Result = &Recorded{Result: rec.Result, Error: rec.Error, Truncated: rec.Truncated}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	switch {
	case t.State == store.TaskCancelled:
		d.Status = TaskStatusCancelled
		ts.Status = "cancelled by its caller"
	case ts.Result != nil && ts.Result.Result != nil:
		d.Status = TaskStatusCompleted
		ts.Status = "the call ran"
	case ts.Result != nil:
		d.Status = TaskStatusFailed
		ts.Status = "the call failed"
	case t.State == store.TaskInputRequired:
		r, err := g.openRound(t)
		if err != nil {
			return err
		}
		d.Status, d.InputRequests = TaskStatusInputRequired, r.Pending()
		ts.Status = "the tool asks for input (answer with tasks/update)"
	case !t.LeaseUntil.After(g.now()):
		d.Status, d.Unknown = TaskStatusFailed, true
		ts.Status = "the outcome of the call is unknown (the gateway instance running it stopped); it is not run again"
	default:
		ts.Status = "the call is running"
	}
	ts.Direct = d
	return nil
}

// cancelDirectTask cancels direct task id: a working one becomes
// cancelled; a finished one is left as it is (cancelling it is a no-op).
func (g *Gate) cancelDirectTask(ctx context.Context, id approval.ID, p approval.Principal) error {
	ok, err := g.store.CancelDirectTask(ctx, id)
	if err != nil {
		return err
	}
	if ok {
		g.log.InfoContext(ctx, "task cancelled by its caller", "task", id, "principal", p.ID)
	}
	return nil
}

// TaskStatusInputRequired is the wire status of a direct task whose
// upstream asked for input (SEP-2322 inputRequests on the task, answered
// with tasks/update: SEP-2663).
const TaskStatusInputRequired = "input_required"

// labelTaskInput is the seal label of a parked round (InputRound).
const labelTaskInput = "task-input"

// An InputRound is a round of a direct task's call whose upstream answered
// input_required: what it asked, what the caller answered so far, and what
// is needed to send the next round (on any instance). It is kept sealed in
// the task's record (it carries the call's arguments) while the task is
// input_required.
type InputRound struct {
	// Server and Tool are the real tool called; Arguments its raw
	// arguments as sent upstream.
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Capabilities are the client capabilities the caller declared
	// (_meta["io.modelcontextprotocol/clientCapabilities"]), sent with
	// the next round.
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	// Requests are the upstream's inputRequests (key: its opaque id).
	Requests map[string]json.RawMessage `json:"requests"`
	// State is the upstream's requestState ("" none).
	State string `json:"state,omitempty"`
	// Responses are the caller's answers so far (keys of Requests).
	Responses map[string]json.RawMessage `json:"responses,omitempty"`
}

// Pending are the input requests of r not answered yet.
func (r InputRound) Pending() map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(r.Requests))
	for k, v := range r.Requests {
		if _, ok := r.Responses[k]; !ok {
			m[k] = v
		}
	}
	return m
}

// ParkDirectTask records that working direct task id waits for its
// caller's input (round r): the task becomes input_required, its lease
// ends, and nothing runs until AnswerDirectTask. It reports false when the
// task was no longer working (cancelled meanwhile).
func (g *Gate) ParkDirectTask(ctx context.Context, id approval.ID, r InputRound) (bool, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("park task %s: %w", id, err)
	}
	sealed, err := g.opts.Key.Seal(labelTaskInput, b, []byte(id))
	if err != nil {
		return false, fmt.Errorf("park task %s: %w", id, err)
	}
	return g.store.SwapTask(ctx, id, store.TaskWorking, nil, store.TaskInputRequired, sealed, time.Time{})
}

// openRound unseals the parked round of task t.
func (g *Gate) openRound(t store.Task) (InputRound, error) {
	var r InputRound
	b, err := g.opts.Key.Open(labelTaskInput, t.Arguments, []byte(t.RequestID))
	if err != nil {
		return r, fmt.Errorf("task %s: its input round cannot be opened: %w", t.RequestID, err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("task %s: its input round: %w", t.RequestID, err)
	}
	return r, nil
}

// AnswerDirectTask takes responses (tasks/update's inputResponses) for
// task taskID of principal p. Only keys the task is waiting for are
// taken; any other key is ignored (SEP-2663 acknowledges every update, and
// an answer toolgate did not ask for is never sent on). While keys stay
// unanswered the task stays input_required with the answers kept; once
// every request is answered the task becomes working again, leased to
// this instance, and the round to send upstream is returned (ok true) for
// the caller to run at once. A task that waits for no input (working,
// finished, an approval's task) is left as it is (ok false, no error):
// SEP-2663 acknowledges such an update.
func (g *Gate) AnswerDirectTask(ctx context.Context, taskID string, p approval.Principal, responses map[string]json.RawMessage) (StartedTask, InputRound, bool, error) {
	id, err := g.taskApproval(taskID, p.ID)
	if err != nil {
		return StartedTask{}, InputRound{}, false, err
	}
	for range 8 { // a concurrent update of the same task: read it again
		t, err := g.store.GetTask(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return StartedTask{}, InputRound{}, false, ErrTaskNotFound
		}
		if err != nil {
			return StartedTask{}, InputRound{}, false, err
		}
		if t.Principal.ID != p.ID {
			return StartedTask{}, InputRound{}, false, ErrTaskNotFound
		}
		if t.State != store.TaskInputRequired {
			return StartedTask{}, InputRound{}, false, nil
		}
		r, err := g.openRound(t)
		if err != nil {
			return StartedTask{}, InputRound{}, false, err
		}
		pending := r.Pending()
		if r.Responses == nil {
			r.Responses = map[string]json.RawMessage{}
		}
		taken := 0
		for k, v := range responses {
			if _, ok := pending[k]; ok {
				r.Responses[k] = v
				taken++
			}
		}
		if taken == 0 {
			return StartedTask{}, InputRound{}, false, nil
		}
		st := StartedTask{TaskID: taskID, ID: id, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
		if len(r.Pending()) == 0 {
			ok, err := g.store.SwapTask(ctx, id, store.TaskInputRequired, t.Arguments, store.TaskWorking, nil, g.now().Add(g.opts.Lease))
			if err != nil {
				return StartedTask{}, InputRound{}, false, err
			}
			if ok {
				return st, r, true, nil
			}
			continue
		}
		b, err := json.Marshal(r)
		if err != nil {
			return StartedTask{}, InputRound{}, false, err
		}
		sealed, err := g.opts.Key.Seal(labelTaskInput, b, []byte(id))
		if err != nil {
			return StartedTask{}, InputRound{}, false, err
		}
		ok, err := g.store.SwapTask(ctx, id, store.TaskInputRequired, t.Arguments, store.TaskInputRequired, sealed, time.Time{})
		if err != nil {
			return StartedTask{}, InputRound{}, false, err
		}
		if ok {
			return st, InputRound{}, false, nil
		}
	}
	return StartedTask{}, InputRound{}, false, fmt.Errorf("task %s: too many concurrent updates; send it again", id)
}
