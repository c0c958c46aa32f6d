package gate

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"toolgate/internal/approval"
	"toolgate/internal/seal"
	"toolgate/internal/store"
)

// Tasks (issue 11): a 2026-era client that declares the Tasks extension
// gets a task for a call that needs approval. The approval record is the
// task. Its id is not the approval's id (a UUIDv7, guessable from the
// time): it is the approval id with a MAC over it and the calling
// principal, under the shared key, so it cannot be guessed, and it names
// the approval only for the principal that made the call: presented by
// another principal it is unknown. Any instance with the key resolves it;
// nothing else is stored for it.

// ErrTaskNotFound is returned for a task id that is malformed, was made
// for another principal or key, or names no approval task.
var ErrTaskNotFound = errors.New("task not found")

// errTaskNotRunnable: the task's call can no longer be run here (its
// arguments are gone: it was consumed or ended).
var errTaskNotRunnable = errors.New("the task's call can no longer be run")

const (
	labelTaskID   = "task-id"
	labelTaskArgs = "task-arguments"
	taskIDPrefix  = "tgt_"
	taskMACBytes  = 16
)

// TaskID returns the task id of approval id for principal, or "" when the
// gateway has no key or id is not a UUID.
func (g *Gate) TaskID(id approval.ID, principal string) string {
	u, err := uuid.Parse(string(id))
	if err != nil || !g.opts.Key.Valid() {
		return ""
	}
	mac := g.opts.Key.MAC(labelTaskID, u[:], []byte(principal))[:taskMACBytes]
	return taskIDPrefix + base64.RawURLEncoding.EncodeToString(append(u[:], mac...))
}

// taskApproval returns the approval a task id names for principal.
func (g *Gate) taskApproval(taskID, principal string) (approval.ID, error) {
	rest, ok := strings.CutPrefix(taskID, taskIDPrefix)
	if !ok || !g.opts.Key.Valid() {
		return "", ErrTaskNotFound
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != 16+taskMACBytes {
		return "", ErrTaskNotFound
	}
	u, err := uuid.FromBytes(b[:16])
	if err != nil {
		return "", ErrTaskNotFound
	}
	id := approval.ID(u.String())
	if !hmac.Equal([]byte(g.TaskID(id, principal)), []byte(taskID)) { // the MAC, in constant time
		return "", ErrTaskNotFound
	}
	return id, nil
}

// recordTask records r as c's task: the principal and the raw arguments,
// sealed, created with the request and expiring with the task (ResultTTL
// past the request's validity; TaskLifetime).
func (g *Gate) recordTask(ctx context.Context, c Call, r approval.Request) error {
	sealed, err := g.opts.Key.Seal(labelTaskArgs, c.Arguments, []byte(r.ID))
	if err != nil {
		return err
	}
	created, expires := g.TaskLifetime(r)
	return g.store.CreateTask(ctx, store.Task{
		RequestID: r.ID,
		Principal: c.Principal,
		Arguments: sealed,
		CreatedAt: created,
		ExpiresAt: expires,
	})
}

// TaskLifetime is when the task of approval r was created (the request's
// creation) and when it and its result may be forgotten (taskExpiry), to
// the millisecond as the store keeps them: the task's first answer and
// every tasks/get report the same createdAt and ttlMs.
func (g *Gate) TaskLifetime(r approval.Request) (createdAt, expiresAt time.Time) {
	return store.Millis(r.CreatedAt), store.Millis(g.taskExpiry(r))
}

// taskExpiry is when a task (and its result) may be forgotten: ResultTTL
// after the last moment the approval could still run.
func (g *Gate) taskExpiry(r approval.Request) time.Time {
	return r.ExpiresAt.Add(r.ValidFor).Add(g.opts.ResultTTL)
}

// dropTaskArguments forgets a task's sealed arguments once its call was
// consumed or ended; a failure is only logged (they expire with the task).
func (g *Gate) dropTaskArguments(ctx context.Context, id approval.ID) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.store.DropTaskArguments(bg, id); err != nil {
		g.log.WarnContext(ctx, "cannot drop a task's arguments; they expire with the task", "approval", id, "err", err)
	}
}

// withdrawUnrecorded cancels a request whose task could not be recorded,
// so it does not stay pending with nobody to run it.
func (g *Gate) withdrawUnrecorded(ctx context.Context, id approval.ID) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error { return r.Withdraw(g.now()) }); err != nil {
		g.log.ErrorContext(ctx, "cannot cancel a request whose task was not recorded", "approval", id, "err", err)
	}
	g.hub.wake(string(id))
}

