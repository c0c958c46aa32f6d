// Package procs runs the Go scheduler with one P while toolgate uses
// little of a CPU, and with the runtime's default otherwise (issue 13,
// branches hotpath7 and procs46). With two Ps, every goroutine a running
// goroutine wakes also wakes an idle thread to look for work, which
// mostly finds none and sleeps again: at C=1 that was most of toolgate's
// thread sleeps per call, and at C=16 with an HTTP upstream the idle
// search and the wake-ups were a tenth of toolgate's CPU per call
// (docs/performance.md). With one P there is no idle P to start; when
// the work needs more than one P can give, the default's second P is
// worth having.
//
// [Follow] looks at the process's CPU time every [Every]: after [Calm]
// looks in a row that were not busy it sets one P, and at the first busy
// look it sets the default back. A look is busy on two bars: over [Busy]
// of a CPU used whatever the calls in flight (approving held calls, the
// audit trail, a burst of anything), or over [Crowded] with two or more
// calls in flight since the last look. Under Crowded the calls in flight
// do not count (branch procs46: at C=16 and C=64 one P served as many
// calls or more, with less CPU, while toolgate used about a quarter of a
// CPU); between the bars they do (branch procs46b: approve-all, whose
// approved calls come back into the calls in flight, runs at 0.4–0.65 of
// a CPU and was slower on one P). A look whose CPU reading failed, or
// whose last one did, is busy: what the process used is not known, and
// the default is the runtime's own setting (branch sched47; a failed
// reading read as zero kept the process on one P at any load). Where the
// CPU time is not measured (cpu nil) the calls in flight alone decide: a
// look that saw two or more in flight is busy. A burst from one P counts
// at the first or second look after it (within 2×Every): the share of the
// first is over the whole Every, the quiet part before the burst
// included (branch sched47 measured 98–261 ms and no calls lost at C=16).
// Each change stops the world briefly, so it happens at most once per
// Calm×Every going down. When the environment sets GOMAXPROCS, or the
// default is one P already, Follow does nothing.
package procs

import (
	"context"
	"sync/atomic"
	"time"

	"toolgate/internal/cpuuse"
)

// Defaults of Follow.
const (
	Every = 100 * time.Millisecond
	Calm  = 10
	// Busy is the share of one CPU (of the time between two looks) the
	// process may use and still run on one P, whatever the calls in
	// flight.
	Busy = 0.7
	// Crowded is the share of one CPU under which the process runs on
	// one P however many calls are in flight; over it, a look that saw
	// two or more calls in flight is busy.
	Crowded = 0.4
)

// Load counts the calls in flight and the most since the last look (for
// Follow where the process's CPU time is not measured), and the requests
// seen so far (for execpages.WhenQuiet: a process that saw
// none for a while is quiet). Its methods are safe for concurrent use; a
// nil *Load counts nothing.
type Load struct {
	cur, peak atomic.Int64
	seen      atomic.Uint64
}

// Begin records a call that starts; End must follow.
func (l *Load) Begin() {
	if l == nil {
		return
	}
	l.seen.Add(1)
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

// Saw records a request that is not counted in flight (a stdio agent's
// message): Seen counts it, Follow does not.
func (l *Load) Saw() {
	if l != nil {
		l.seen.Add(1)
	}
}

// Seen returns how many requests Begin and Saw recorded so far; only its
// changes mean anything. A nil *Load has seen none.
func (l *Load) Seen() uint64 {
	if l == nil {
		return 0
	}
	return l.seen.Load()
}

// InFlight returns the calls in flight now and the most since the last
// look (Follow's or Look's).
func (l *Load) InFlight() (now, most int64) { return l.cur.Load(), l.peak.Load() }

// Look returns the most calls in flight since the last look and begins a
// new one from the calls in flight now. Follow looks every Every; a
// second looker (a test) shares Follow's looks.
func (l *Load) Look() int64 { return l.peak.Swap(l.cur.Load()) }

// Follow sets the number of Ps with set from the process's CPU time
// (cpu) until ctx ends, and then sets def back. def is the default number
// (runtime.GOMAXPROCS(0) at start, when the environment does not set it);
// with def ≤ 1 it returns at once. set(1) is to run one P, set(def) the
// runtime's default (serve: runtime.GOMAXPROCS(1) and
// runtime.SetDefaultGOMAXPROCS, which also resumes the runtime's updates
// of it from a changed CPU limit).
//
// cpu returns the process's CPU time so far (user and system; serve:
// getrusage), or an error when it cannot read it. A look is busy when the
// process used more than Busy of a CPU since the last one, or more than
// Crowded with two or more calls in flight in l since the last one; and
// when cpu failed at this look or at the one before it (at the start, for
// the first look), since then the share is not known. With cpu nil
// (not measured on this platform) a look is busy when l saw two or more
// calls in flight since the last one. Follow looks at l every Every
// either way (Load.Look).
func Follow(ctx context.Context, l *Load, def int, set func(int), cpu func() (time.Duration, error)) {
	if def <= 1 {
		return
	}
	t := time.NewTicker(Every)
	defer t.Stop()
	cur, calm := def, 0
	var meter *cpuuse.Meter
	if cpu != nil {
		meter = cpuuse.NewMeter(cpu)
	}
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
		most := l.Look()
		var busy bool
		if meter != nil {
			used, known := meter.Since()
			share := float64(used) / float64(Every)
			busy = !known || share > Busy || share > Crowded && most > 1
		} else {
			busy = most > 1
		}
		if busy {
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
