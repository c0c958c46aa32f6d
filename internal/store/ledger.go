package store

import (
	"context"
	"encoding/json"
	"time"

	"toolgate/internal/approval"
)

// A Result is the outcome of a consumed approval, kept in the result
// ledger so that a re-send naming the approval, or the task that follows
// it, gets it back instead of the call running again (issue 11).
type Result struct {
	RequestID approval.ID
	// Result is the result the caller got (a CallToolResult, or the result
	// of a prompts/get or resources/read, as JSON); nil when the dispatch
	// failed with Error. A result larger than the ledger keeps is replaced
	// by a stand-in that says so, and Truncated is set.
	Result json.RawMessage
	// Error is the JSON-RPC error object the dispatch failed with; nil when
	// there is a Result.
	Error     json.RawMessage
	Truncated bool
	// Size is the size in bytes of the result (or error) as it was, before
	// any truncation.
	Size       int
	RecordedAt time.Time
	// ExpiresAt is when the ledger forgets it (PruneLedger).
	ExpiresAt time.Time
}

// A Task is a call that a 2026-era client follows as an MCP task (the
// Tasks extension). Most are approvals: the approval record is the task,
// and what the request row lacks to run the call later, from any
// instance, is kept here: the principal that made it and its raw
// arguments, sealed (the request row keeps only their hash and display
// copy). A direct task (State set) is a call policy allowed, run at once
// as a task: it has no request row; its id is its own, its state and the
// lease of the instance running it are kept here, its outcome in the
// result ledger under the same id.
type Task struct {
	RequestID approval.ID
	Principal approval.Principal
	// Arguments are the call's raw arguments sealed with the gateway key;
	// nil once they are no longer needed (the approval was consumed or
	// ended): DropTaskArguments. Direct tasks keep none.
	Arguments []byte
	CreatedAt time.Time
	ExpiresAt time.Time
	// State is "" for an approval's task, else TaskWorking or
	// TaskCancelled (migration 0012).
	State string
	// LeaseUntil is, for a direct task, when the instance running it stops
	// vouching for it unless it renews (RenewTask): a working task whose
	// lease lapsed without a result has an unknown outcome.
	LeaseUntil time.Time
}

// An ApprovedTask is an approved request held as an MCP task and its
// task row (LedgerStore.UnheldApprovedTasks).
type ApprovedTask struct {
	Request approval.Request
	Task    Task
}

// States of a direct task (Task.State). Completed and failed are not
// states: they are the result recorded in the ledger.
const (
	TaskWorking   = "working"
	TaskCancelled = "cancelled"
	// TaskInputRequired is a direct task whose upstream asked for input
	// (a multi round-trip round): its Arguments hold the round, sealed,
	// and nothing runs until its caller answers (tasks/update).
	TaskInputRequired = "input_required"
)

