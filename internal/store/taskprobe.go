package store

import (
	"context"

	"toolgate/internal/approval"
)

// A TaskProbe asks the write of one request to read, inside its
// transaction, whether the request holds a call made as an MCP task (a row
// GetTask would return), so that the answer to a decision need not read
// it in a round trip of its own (Gate.HeldAsTask; branch pgapprove35). The
// caller sets ID and passes the probe in the write's context
// (WithTaskProbe); a store that reads it (Postgres's pipelined
// UpdateRequest: one more statement in the pipeline that locks the row)
// sets Read and Task when a write of ID commits, the last such write
// winning. A store that does not leaves Read false, and the caller reads
// the task as before. A probe belongs to one goroutine: the writes that
// fill it run on their caller's.
type TaskProbe struct {
	ID   approval.ID
	Read bool // Task was read in a transaction that committed a write of ID
	Task bool // ID holds a task
}

type taskProbeKey struct{}

// WithTaskProbe returns ctx carrying p for the request writes made with
// it.
func WithTaskProbe(ctx context.Context, p *TaskProbe) context.Context {
	return context.WithValue(ctx, taskProbeKey{}, p)
}

// TaskProbeFor returns the probe ctx carries for request id, or nil when
// it carries none or one for another request.
func TaskProbeFor(ctx context.Context, id approval.ID) *TaskProbe {
	p, _ := ctx.Value(taskProbeKey{}).(*TaskProbe)
	if p == nil || p.ID != id {
		return nil
	}
	return p
}
