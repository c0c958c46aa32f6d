package execpages

import (
	"context"
	"time"

	"toolgate/internal/cpuuse"
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
	// CollectBefore is how long before a quiet release WhenQuiet has the
	// heap collected (Activity.Collect), and how long after a later
	// collection it releases again: a collection shrinks the goroutines'
	// stacks, and each idle loop that next runs grows its stack back,
	// which reads the stack maps and unwinding tables (.gopclntab) of
	// every function on it and maps their pages (about 6 MB of the
	// executable, measured; docs/performance.md, "Idle memory after
	// calls: the heap"). Every idle loop runs at least every 10 s (the
	// health ping), so after CollectBefore they have.
	CollectBefore = 15 * time.Second
)

// Activity is what WhenQuiet watches.
type Activity struct {
	// Seen returns how many requests the process has seen so far
	// (procs.Load.Seen); only its changes count. Nil: none.
	Seen func() uint64
	// CPU returns the process's CPU time so far (user and system), or an
	// error when it cannot read it. A look whose reading failed, or whose
	// last one did, is busy: what the process used is not known
	// (cpuuse.Meter). Nil: not watched.
	CPU func() (time.Duration, error)
	// Collect, when not nil, collects the heap and returns its free pages
	// to the OS (debug.FreeOSMemory): WhenQuiet calls it once per quiet
	// period, CollectBefore before the release. Its own CPU is not
	// counted against QuietCPU.
	Collect func()
	// Collections returns how many collections have completed so far
	// (runtime/metrics /gc/cycles/total:gc-cycles). Nil: not watched.
	// A process that has collected once collects again every two minutes
	// (the runtime forces it), which maps the stack tables back (see
	// CollectBefore): while the process stays quiet, WhenQuiet releases
	// again CollectBefore after the look that saw a collection.
	Collections func() uint64
}

// WhenQuiet calls release first after it is called (the start-up's tail,
// StartupTail), and then again each time the process turns quiet: after
// it was busy (a request seen, or more than QuietCPU of a CPU used, or the
// CPU used not known, at a look), QuietAfter with no request seen and no
// more than QuietCPU of a CPU used at each look, looking every QuietLook.
// So it releases at most once per quiet period, and never while requests
// come. With
// act.Collect, it also has the heap collected once per quiet period,
// CollectBefore before that release; with act.Collections, while the
// process stays quiet, it releases again CollectBefore after each look
// that saw a collection (the runtime's forced ones, two minutes apart). It
// returns when ctx ends. The cost per request is whatever Seen's counter
// costs (an atomic add); the looks are a timer every QuietLook.
func WhenQuiet(ctx context.Context, first time.Duration, act Activity, release func()) {
	seen, cpu, gcs := act.Seen, act.CPU, act.Collections
	if seen == nil {
		seen = func() uint64 { return 0 }
	}
	if cpu == nil {
		cpu = func() (time.Duration, error) { return 0, nil }
	}
	if gcs == nil {
		gcs = func() uint64 { return 0 }
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
	lastSeen, meter := seen(), cpuuse.NewMeter(cpu)
	released, lastGC := gcs(), gcs() // collections as of the last release, and the last look
	busy := false                    // busy since the last release
	collected := false               // Collect called in this quiet period
	var calm time.Duration           // quiet this long since busy, or since a collection while quiet
	budget := time.Duration(QuietCPU * float64(QuietLook))
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s, g := seen(), gcs()
		used, known := meter.Since()
		switch {
		case s != lastSeen || !known || used > budget:
			busy, calm, collected = true, 0, false
		case busy:
			calm += QuietLook
		case g != lastGC:
			calm = 0 // a collection since the last look, while quiet
		case g != released:
			calm += QuietLook
		}
		lastSeen, lastGC = s, g
		if busy && !collected && act.Collect != nil && calm >= QuietAfter-CollectBefore {
			act.Collect()
			collected = true
			meter.Since() // the collection's own CPU is not the process's activity
		}
		switch {
		case busy && calm >= QuietAfter:
			release()
			busy, calm, collected, released = false, 0, false, gcs()
		case !busy && g != released && calm >= CollectBefore:
			// A collection while quiet (the runtime's, every two minutes).
			release()
			calm, released = 0, gcs()
		}
	}
}
