package gate

import (
	"context"
	"errors"
	"fmt"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// OrphanedTasks returns up to limit approved requests held as MCP tasks
// whose runner is gone (branch tasks47): nobody holds them (their
// holder's lease, or its instance's, lapsed: the instance that answered
// with the task stopped or died) and their sealed arguments are still
// kept, so any instance can run them through the same take-over as a
// tasks/get (gateway.resumeTask), once: the take-over of the lease and the
// consume are compare-and-sets in the store. Oldest first. It reads one
// page of approved requests (limit, at most 1,000) and each lapsed one's
// task row; an error means the store could not be read.
func (g *Gate) OrphanedTasks(ctx context.Context, limit int) ([]approval.Request, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rs, _, err := g.store.ListRequests(ctx, store.Filter{State: approval.StateApproved, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list approved requests: %w", err)
	}
	now := g.now()
	var out []approval.Request
	for _, r := range rs {
		if !r.LeaseLapsed(now) || !r.ConsumedAt.IsZero() {
			continue
		}
		t, err := g.store.GetTask(ctx, r.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue // a held call of a connection, not a task: its re-send takes it over
		case err != nil:
			return out, fmt.Errorf("read task %s: %w", r.ID, err)
		}
		if t.State != "" || t.Arguments == nil || t.Principal.ID != r.RequestedBy {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}
