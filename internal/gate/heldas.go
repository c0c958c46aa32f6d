package gate

import (
	"context"
	"errors"
	"fmt"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// HeldAsTask reports whether approval id holds a call made as an MCP task
// (the Tasks extension; Call.Task): such a call runs once approved whether
// or not its agent is still connected (the task carries it, and the agent
// reads the result with tasks/get), unlike a 2025 hold, which runs only if
// its caller still waits. Approvers' surfaces say so (polish18). When ctx
// carries a store.TaskProbe for id that the decision's write filled (read
// in its transaction), that answer is returned without a read of its own.
func (g *Gate) HeldAsTask(ctx context.Context, id approval.ID) (bool, error) {
	if p := store.TaskProbeFor(ctx, id); p != nil && p.Read {
		return p.Task, nil
	}
	if _, err := g.store.GetTask(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("read the task of %s: %w", id, err)
	}
	return true, nil
}
