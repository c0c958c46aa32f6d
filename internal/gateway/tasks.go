package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/mcpwire"
)

// Tasks for held calls (issue 11; the Tasks extension, SEP-2663, in the
// shape of the draft SEP-2848). A 2026-07-28 tools/call whose client
// declares io.modelcontextprotocol/tasks is taken by the HTTP front before
// the SDK (which has no Tasks): the gate admits it as a task, and a call
// that must wait for an approval is answered with a task (resultType
// "task") as soon as the approval and its task are durably recorded, while
// a runner goroutine of this gateway keeps holding it, dispatches it once
// approved and records the result in the ledger. tasks/get, tasks/cancel
// and tasks/update are answered from the store, by any instance; a task
// whose runner is gone (its instance died: the lease lapsed) is run by the
// instance that is asked about it.

// A TaskKeeper keeps the tasks of held calls (*gate.Gate).
type TaskKeeper interface {
	// TaskID is the task id of approval id for principal ("" without a key).
	TaskID(id approval.ID, principal string) string
	// Task returns principal p's task taskID, or gate.ErrTaskNotFound.
	Task(ctx context.Context, taskID string, p approval.Principal) (gate.TaskState, error)
	// CancelTask withdraws the call of p's task taskID.
	CancelTask(ctx context.Context, taskID string, p approval.Principal) (approval.Request, error)
	// TaskCall is the call of the task of approval id, to run it here.
	TaskCall(ctx context.Context, id approval.ID) (gate.Call, error)
	// StartDirectTask records a direct task of p (directtask.go).
	StartDirectTask(ctx context.Context, p approval.Principal) (gate.StartedTask, error)
	// RenewDirectTask renews the lease of direct task id; false: stop it.
	RenewDirectTask(ctx context.Context, id approval.ID) (bool, error)
	// FinishDirectTask records what direct task id's call gave.
	FinishDirectTask(ctx context.Context, id approval.ID, d gate.Recorded, expires time.Time)
	// ParkDirectTask records that direct task id waits for its caller's
	// input (round r); false if it was cancelled meanwhile.
	ParkDirectTask(ctx context.Context, id approval.ID, r gate.InputRound) (bool, error)
	// AnswerDirectTask takes a tasks/update's inputResponses; ok: every
	// request is answered and the returned round is this instance's to run.
	AnswerDirectTask(ctx context.Context, taskID string, p approval.Principal, responses map[string]json.RawMessage) (gate.StartedTask, gate.InputRound, bool, error)
	// LeaseInterval is how often a runner renews a direct task's lease.
	LeaseInterval() time.Duration
	// TaskLifetime is the createdAt and expiry of approval r's task, as
	// tasks/get reports them.
	TaskLifetime(r approval.Request) (createdAt, expiresAt time.Time)
}

// taskPollInterval is the pollIntervalMs toolgate suggests: approvals are
// decided by people, in seconds to minutes.
const taskPollInterval = 2 * time.Second

// taskRequest reports whether a 2026-07-28 POST body is one the Tasks
// front takes (taskTaken), and answers it (taskRPC) as the whole body of
// the POST. Everything else (false) goes to the SDK's stateless handler.
func (g *Gateway) taskRequest(w http.ResponseWriter, r *http.Request, body []byte, p approval.Principal) bool {
	req, meta, refused, ok := g.taskTaken(body, r.Header, false)
	if ok {
		res, e := any(nil), refused
		if refused == nil {
			res, e = g.taskRPC(r.Context(), req, meta, p, r.Header)
		}
		writeRPC(w, req.ID, res, e)
	}
	return ok
}

