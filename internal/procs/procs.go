// Package procs runs the Go scheduler with one P while toolgate serves at
// most one call at a time, and with the runtime's default otherwise
// (issue 13, branch hotpath7). With two Ps, every goroutine a running
// goroutine wakes also wakes an idle thread to look for work, which at
// one call at a time finds none and sleeps again: at C=1 that was most of
// toolgate's thread sleeps per call (docs/performance.md). With one P there
// is no idle P to start; with many calls in flight the default's second P
// is worth having (GOMAXPROCS=1 cost C=16 a quarter of its calls/s).
//
// [Follow] looks at the most calls in flight since its last look, every
// [Every]: after [Calm] looks in a row with at most one it sets one P, at
// the first look with more it sets the default back. Each change stops the
// world briefly, so it happens at most once per Calm×Every going down.
// When the environment sets GOMAXPROCS, or the default is one P already,
// Follow does nothing.
package procs

import (
	"context"
	"sync/atomic"
	"time"
)

// Defaults of Follow.
const (
	Every = 100 * time.Millisecond
	Calm  = 10
)

// Load counts the calls in flight and the most since the last look. Its
// methods are safe for concurrent use; a nil *Load counts nothing.
type Load struct {
	cur, peak atomic.Int64
}

// Begin records a call that starts; End must follow.
func (l *Load) Begin() {
	if l == nil {
		return
	}
	n := l.cur.Add(1)
	for {
		p := l.peak.Load()
		if n <= p || l.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// End records the end of a call that Begin recorded.
func (l *Load) End() {
	if l != nil {
		l.cur.Add(-1)
	}
}

// InFlight returns the calls in flight now and the most since Follow
// last looked.
func (l *Load) InFlight() (now, most int64) { return l.cur.Load(), l.peak.Load() }

// take returns the most calls in flight since the last take.
func (l *Load) take() int64 { return l.peak.Swap(l.cur.Load()) }

// Follow sets the number of Ps with set from l until ctx ends, and then
// sets def back. def is the default number (runtime.GOMAXPROCS(0) at
// start, when the environment does not set it); with def ≤ 1 it returns
// at once. set(1) is to run one P, set(def) the runtime's default (serve:
// runtime.GOMAXPROCS(1) and runtime.SetDefaultGOMAXPROCS, which also
// resumes the runtime's updates of it from a changed CPU limit).
func Follow(ctx context.Context, l *Load, def int, set func(int) int) {
	if def <= 1 {
		return
	}
	t := time.NewTicker(Every)
	defer t.Stop()
	cur, calm := def, 0
	defer func() {
		if cur != def {
			set(def)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.take() > 1 {
			calm = 0
			if cur != def {
				set(def)
				cur = def
			}
			continue
		}
		if calm++; calm >= Calm && cur != 1 {
			set(1)
			cur = 1
		}
	}
}
