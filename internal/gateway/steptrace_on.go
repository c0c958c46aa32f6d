//go:build steptrace

package gateway

import (
	"sync"
	"time"
)

// The per-step trace of a lean call's in-path (docs/performance.md,
// stdio27): built only with -tags steptrace, for measuring at C=1 (one
// call at a time: the marks of one call are one row).

// stepCount is how many marks a row holds.
const stepCount = 32

var stepTrace struct {
	mu   sync.Mutex
	cur  [stepCount]int64
	rows [][stepCount]int64
}

// stepMark records the time of step i of the current call; step 0 starts
// a new row.
func stepMark(i int) {
	now := time.Now().UnixNano()
	stepTrace.mu.Lock()
	defer stepTrace.mu.Unlock()
	if i == 0 {
		if stepTrace.cur[0] != 0 {
			stepTrace.rows = append(stepTrace.rows, stepTrace.cur)
		}
		stepTrace.cur = [stepCount]int64{}
	}
	stepTrace.cur[i] = now
}

// stepRows returns the rows recorded so far and forgets them.
func stepRows() [][stepCount]int64 {
	stepTrace.mu.Lock()
	defer stepTrace.mu.Unlock()
	r := stepTrace.rows
	stepTrace.rows = nil
	stepTrace.cur = [stepCount]int64{}
	return r
}
