package gate

import (
	"context"
	"fmt"

	"toolgate/internal/approval"
	"toolgate/internal/telemetry"
)

// Who found a task whose runner was gone: TaskResumed's foundBy, the
// found_by label of toolgate_tasks_resumed_total and of the gateway's log
// line "resuming a task whose runner is gone". The gateway, which finds
// them, names them by these (it does not import telemetry: the gate owns
// the metrics).
const (
	// FoundBySweep is the sweep every instance runs every approvals.lease/3.
	FoundBySweep = telemetry.FoundBySweep
	// FoundByTasksGet is the agent's tasks/get.
	FoundByTasksGet = telemetry.FoundByTasksGet
)

// OrphanedTasks returns a page of the approved requests held as MCP tasks
// whose runner is gone (branch tasks47): nobody holds them (their
// holder's lease, or its instance's, lapsed: the instance that answered
// with the task stopped or died) and their sealed arguments are still
// kept, so any instance can run them through the same take-over as a
// tasks/get (gateway.resumeTask), once: the take-over of the lease and the
// consume are compare-and-sets in the store. The store lists only those
// (store.LedgerStore.UnheldApprovedTasks, one read with their task rows;
// branch tasks48), so approved calls that are no task never fill a page
// ahead of one. Ids after after ("" for the first page), in id order, at
// most limit (at most 1,000; 0 means 1,000); next is the id to pass as
// after for the following page, "" when this page was the last. A task
// whose row names another principal than its request is left out. An
// error means the store could not be read.
func (g *Gate) OrphanedTasks(ctx context.Context, after approval.ID, limit int) (rs []approval.Request, next approval.ID, err error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	now := g.now()
	page, err := g.store.UnheldApprovedTasks(ctx, now, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list approved tasks nobody holds: %w", err)
	}
	for _, at := range page {
		r := at.Request
		if !r.LeaseLapsed(now) || !r.ConsumedAt.IsZero() || at.Task.Principal.ID != r.RequestedBy {
			continue
		}
		rs = append(rs, r)
	}
	if len(page) == limit {
		next = page[len(page)-1].Request.ID
	}
	return rs, next, nil
}

// TaskResumed counts, in toolgate_tasks_resumed_total, a task whose runner
// was gone that foundBy (FoundBySweep, FoundByTasksGet) started running here (started)
// or could not run here (its call unreadable, its tool not in the
// catalog).
func (g *Gate) TaskResumed(foundBy string, started bool) {
	g.metrics.TaskResumed(foundBy, started)
}