// LedgerStore keeps what issue 11 adds to an approval: its result, its
// task, the request states it used, and the gateway's shared secrets.
// Every backend implements it as part of Store. Methods are safe for
// concurrent use by every instance sharing the database; times come from
// the caller and are stored in UTC with millisecond precision.
type LedgerStore interface {
	// PutResult records r. A request's result is written once:
	// ErrAlreadyExists if it has one.
	PutResult(ctx context.Context, r Result) error
	// RecordDispatch records what the dispatch of consumed request r.RequestID
	// gave in one transaction: fn's change of the request, as
	// Store.UpdateRequest makes it (the outcome; by actor), and r in the
	// result ledger as PutResult does, except that a result already
	// recorded is kept without error. If fn returns an error, or the
	// request is not found, nothing is written (the result neither) and
	// that error is returned as UpdateRequest returns it. One write
	// instead of two: a dispatch's outcome and result land together.
	RecordDispatch(ctx context.Context, r Result, actor string, fn func(*approval.Request) error) (approval.Request, error)
	// RecordOutcome records outcome o of the dispatch of request id and,
	// when rec is not nil (rec.RequestID must be id), rec in the result
	// ledger, in one transaction: RecordDispatch (UpdateRequest when rec is
	// nil) with fn approval.Request.RecordOutcome(o), whose check (consumed,
	// no outcome yet) a backend may make in SQL instead of reading the row
	// first (Postgres: one statement, one round trip). It returns an error
	// wrapping approval.ErrResolved, and writes nothing, unless the request
	// is consumed without an outcome (in particular when the sweeper
	// recorded "unknown" after the dispatching process's lease lapsed);
	// ErrNotFound for an unknown id; an error for an unknown outcome. It
	// returns no request: its one caller (the gate) reads none, and on
	// Postgres the updated row's 34 columns were ≈ 5 KB allocated per
	// outcome (docs/performance.md, branch alloc42).
	RecordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *Result, actor string) error
	// GetResult returns the result recorded for request id, or ErrNotFound.
	GetResult(ctx context.Context, id approval.ID) (Result, error)
	// CreateTask records t; ErrAlreadyExists if the request is a task
	// already.
	CreateTask(ctx context.Context, t Task) error
	// GetTask returns the task of request id, or ErrNotFound.
	GetTask(ctx context.Context, id approval.ID) (Task, error)
	// UnheldApprovedTasks returns, in one read, the approved requests held
	// as MCP tasks that nobody holds as of now and that can still run: state
	// approved, not consumed, within their validity (ValidFor 0, or
	// DecidedAt+ValidFor after now), no holder or a holder whose lease
	// (its instance's, for a request that carries the instance marker)
	// ended at or before now, and an approval's task row (State "") that
	// still keeps its sealed arguments. Each comes with that task row. A
	// held call that is no task, a direct task, a pending request and one
	// a live instance holds are never returned. Ids greater than after
	// only ("" for the first), in id order, at most limit (0 means 100):
	// the caller pages by passing the last id it got. It lists for the
	// gateway's sweep of approved tasks whose holder stopped (branch
	// tasks48; gate.Gate.OrphanedTasks).
	UnheldApprovedTasks(ctx context.Context, now time.Time, after approval.ID, limit int) ([]ApprovedTask, error)
	// RenewTask extends the lease of direct task id to until while it is
	// working, and returns its state as it is now (TaskCancelled tells the
	// runner to stop), or ErrNotFound.
	RenewTask(ctx context.Context, id approval.ID, until time.Time) (string, error)
	// CancelDirectTask moves direct task id from working (or
	// input_required) to cancelled and
	// reports whether it did (false: it was not working, or has a result).
	CancelDirectTask(ctx context.Context, id approval.ID) (bool, error)
	// SwapTask moves direct task id from state from with sealed arguments
	// fromArgs (nil: none) to state to with arguments toArgs and lease
	// until (zero: none), provided no result is recorded for it. It
	// reports false, changing nothing, when the task is not so (another
	// instance moved it first, or it is gone).
	SwapTask(ctx context.Context, id approval.ID, from string, fromArgs []byte, to string, toArgs []byte, until time.Time) (bool, error)
	// DropTaskArguments forgets the sealed arguments of task id (the call
	// was consumed or can no longer run). An unknown id is not an error.
	DropTaskArguments(ctx context.Context, id approval.ID) error
	// UseRequestState records that the request state with nonce (of
	// request id) was used, until expiresAt: ErrAlreadyExists when it was
	// used before. It makes a state single-use across instances.
	UseRequestState(ctx context.Context, nonce string, id approval.ID, expiresAt time.Time) error
	// Secret returns the secret named name, storing value under it first
	// when there is none: every instance gets the value of the first one
	// to store it.
	Secret(ctx context.Context, name string, value []byte, now time.Time) ([]byte, error)
	// PruneLedger deletes the results, tasks and used request states whose
	// ExpiresAt is at or before now, and returns how many rows it deleted.
	PruneLedger(ctx context.Context, now time.Time) (int, error)
}

// NormalizeResult returns r with its times in UTC truncated to the
// millisecond: what every backend returns.
func NormalizeResult(r Result) Result {
	r.RecordedAt = Millis(r.RecordedAt)
	r.ExpiresAt = Millis(r.ExpiresAt)
	return r
}

// NormalizeTask returns t with its times in UTC truncated to the
// millisecond: what every backend returns.
func NormalizeTask(t Task) Task {
	t.CreatedAt = Millis(t.CreatedAt)
	t.ExpiresAt = Millis(t.ExpiresAt)
	if !t.LeaseUntil.IsZero() {
		t.LeaseUntil = Millis(t.LeaseUntil)
	}
	return t
}
