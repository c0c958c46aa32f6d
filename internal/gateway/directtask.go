package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	started <- st
	var rr *relayRound
	if caps, _ := ctx.Value(directCapsKey{}).(json.RawMessage); caps != nil {
		rr = &relayRound{caps: caps}
	}
	return g.directRound(ctx, t, call, &adm, st, rr)
}

// directCapsKey is the context key of the client capabilities a direct
// task's caller declared (json.RawMessage), sent with each of its rounds.
type directCapsKey struct{}

// directRound runs one round of direct task st's call (the first, already
// admitted as adm, or a later one, admitted here when adm is nil: policy
// decides each round, as for relayed rounds) with the relay round rr (the
// caller's capabilities, and on a later round its answers and the
// upstream's state), renewing the task's lease meanwhile. An upstream that
// answers input_required parks the task (gate.ParkDirectTask: tasks/get
// shows its inputRequests, tasks/update continues it on any instance);
// any other answer is recorded as the task's result.
func (g *Gateway) directRound(ctx context.Context, t Tool, call gate.Call, adm *gate.Admission, st gate.StartedTask, rr *relayRound) taskOutcome {
	fctx, cancelFinish := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancelFinish()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.directRunners.Store(st.TaskID, cancel)
	defer g.directRunners.Delete(st.TaskID)

	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		g.renewDirectTask(runCtx, st.ID, cancel)
	}()
	if adm == nil {
		adm = g.admitCall(runCtx, &call)
	}
	var (
		res mcp.Result
		err error
	)
	switch {
	case adm.Replay != nil:
		res, err = replayResult(*adm)
	case !adm.Allowed:
		res = refusalResult(*adm)
	default:
		args := call.Arguments
		if adm.Arguments != nil {
			args = adm.Arguments
		}
		res, err = g.dispatchTask(withRelayRound(runCtx, rr), t, call.Principal, args)
		adm.FinishWith(fctx, outcome(res, err), gate.Recorded{})
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.InputRequests != nil {
			cancel() // the lease ends with the round: a parked task runs nothing
			<-renewed
			perr := g.parkDirectTask(fctx, t, args, st, rr, r)
			if perr == nil {
				return taskOutcome{res: res}
			}
			g.log.ErrorContext(ctx, "cannot park a task whose tool asks for input; the task fails", "task", st.ID, "err", perr)
			res, err = nil, &callFailure{msg: "input required", wire: &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: "the tool asked for input and toolgate could not record the question: " + perr.Error()}, outcome: approval.OutcomeTransportError, cause: perr}
			g.opts.Tasks.FinishDirectTask(fctx, st.ID, recordOf(res, err), st.ExpiresAt)
			return taskOutcome{res: res, err: err}
		}
	}
	cancel()
	<-renewed
	g.opts.Tasks.FinishDirectTask(fctx, st.ID, recordOf(res, err), st.ExpiresAt)
	return taskOutcome{res: res, err: err}
}

// parkDirectTask records the input_required answer r of a round of task
// st (the call of t with args and relay round rr): the task waits for its
// caller's answers. A task cancelled meanwhile stays cancelled.
func (g *Gateway) parkDirectTask(ctx context.Context, t Tool, args json.RawMessage, st gate.StartedTask, rr *relayRound, r *mcp.CallToolResult) error {
	round := gate.InputRound{Server: t.Server, Tool: t.Tool, Arguments: args, State: r.RequestState, Requests: map[string]json.RawMessage{}}
	b, err := json.Marshal(r.InputRequests)
	if err == nil {
		err = json.Unmarshal(b, &round.Requests)
	}
	if err != nil {
		return fmt.Errorf("the tool's inputRequests: %w", err)
	}
	if rr != nil && rr.caps != nil {
		if round.Capabilities, err = json.Marshal(rr.caps); err != nil {
			return fmt.Errorf("the caller's capabilities: %w", err)
		}
	}
	if _, err := g.opts.Tasks.ParkDirectTask(ctx, st.ID, round); err != nil {
		return err
	}
	return nil
}

// continueDirectTask sends the next round of parked task st (its caller
// answered every input request of round) upstream, on a goroutine of the
// gateway, as directRound. It reports false when the gateway is closing
// (the task's lease then lapses: its outcome is unknown, never re-run).
func (g *Gateway) continueDirectTask(ctx context.Context, p approval.Principal, st gate.StartedTask, round gate.InputRound) bool {
	rr := &relayRound{state: round.State}
	if round.Capabilities != nil {
		rr.caps = round.Capabilities
	}
	if len(round.Responses) > 0 {
		b, err := json.Marshal(round.Responses)
		if err == nil {
			err = json.Unmarshal(b, &rr.responses)
		}
		if err != nil {
			g.opts.Tasks.FinishDirectTask(ctx, st.ID, gate.Recorded{Error: mustJSON(mcpwire.Errorf(mcpwire.CodeInvalidParams, "inputResponses: %v", err))}, st.ExpiresAt)
			return true
		}
	}
	t, ok := g.catalog.byReal(round.Server, round.Tool)
	if !ok {
		g.opts.Tasks.FinishDirectTask(ctx, st.ID, gate.Recorded{Error: mustJSON(mcpwire.Errorf(CodeRefused, "tool %s of server %s is not in the catalog now; nothing was run", round.Tool, round.Server))}, st.ExpiresAt)
		return true
	}
	call := gate.Call{Principal: p, Server: t.Server, Tool: t.Tool, Arguments: round.Arguments, ToolDigest: t.Digest}
	_, ok = g.goTask(ctx, func(ctx context.Context) {
		g.directRound(ctx, t, call, nil, st, rr)
	})
	return ok
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
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
	case gate.TaskStatusInputRequired:
		m["inputRequests"] = d.InputRequests
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
