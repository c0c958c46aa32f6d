package gate

import (
	"context"
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
