package gateway

import (
	"context"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// An orphanLister is a TaskKeeper that lists the approved tasks whose
// runner is gone (*gate.Gate.OrphanedTasks).
type orphanLister interface {
	OrphanedTasks(ctx context.Context, limit int) ([]approval.Request, error)
}

// orphanSweepLimit caps the tasks one sweep takes up; the rest wait for the
// next sweep.
const orphanSweepLimit = 100

// sweepOrphanedTasks runs, every interval until ctx ends, each approved
// task whose runner is gone (the instance that answered with it stopped or
// died: its lease lapsed) through the take-over a tasks/get does
// (resumeTask), so an approved task runs without waiting for its agent's
// next tasks/get (branch tasks47). Instances racing for one task run it
// once: the take-over of its lease and the consume are compare-and-sets.
// The result is kept in the ledger for the agent's later tasks/get.
func (g *Gateway) sweepOrphanedTasks(ctx context.Context, l orphanLister, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	// cannot holds the tasks this instance could not run (their call
	// unreadable here, their tool gone from the catalog): not tried, nor
	// logged, again while they stay listed; the agent's tasks/get still
	// tries.
	cannot := map[approval.ID]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rs, err := l.OrphanedTasks(ctx, orphanSweepLimit)
		if err != nil && ctx.Err() == nil {
			g.log.Warn("cannot look for approved tasks whose runner is gone; trying again", "err", err, "in", interval)
		}
		listed := make(map[approval.ID]bool, len(rs))
		for _, r := range rs {
			listed[r.ID] = true
			if !cannot[r.ID] && g.resumeTask(ctx, gate.TaskState{Request: r, Runnable: true}, "sweep") {
				cannot[r.ID] = true
			}
		}
		if err == nil {
			for id := range cannot {
				if !listed[id] {
					delete(cannot, id)
				}
			}
		}
	}
}
