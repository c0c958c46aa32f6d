package execpages

import (
	"context"
	"time"
)

// When a process counts as quiet (WhenQuiet).
const (
	// QuietAfter is how long a process must have seen no request, and used
	// next to no CPU, before WhenQuiet releases again. An agent's calls come
	// in bursts a few seconds apart (the model thinks between them); 30 s
	// without one is a pause, and releasing at the start of it costs the
	// next call about 150 minor faults (≈ 19 µs of system CPU each on the
	// measuring VM: a few milliseconds once), against about 8 MB of RSS for
	// the rest of the pause (docs/performance.md, "Idle memory after
	// calls").
	QuietAfter = 30 * time.Second
	// QuietLook is how often WhenQuiet looks at the process's activity.
	QuietLook = 5 * time.Second
	// QuietCPU is the most CPU, as a share of one CPU over a look, that a
	// quiet process uses: an idle gateway's loops (polls, sweeps, health
	// checks) use 0.4–0.5 % (BenchmarkIdleMemory's quiet-cpu-%); work no
	// request counts (approving held calls, a burst of anything) uses
	// more.
	QuietCPU = 0.02
)

// Activity is what WhenQuiet watches.
type Activity struct {
	// Seen returns how many requests the process has seen so far
	// (procs.Load.Seen); only its changes count. Nil: none.
	Seen func() uint64
	// CPU returns the process's CPU time so far. Nil: not watched.
	CPU func() time.Duration
}

// WhenQuiet calls release first after it is called (the start-up's tail,
// StartupTail), and then again each time the process turns quiet: after
// it was busy (a request seen, or more than QuietCPU of a CPU used, at a
// look), QuietAfter with no request seen and no more than QuietCPU of a
// CPU used at each look, looking every QuietLook. So it releases at most
// once per quiet period, and never while requests come. It returns when
// ctx ends. The cost per request is whatever Seen's counter costs (an
// atomic add); the looks are a timer every QuietLook.
func WhenQuiet(ctx context.Context, first time.Duration, act Activity, release func()) {
	seen, cpu := act.Seen, act.CPU
	if seen == nil {
		seen = func() uint64 { return 0 }
	}
	if cpu == nil {
		cpu = func() time.Duration { return 0 }
	}
	t := time.NewTimer(first)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	release()

	tick := time.NewTicker(QuietLook)
	defer tick.Stop()
	lastSeen, lastCPU := seen(), cpu()
	busy := false          // busy since the last release
	var calm time.Duration // quiet this long since busy
	budget := time.Duration(QuietCPU * float64(QuietLook))
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s, c := seen(), cpu()
		if s != lastSeen || c-lastCPU > budget {
			busy, calm = true, 0
		} else if busy {
			calm += QuietLook
		}
		lastSeen, lastCPU = s, c
		if busy && calm >= QuietAfter {
			release()
			busy, calm = false, 0
		}
	}
}