// taskTaken decodes body, one JSON-RPC message, and reports whether the
// Tasks front answers it, the same over HTTP (taskRequest) and stdio
// (stdioLean.task): tasks/get, tasks/cancel and tasks/update, tools/call
// from a client that declares the Tasks extension (but of the policy
// tool), and tools/call of a tool that runs only as a task from one that
// does not (-32021). hdr is the POST's headers; nil over stdio, where a
// request of a revision before 2026-07-28 is not taken (the SDK's), and
// where modern tells a session whose revision is 2026-07-28
// (stdioLean.revisionModern): there a request whose _meta is missing or
// malformed is of the session's revision and declares nothing, so a tool
// that runs only as a task is refused to it (-32021) as over HTTP, never
// run by the SDK path (branch stdio43). A message with a key that differs
// only in case from a member the front reads is taken and refused: the
// refusal is returned, with req's id the one the SDK reads (foldedKey,
// branch attack43b); one the SDK reads as a notification is not taken.
func (g *Gateway) taskTaken(body []byte, hdr http.Header, modern bool) (_ mcpwire.Request, _ mcpwire.Meta, refused *mcpwire.Error, ok bool) {
	if g.opts.Tasks == nil {
		return mcpwire.Request{}, mcpwire.Meta{}, nil, false
	}
	req, jerr := mcpwire.DecodeRequest(body)
	if jerr != nil || req.IsNotification() {
		return req, mcpwire.Meta{}, nil, false
	}
	switch req.Method {
	case "tools/call", "tasks/get", "tasks/cancel", "tasks/update":
	default:
		return req, mcpwire.Meta{}, nil, false
	}
	if e := foldedKey(body); e != nil {
		// Answered under the id the SDK reads; one it reads as a
		// notification is left to it (it runs nothing).
		if req.ID = exactID(body); req.ID == nil {
			return req, mcpwire.Meta{}, nil, false
		}
		return req, mcpwire.Meta{}, e, true
	}
	meta, merr := mcpwire.ParseMeta(req.Params)
	if hdr == nil && modern && merr != nil {
		meta, merr = mcpwire.Meta{ProtocolVersion: modernVersion}, nil
	}
	if merr != nil && hdr != nil && req.Method != "tools/call" {
		// A 2026-07-28 POST of tasks/* that the SDK does not serve: it
		// would answer "JSON RPC not handled: \"tasks/get\" unsupported",
		// not saying that the _meta is what is wrong (branch newuser47).
		return req, meta, merr, true
	}
	if merr != nil || (hdr == nil && meta.ProtocolVersion < modernVersion) {
		// The SDK answers a malformed request, and over stdio one of an
		// earlier revision.
		return req, meta, nil, false
	}
	if req.Method == "tools/call" {
		name := toolName(req.Params)
		if !meta.Capabilities.Has(mcpwire.TasksExtension) {
			t, ok := g.catalog.lookup(name)
			return req, meta, nil, ok && t.TaskSupport == TaskSupportRequired
		}
		// The built-in policy tool is never held: the SDK path serves it.
		return req, meta, nil, name != PolicyToolName
	}
	return req, meta, nil, true
}

// checkVersion is mcpwire.CheckVersionHeader of hdr; nil without headers
// (stdio).
func checkVersion(hdr http.Header, metaVersion string) *mcpwire.Error {
	if hdr == nil {
		return nil
	}
	return mcpwire.CheckVersionHeader(hdr, metaVersion)
}

// checkNamed is mcpwire.CheckHeaders of hdr; nil without headers (stdio).
func checkNamed(hdr http.Header, method, name string, named bool) *mcpwire.Error {
	if hdr == nil {
		return nil
	}
	return mcpwire.CheckHeaders(hdr, method, name, named)
}

