package gate

import (
	"context"
	"fmt"
	"sync"

	"toolgate/internal/policy"
)

// identicalKey names the calls that share one retry-mode request: the
// key of Store.OpenIdentical, and the kind (a prompt and a tool of the
// same name are different things).
type identicalKey struct {
	principal, server, tool, hash string
	kind                          string
}

// identicalLocks serialises, per identicalKey, the look-up and creation
// of a request that identical calls share (retry mode) in this process:
// identical calls arriving together each found no open request and made
// one each (10 calls, 2 to 5 pending duplicates in front of approvers).
// The lock is held only between a look-up that found nothing and the
// creation; nothing waits for a decision under it. Identical calls on
// other instances can still race (the store has no uniqueness for it).
type identicalLocks struct {
	mu sync.Mutex
	m  map[identicalKey]*identicalLock
}

type identicalLock struct {
	sem  chan struct{} // capacity 1: held while it holds a value
	refs int           // lockers holding or waiting; the entry goes at 0
}

// lock takes k's lock, or fails when ctx ends first. unlock releases it.
func (l *identicalLocks) lock(ctx context.Context, k identicalKey) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[identicalKey]*identicalLock{}
	}
	e := l.m[k]
	if e == nil {
		e = &identicalLock{sem: make(chan struct{}, 1)}
		l.m[k] = e
	}
	e.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.m, k)
		}
		l.mu.Unlock()
	}
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("waiting for an identical call: %w", context.Cause(ctx))
	}
}

// sharesIdentical reports whether c, under dec, makes a request that
// identical calls share rather than one each: retry mode (and a multi
// round-trip caller, which the gate answers in retry mode), not a task.
// Two live held calls never share one approval.
func sharesIdentical(c Call, dec policy.Decision) bool {
	return !c.Task && (c.Defer || dec.Approval.Mode == policy.ModeRetry)
}
