package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/mcpwire"
)

// Direct tasks (issue 11, the Tasks extension, SEP-2663): a tools/call that
// policy allows, from a 2026-07-28 client that declares the extension, to
// a tool whose upstream definition says execution.taskSupport "optional"
// or "required" (tasksupport.go), is answered with a task as soon as the
// task is recorded in the store; this gateway runs the upstream call in
// the background, renews the task's lease while it runs, and records the
// result in the ledger, from which tasks/get (any instance) reports it.
// tasks/cancel cancels the upstream call (here at once, on another
// instance at the runner's next lease renewal). Held calls stay approval
// tasks (tasks.go); a call to a tool without task support runs at once.

// runDirectTask records the direct task of an admitted call, hands it to
// started, runs the call and records what it gave. It returns the outcome
// for done (read only when the task could not be recorded: then nothing
// ran and the caller gets the error).
func (g *Gateway) runDirectTask(ctx context.Context, t Tool, call gate.Call, adm gate.Admission, started chan<- gate.StartedTask) taskOutcome {
	fctx, cancelFinish := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancelFinish()
	st, err := g.opts.Tasks.StartDirectTask(ctx, call.Principal)
	if err != nil {
		g.log.ErrorContext(ctx, "cannot record a task; the call is not run", "server", t.Server, "tool", t.Tool, "err", err)
		adm.FinishWith(fctx, approval.OutcomeTransportError, gate.Recorded{})
		return taskOutcome{err: errors.New("cannot record the task (the store is unavailable); nothing was run")}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.directRunners.Store(st.TaskID, cancel)
	defer g.directRunners.Delete(st.TaskID)
	started <- st

	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		g.renewDirectTask(runCtx, st.ID, cancel)
	}()
	args := call.Arguments
	if adm.Arguments != nil {
		args = adm.Arguments
	}
	res, err := g.dispatchTask(runCtx, t, call.Principal, args)
	cancel()
	<-renewed
	adm.FinishWith(fctx, outcome(res, err), gate.Recorded{})
	g.opts.Tasks.FinishDirectTask(fctx, st.ID, recordOf(res, err), st.ExpiresAt)
	return taskOutcome{res: res, err: err}
}

// renewDirectTask renews the lease of direct task id every LeaseInterval
// until ctx ends, and calls stop when the task was cancelled (on any
// instance) or is gone.
func (g *Gateway) renewDirectTask(ctx context.Context, id approval.ID, stop context.CancelFunc) {
	tick := time.NewTicker(g.opts.Tasks.LeaseInterval())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		goOn, err := g.opts.Tasks.RenewDirectTask(ctx, id)
		if err != nil && ctx.Err() == nil {
			g.log.WarnContext(ctx, "cannot renew a running task's lease", "task", id, "err", err)
		}
		if !goOn {
			g.log.InfoContext(ctx, "task cancelled by its caller; cancelling its call", "task", id)
			stop()
			return
		}
	}
}

// stopDirectRunner cancels the call of direct task taskID if this gateway
// runs it (its caller cancelled it: the store says so already).
func (g *Gateway) stopDirectRunner(taskID string) {
	if c, ok := g.directRunners.Load(taskID); ok {
		c.(context.CancelFunc)()
	}
}

// directFields are the fields of a direct task (SEP-2663's Task).
func directFields(taskID, status, message string, createdAt, updatedAt, expiresAt time.Time) map[string]any {
	return map[string]any{
		"taskId":         taskID,
		"status":         status,
		"statusMessage":  message,
		"createdAt":      createdAt.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt":  updatedAt.UTC().Format(time.RFC3339Nano),
		"ttlMs":          max(expiresAt.Sub(createdAt).Milliseconds(), 1),
		"pollIntervalMs": directPollInterval.Milliseconds(),
	}
}

// directPollInterval is the pollIntervalMs of a direct task: it runs a
// tool, not a person's decision.
const directPollInterval = 500 * time.Millisecond

// directTaskResult is the CreateTaskResult of a direct task just started.
func directTaskResult(st gate.StartedTask) any {
	m := directFields(st.TaskID, gate.TaskStatusWorking, "the call is running", st.CreatedAt, st.CreatedAt, st.ExpiresAt)
	m["resultType"] = "task"
	return m
}

// detailedDirectTask is tasks/get's answer for a direct task: completed
// with the result, failed with the JSON-RPC error (or, when the outcome is
// unknown, an error saying so), cancelled, or working.
func detailedDirectTask(ts gate.TaskState) any {
	d := ts.Direct
	updated := ts.CreatedAt
	m := directFields(ts.TaskID, d.Status, ts.Status, ts.CreatedAt, updated, ts.ExpiresAt)
	m["resultType"] = "complete"
	switch d.Status {
	case gate.TaskStatusCompleted:
		m["result"] = ts.Result.Result
	case gate.TaskStatusFailed:
		e := json.RawMessage(nil)
		if ts.Result != nil {
			e = ts.Result.Error
		}
		if e == nil {
			e, _ = json.Marshal(mcpwire.Errorf(CodeRefused, "%s", ts.Status))
		}
		m["error"] = e
	}
	return m
}