// taskRPC answers the Tasks front's request req, one taskTaken took, for
// principal p: its result or its error. hdr as in taskTaken.
func (g *Gateway) taskRPC(ctx context.Context, req mcpwire.Request, meta mcpwire.Meta, p approval.Principal, hdr http.Header) (result any, e *mcpwire.Error) {
	declared := meta.Capabilities.Has(mcpwire.TasksExtension)
	if req.Method == "tools/call" && !declared {
		name := toolName(req.Params) // a tool that runs only as a task (taskTaken)
		// SEP-2663: a tool that runs only as a task cannot be served to a
		// client without the extension (after the SEP-2243 header checks
		// the SDK would have made).
		e = checkVersion(hdr, meta.ProtocolVersion)
		if e == nil {
			e = checkNamed(hdr, req.Method, name, true)
		}
		if e == nil {
			e = missingTasks(fmt.Sprintf("tool %s runs only as a task (execution.taskSupport required)", name))
		}
		return nil, e
	}
	if e := checkVersion(hdr, meta.ProtocolVersion); e != nil {
		return nil, e
	}
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		TaskID    string          `json:"taskId"`
		// InputResponses are tasks/update's answers (SEP-2663).
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(req.Params, &params); err != nil {
		return nil, mcpwire.Errorf(mcpwire.CodeInvalidParams, "invalid params: %v", err)
	}
	if req.Method == "tools/call" {
		if e := checkNamed(hdr, req.Method, params.Name, true); e != nil {
			return nil, e
		}
		return g.callAsTask(ctx, p, params.Name, params.Arguments, meta)
	}
	// SEP-2663 names tasks/* requests by their task id (Mcp-Name); a
	// request without the header is served (the body decides), one whose
	// header names another task is refused.
	if e := checkNamed(hdr, req.Method, params.TaskID, len(hdr.Values(mcpwire.HeaderName)) > 0); e != nil {
		return nil, e
	}
	if !declared {
		return nil, missingTasks(req.Method)
	}
	if params.TaskID == "" {
		return nil, mcpwire.Errorf(mcpwire.CodeInvalidParams, "%s needs params.taskId", req.Method)
	}
	switch req.Method {
	case "tasks/get":
		ts, err := g.opts.Tasks.Task(ctx, params.TaskID, p)
		if err != nil {
			return nil, taskError(err)
		}
		g.resumeTask(ctx, ts, gate.FoundByTasksGet) // started or not, the answer is the task as read
		return detailedTask(ts), nil
	case "tasks/cancel":
		if _, err := g.opts.Tasks.CancelTask(ctx, params.TaskID, p); err != nil {
			return nil, taskError(err)
		}
		g.stopDirectRunner(params.TaskID)
		return map[string]any{"resultType": "complete"}, nil
	default: // tasks/update
		// Answers to a direct task's input requests (its upstream asked:
		// directtask.go) are taken for the keys it waits for, and only
		// those; once all are answered this instance sends the next round.
		// Any other key, and any update of a task that asked its caller
		// for nothing (approvals are decided out of band), is acknowledged,
		// as SEP-2663 requires, and changes nothing.
		st, round, run, err := g.opts.Tasks.AnswerDirectTask(ctx, params.TaskID, p, params.InputResponses)
		if err != nil {
			return nil, taskError(err)
		}
		if run && !g.continueDirectTask(ctx, p, st, round) {
			return nil, mcpwire.Errorf(mcpwire.CodeInternalError, "toolgate is shutting down")
		}
		return map[string]any{"resultType": "complete"}, nil
	}
}

// missingTasks is the -32021 error (SEP-2575) for what needs the Tasks
// extension in the client capabilities; what names it.
func missingTasks(what string) *mcpwire.Error {
	return mcpwire.Errorf(mcpwire.CodeMissingCapability, "%s needs the %s extension in the client capabilities", what, mcpwire.TasksExtension).
		WithData(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{mcpwire.TasksExtension: map[string]any{}}}})
}

// toolName is params.name of a tools/call ("" when unreadable).
func toolName(params json.RawMessage) string {
	var p struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Name
}

// taskError is the JSON-RPC error of a task lookup that failed: an
// unknown task (or another principal's) is invalid params, never a hint
// that it exists.
func taskError(err error) *mcpwire.Error {
	if errors.Is(err, gate.ErrTaskNotFound) {
		return mcpwire.Errorf(mcpwire.CodeInvalidParams, "task not found")
	}
	return mcpwire.Errorf(mcpwire.CodeInternalError, "the approval store is unavailable: %v", err)
}

// A taskOutcome is what a task runner's call gave: a result, or an error.
type taskOutcome struct {
	res mcp.Result
	err error
}

