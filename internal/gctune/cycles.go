package gctune

import (
	"context"
	"runtime"
)

// cycleSentinel is the object whose cleanup marks a completed collection.
// It holds a pointer so that the allocator never batches it with other
// tiny objects (a tiny object's cleanup may wait for its neighbours).
type cycleSentinel struct{ _ *byte }

// GCCycles returns a channel that receives (without blocking the runtime:
// at most one signal is pending) after each completed garbage collection
// until ctx ends. It keeps one unreachable sentinel object armed with a
// cleanup (runtime.AddCleanup); each cleanup signals and arms the next, so
// the hook costs one small allocation per collection and no goroutine of
// its own (cleanups run on the runtime's cleanup goroutine). Once ctx has
// ended the next cleanup arms nothing.
func GCCycles(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	var arm func()
	arm = func() {
		runtime.AddCleanup(&cycleSentinel{}, func(struct{}) {
			if ctx.Err() != nil {
				return
			}
			select {
			case ch <- struct{}{}:
			default:
			}
			arm()
		}, struct{}{})
	}
	arm()
	return ch
}