// A TaskState is a task as tasks/get reports it.
type TaskState struct {
	// TaskID is the task's id (for the caller that asked).
	TaskID string
	// Request is the approval request, as stored now.
	Request approval.Request
	// Result is what the ledger kept of the dispatch, when the approval
	// was consumed and the result recorded.
	Result *Recorded
	// CreatedAt and ExpiresAt are the task's (ExpiresAt: when it and its
	// result may be forgotten).
	CreatedAt, ExpiresAt time.Time
	// Runnable is true while the call can still be run from the task (its
	// sealed arguments are kept), by any instance.
	Runnable bool
	// Status is a short message for people and models about where the task
	// stands (see StatusMessage).
	Status string
	// Direct is set for a direct task (a call policy allowed, run as a
	// task: directtask.go); Request is then the zero value.
	Direct *DirectTask
}

// Task returns the task taskID of principal p. ErrTaskNotFound for an id
// that is not p's task; other errors mean the store could not be read.
func (g *Gate) Task(ctx context.Context, taskID string, p approval.Principal) (TaskState, error) {
	id, err := g.taskApproval(taskID, p.ID)
	if err != nil {
		return TaskState{}, err
	}
	t, err := g.store.GetTask(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return TaskState{}, ErrTaskNotFound
	}
	if err != nil {
		return TaskState{}, err
	}
	if t.State != "" {
		if t.Principal.ID != p.ID {
			return TaskState{}, ErrTaskNotFound
		}
		ts := TaskState{TaskID: taskID, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
		if err := g.directTask(ctx, t, &ts); err != nil {
			return TaskState{}, err
		}
		return ts, nil
	}
	r, err := g.store.GetRequest(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return TaskState{}, ErrTaskNotFound
	}
	if err != nil {
		return TaskState{}, err
	}
	if t.Principal.ID != p.ID || r.RequestedBy != p.ID {
		return TaskState{}, ErrTaskNotFound
	}
	ts := TaskState{TaskID: taskID, Request: r, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, Runnable: t.Arguments != nil}
	if r.State == approval.StateConsumed {
		rec, err := g.store.GetResult(ctx, id)
		switch {
		case err == nil:
			ts.Result = &Recorded{Result: rec.Result, Error: rec.Error, Truncated: rec.Truncated}
		case !errors.Is(err, store.ErrNotFound):
			return TaskState{}, err
		}
	}
	ts.Status = g.StatusMessage(r)
	return ts, nil
}

// CancelTask withdraws the call of task taskID of principal p: a pending
// approval, or an approved one not consumed yet, is cancelled and nothing
// runs; a call already running or finished is not affected (cancellation
// is cooperative). It returns the request as it is now, or
// ErrTaskNotFound.
func (g *Gate) CancelTask(ctx context.Context, taskID string, p approval.Principal) (approval.Request, error) {
	ts, err := g.Task(ctx, taskID, p)
	if err != nil {
		return approval.Request{}, err
	}
	if ts.Direct != nil {
		if ts.Direct.Status != TaskStatusWorking && ts.Direct.Status != TaskStatusInputRequired {
			return approval.Request{}, nil // finished (or its outcome is unknown): a no-op
		}
		return approval.Request{}, g.cancelDirectTask(ctx, ts.Direct.ID, p)
	}
	id := ts.Request.ID
	r, err := g.store.UpdateRequest(ctx, id, p.ID, func(r *approval.Request) error { return r.Withdraw(g.now()) })
	switch {
	case errors.Is(err, approval.ErrResolved):
		return g.store.GetRequest(ctx, id)
	case err != nil:
		return approval.Request{}, err
	}
	g.metrics.ApprovalDecided(string(approval.StateCancelled))
	g.hub.wake(string(id))
	g.dropTaskArguments(ctx, id)
	g.log.InfoContext(ctx, "task cancelled by its caller", "approval", id, "principal", p.ID)
	return r, nil
}

// TaskCall returns the call of the task of approval id, to run it again on
// this instance when the one that held it is gone: its principal, real
// (server, tool), arguments (unsealed) and Resume set to id, with Task set.
// The caller fills ToolDigest (and KeepAlive) as for a new call.
func (g *Gate) TaskCall(ctx context.Context, id approval.ID) (Call, error) {
	t, err := g.store.GetTask(ctx, id)
	if err != nil {
		return Call{}, err
	}
	if t.Arguments == nil {
		return Call{}, errTaskNotRunnable
	}
	r, err := g.store.GetRequest(ctx, id)
	if err != nil {
		return Call{}, err
	}
	args, err := g.opts.Key.Open(labelTaskArgs, t.Arguments, []byte(id))
	if err != nil {
		if errors.Is(err, seal.ErrInvalid) {
			return Call{}, fmt.Errorf("task %s: its arguments were sealed with another key: %w", id, errTaskNotRunnable)
		}
		return Call{}, err
	}
	kind := r.Kind
	if kind == "" {
		kind = approval.KindToolCall
	}
	return Call{Principal: t.Principal, Kind: kind, Server: r.Server, Tool: r.Tool, Arguments: json.RawMessage(args), Resume: id, Task: true}, nil
}