// callAsTask runs a tools/call of a Tasks client: the gate admits it as a
// task on a runner goroutine owned by the gateway; the answer is a task
// as soon as the call is held for approval, else the call's own outcome.
func (g *Gateway) callAsTask(ctx context.Context, p approval.Principal, name string, args json.RawMessage, meta mcpwire.Meta) (any, *mcpwire.Error) {
	t, ok := g.catalog.lookup(name)
	if !ok {
		if res, down := g.downTool(ctx, p, name, args); down {
			return completeResult(res), nil
		}
		return nil, mcpwire.Errorf(mcpwire.CodeInvalidParams, "unknown tool: %s%s", name, unknownToolHint)
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	call := gate.Call{Principal: p, Server: t.Server, Tool: t.Tool, Arguments: args, ToolDigest: t.Digest, Task: true}
	if g.opts.Rewrite != nil {
		orig := args
		call.Arguments = g.opts.Rewrite(t.Server, t.Tool, orig)
		call.Outgoing = func() json.RawMessage { return g.opts.Rewrite(t.Server, t.Tool, orig) }
	}
	held := make(chan approval.Request, 1)
	call.OnHold = func(r approval.Request) {
		select {
		case held <- r:
		default:
		}
	}
	done := make(chan taskOutcome, 1)
	var started chan gate.StartedTask
	if t.TaskSupport != "" {
		started = make(chan gate.StartedTask, 1)
		// A direct task's upstream asks only for input the caller
		// declared it can give (relay2026.go); an approval task's call is
		// sent without (its outcome is its result, with no rounds).
		ctx = context.WithValue(ctx, directCapsKey{}, meta.Capabilities.Raw)
	}
	stop, ok := g.runTask(ctx, t, call, done, started)
	if !ok {
		return nil, mcpwire.Errorf(mcpwire.CodeInternalError, "toolgate is shutting down")
	}
	select {
	case r := <-held:
		return g.createTaskResult(r, p), nil
	case st := <-started:
		return directTaskResult(st), nil
	case o := <-done:
		return g.taskOrOutcome(started, o)
	case <-ctx.Done():
	}
	// The request ended (its caller cancelled it, or went away) before
	// the call became a task: nobody can follow it, so it ends too, as a
	// call of the SDK path does, and is answered as it ended (branch
	// stdio43: before, the runner outlived the request and the upstream
	// call ran on). A task recorded meanwhile runs on: it can be followed
	// with tasks/get, and is answered.
	select {
	case r := <-held:
		return g.createTaskResult(r, p), nil
	case st := <-started:
		return directTaskResult(st), nil
	default:
	}
	stop(context.Cause(ctx))
	select {
	case r := <-held:
		return g.createTaskResult(r, p), nil
	case st := <-started:
		return directTaskResult(st), nil
	case o := <-done:
		return g.taskOrOutcome(started, o)
	}
}

// taskOrOutcome is the answer of a call whose runner gave o: the direct
// task it is when one was started (a direct task that finished at once is
// still answered as the task it is, deterministically; tasks/get has its
// result), else o.
func (g *Gateway) taskOrOutcome(started <-chan gate.StartedTask, o taskOutcome) (any, *mcpwire.Error) {
	select {
	case st := <-started:
		return directTaskResult(st), nil
	default:
	}
	return outcomeResult(o)
}

// runTask admits call on a goroutine of the gateway and, if admitted,
// dispatches it and records its outcome (the ledger keeps the result for
// the task). done gets the outcome. With started set, a call policy
// allows outright runs as a direct task (directtask.go): started gets the
// task once it is recorded. The goroutine outlives ctx (the request that
// made the task), keeping its values, and ends with the gateway (Close).
// It reports false when the gateway is closing; stop ends the goroutine's
// context with a cause.
func (g *Gateway) runTask(ctx context.Context, t Tool, call gate.Call, done chan<- taskOutcome, started chan<- gate.StartedTask) (stop context.CancelCauseFunc, ok bool) {
	return g.goTask(ctx, func(ctx context.Context) {
		var (
			adm gate.Admission
			o   taskOutcome
		)
		defer func() {
			// A panic on the runner (its admission, dispatch or record)
			// fails closed as the answer paths do (answerfail.go): on this
			// goroutine nothing above recovers it, and it ended the
			// process (attack13).
			if v := recover(); v != nil {
				o = taskOutcome{err: g.answerPanicked(ctx, t, &adm, v).err}
				if done != nil {
					select {
					case done <- o:
					default: // answered already
					}
				}
			}
		}()
		adm = *g.admitCall(ctx, &call)
		switch {
		case adm.Replay != nil:
			o.res, o.err = replayResult(adm)
		case !adm.Allowed:
			o.res = refusalResult(adm)
		case started != nil && adm.ApprovalID == "":
			o = g.runDirectTask(ctx, t, call, adm, started)
		default:
			args := call.Arguments
			if adm.Arguments != nil {
				args = adm.Arguments
			}
			o.res, o.err = g.dispatchTask(ctx, t, call.Principal, args)
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
			adm.FinishOnce(fctx, outcome(o.res, o.err), recorded(adm, o.res, o.err)) // once: the recovery above records nothing after it
			cancel()
		}
		if done != nil {
			done <- o
		}
	})
}

// goTask runs fn on a goroutine of the gateway with a context that keeps
// ctx's values (marked as a 2026-07-28 request) but outlives it, and ends
// with the gateway (Close waits for fn), or with stop. It reports false,
// running nothing, when the gateway is closing.
func (g *Gateway) goTask(ctx context.Context, fn func(ctx context.Context)) (stop context.CancelCauseFunc, ok bool) {
	g.closeMux.Lock()
	defer g.closeMux.Unlock()
	if g.closed || g.root.Err() != nil {
		return nil, false
	}
	ctx, cancel := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), modernKey{}, true))
	unroot := context.AfterFunc(g.root, func() { cancel(nil) }) //nolint:contextcheck // the gateway's lifecycle root ends the runner on Close
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer cancel(nil)
		defer unroot()
		fn(ctx)
	}()
	return cancel, true
}

// dispatchTask sends an admitted task's call upstream on the shared
// upstream session (a task outlives the request that made it).
func (g *Gateway) dispatchTask(ctx context.Context, t Tool, p approval.Principal, args json.RawMessage) (mcp.Result, error) {
	u := g.ups[t.Server]
	if u == nil {
		return nil, errUnknownTool(t.Name)
	}
	o := g.newOrigin(ctx, nil, p, t.Server)
	defer o.finish()
	res, err := u.call(withOrigin(ctx, o), t.Tool, args, nil)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// resumeTask runs a task whose runner is gone (the instance that held it
// stopped and its lease lapsed) on this instance, once: the gate resumes
// the approval (waits for the decision, runs it once approved, or answers
// from the ledger). by says what found it (gate.FoundByTasksGet,
// gate.FoundBySweep), for the log and toolgate_tasks_resumed_total. It reports started when it took the task up here, and cannot when
// the task cannot run here (its call cannot be read, or its tool is not in
// the catalog; logged at WARN), so the sweep does not try (and log) it
// again; neither when there was nothing to take up (not runnable, held,
// already running here) or the gateway is closing.
func (g *Gateway) resumeTask(ctx context.Context, ts gate.TaskState, by string) (started, cannot bool) {
	r := ts.Request
	if !ts.Runnable || (r.State != approval.StatePending && r.State != approval.StateApproved) || !r.LeaseLapsed(time.Now()) {
		return false, false
	}
	if _, busy := g.taskRunners.LoadOrStore(r.ID, true); busy {
		return false, false
	}
	call, err := g.opts.Tasks.TaskCall(ctx, r.ID)
	if err != nil {
		g.taskRunners.Delete(r.ID)
		g.log.Warn("cannot resume a task whose runner is gone", "approval", r.ID, "err", err)
		g.countResumed(by, false)
		return false, true
	}
	t, ok := g.catalog.byReal(call.Server, call.Tool)
	if !ok {
		g.taskRunners.Delete(r.ID)
		g.log.Warn("cannot resume a task: its tool is not in the catalog now", "approval", r.ID, "server", call.Server, "tool", call.Tool)
		g.countResumed(by, false)
		return false, true
	}
	call.ToolDigest = t.Digest
	done := make(chan taskOutcome, 1)
	if _, ok := g.runTask(ctx, t, call, done, nil); !ok {
		g.taskRunners.Delete(r.ID)
		return false, false // closing
	}
	g.log.Info("resuming a task whose runner is gone", "approval", r.ID, "state", r.State, "found_by", by)
	g.countResumed(by, true)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		<-done
		g.taskRunners.Delete(r.ID)
	}()
	return true, false
}

// A resumeCounter counts the tasks resumeTask took up
// (*gate.Gate.TaskResumed: toolgate_tasks_resumed_total).
type resumeCounter interface {
	TaskResumed(foundBy string, started bool)
}

// countResumed counts a task whose runner was gone that by
// (gate.FoundBySweep, gate.FoundByTasksGet: the metric's label as is) took
// up here, started or not, when the TaskKeeper counts.
func (g *Gateway) countResumed(by string, started bool) {
	if c, ok := g.opts.Tasks.(resumeCounter); ok {
		c.TaskResumed(by, started)
	}
}

// outcomeResult is the answer of a task call decided without holding.
func outcomeResult(o taskOutcome) (any, *mcpwire.Error) {
	if o.err != nil {
		var je *jsonrpc.Error
		if errors.As(o.err, &je) {
			return nil, &mcpwire.Error{Code: int(je.Code), Message: je.Message, Data: je.Data}
		}
		return nil, mcpwire.Errorf(mcpwire.CodeInternalError, "%v", o.err)
	}
	return completeResult(o.res), nil
}

// completeResult is res as a 2026-07-28 result: resultType "complete".
func completeResult(res any) any {
	b, err := json.Marshal(res)
	if err != nil {
		return map[string]any{"resultType": "complete", "content": []any{}, "isError": true}
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	return m
}

// taskFields are the fields of a task (SEP-2663's Task): flat in a
// CreateTaskResult and in tasks/get's DetailedTask.
func taskFields(taskID string, r approval.Request, status, message string, createdAt, expiresAt time.Time) map[string]any {
	ttl := expiresAt.Sub(createdAt).Milliseconds()
	updated := r.CreatedAt
	if !r.DecidedAt.IsZero() {
		updated = r.DecidedAt
	}
	// To the millisecond, as the store keeps it: a task's first answer
	// (from the request just made) and tasks/get agree.
	updated = updated.Truncate(time.Millisecond)
	if createdAt.After(updated) {
		updated = createdAt
	}
	m := map[string]any{
		"taskId":         taskID,
		"status":         status,
		"statusMessage":  message,
		"createdAt":      createdAt.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt":  updated.UTC().Format(time.RFC3339Nano),
		"ttlMs":          max(ttl, 1),
		"pollIntervalMs": taskPollInterval.Milliseconds(),
		"_meta":          map[string]any{approvalMetaKey: map[string]any{"id": string(r.ID), "state": string(r.State)}},
	}
	return m
}

// createTaskResult answers a call held for approval r with its task.
func (g *Gateway) createTaskResult(r approval.Request, p approval.Principal) any {
	taskID := g.opts.Tasks.TaskID(r.ID, p.ID)
	created, expires := g.opts.Tasks.TaskLifetime(r)
	m := taskFields(taskID, r, "working", g.statusMessage(r), created, expires)
	m["resultType"] = "task"
	return m
}

// statusMessage is the gate's account of r when the gate offers one.
func (g *Gateway) statusMessage(r approval.Request) string {
	if sm, ok := g.opts.Tasks.(interface{ StatusMessage(approval.Request) string }); ok {
		return sm.StatusMessage(r)
	}
	return fmt.Sprintf("awaiting approval %s", r.ID)
}

// detailedTask is tasks/get's answer: the task, and once finished its
// result (completed), or the error or refusal it ended with (failed).
func detailedTask(ts gate.TaskState) any {
	if ts.Direct != nil {
		return detailedDirectTask(ts)
	}
	r := ts.Request
	status := "working"
	var result, rpcErr json.RawMessage
	switch r.State {
	case approval.StatePending, approval.StateApproved:
	case approval.StateConsumed:
		switch {
		case ts.Result != nil && ts.Result.Result != nil:
			status, result = "completed", ts.Result.Result
		case ts.Result != nil && ts.Result.Error != nil:
			status, rpcErr = "failed", ts.Result.Error
		case r.DispatchOutcome != approval.OutcomeNone:
			// Ran, but its result is not kept (or was lost with its instance).
			status = "failed"
			rpcErr, _ = json.Marshal(mcpwire.Errorf(CodeRefused, "%s", ts.Status))
		}
	case approval.StateCancelled:
		status = "cancelled"
	default: // denied, expired, invalidated
		status = "failed"
		msg := ts.Status
		if r.State == approval.StateDenied && r.Reason != "" {
			msg = fmt.Sprintf("denied by %s: %s; nothing was run", r.DecidedBy, r.Reason)
		}
		rpcErr, _ = json.Marshal(mcpwire.Errorf(CodeRefused, "%s", msg))
	}
	m := taskFields(ts.TaskID, r, status, ts.Status, ts.CreatedAt, ts.ExpiresAt)
	m["resultType"] = "complete"
	if result != nil {
		m["result"] = result
	}
	if rpcErr != nil {
		m["error"] = rpcErr
	}
	return m
}

// writeRPC writes one JSON-RPC response as the whole body of a 2026-07-28
// POST (application/json): result, or e with its HTTP status.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, e *mcpwire.Error) {
	b, status := encodeRPC(id, result, e)
	w.Header().Set("Content-Type", "application/json")
	if status != http.StatusOK {
		w.WriteHeader(status)
	}
	_, _ = w.Write(b) //nolint:gosec // G705: a JSON-RPC body served as application/json, never HTML
}

// encodeRPC is the JSON-RPC response to the request with id (one line of
// JSON, no line end): result, or e; and its HTTP status (e's, 200 for a
// result).
func encodeRPC(id json.RawMessage, result any, e *mcpwire.Error) ([]byte, int) {
	if e == nil {
		b, err := json.Marshal(result)
		if err == nil {
			return mcpwire.EncodeResult(id, b), http.StatusOK
		}
		e = mcpwire.Errorf(mcpwire.CodeInternalError, "cannot encode the result: %v", err)
	}
	return mcpwire.EncodeError(id, e), e.Status()
}
