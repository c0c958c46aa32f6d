// Package gctune sets the garbage collector's defaults for a proxy: much
// short-lived garbage per call (each JSON-RPC decode in the MCP Go SDK
// allocates a 32 KiB buffer; docs/performance.md) and, usually, a small
// live heap that grows with the calls held for approval.
//
// Go's default (GOGC=100, no memory limit) collects every time the heap has
// grown by its live size, which for a proxy with a few MB of live data means
// a collection every few dozen calls. toolgate instead lets the heap grow
// by about [Headroom] past the live heap, at most GOGC=400 (400 while the
// live heap is under 16 MiB; past 32 MiB the goal stays at [HeldGoal],
// 96 MiB, until 1.5× the live heap less [HeldTrim] is more than that, from
// about 75 MiB of live heap on: [PercentFor], [GoalFor]; [Tune] follows the
// live heap, and counts the goroutine stacks and globals the runtime adds
// to its goal, so that a burst's stacks do not raise it: [PercentForScan]), so
// the collector runs a quarter as often while the proxy is idle-ish and the heap does not grow
// to five times, or twice, a large live heap (ten thousand held calls). A fixed GOGC=400 with a fixed soft
// memory limit of 512 MiB, the previous default, made the collector run
// without pause once held calls needed more than the limit (measured in
// docs/performance.md). Inside a cgroup with a memory.max, toolgate sets a
// soft memory limit (GOMEMLIMIT) of three quarters of it.
//
// A burst of admissions (thousands of calls held at once) leaves hundreds
// of MB of freed heap pages that the runtime's scavenger returns to the OS
// slowly, and only down to about 1.1× the GC goal. [Tune] therefore also
// sets a soft memory limit that follows GOGC's own goal ([LimitFor]): never
// tighter than that goal plus the runtime's other memory, so it adds no
// collection, but low enough that the allocator returns the free heap above
// it as it next takes a span, during the burst rather than after it. While
// the process allocates fast [Tune] looks every [TuneFast] instead of every
// [TuneEvery], so that GOGC and the limit follow a burst of a few seconds.
// Once the process is quiet it returns what free heap is left at once
// ([ShouldRelease]), and so it does at a burst's end, when the goroutine
// stacks of thousands of connections in flight are gone ([BurstEnded]).
// Between its looks a hook on each completed collection ([GCCycles]) makes
// it look at once when the live heap grew by more than [JumpAbove] since
// the last look, so that a live heap that jumps right after a quiet look
// (its limit is tight: [QuietLimitFor]) does not run the collector back to
// back until the next one, and when a burst's stacks are gone.
//
// The environment variables GOGC and GOMEMLIMIT, when set, win (the
// runtime has read them already; Apply and Tune then leave that setting
// alone, and with GOGC set Tune changes nothing: no limit, no collections
// forced to release memory).
package gctune

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// Defaults used when the environment does not set GOGC.
const (
	// DefaultGCPercent is GOGC while the live heap is small, and the most
	// Tune sets.
	DefaultGCPercent = 400
	// MinGCPercent is half of Go's own default: the goal grows by
	// 1 + MinGCPercent/100 bytes per live byte past HeldGoal (PercentFor),
	// and GOGC approaches it for large live heaps. At Go's 100 the heap of
	// 10,000 held calls on Postgres grew to twice its live size, 150–200
	// MB, right after the burst (docs/performance.md, "heldpeak2").
	MinGCPercent = 50
	// HeldTrim is what PercentFor takes off 1.5× the live heap past
	// HeldGoal: the goal stays at HeldGoal until 1.5 × live − HeldTrim is
	// more (≈ 74.7 MiB live), so that the batch work in flight at the end
	// of a burst of held calls (the audit trail's catch-up, the last
	// admissions, a reviewer's list: 10–13 MiB on ≈ 60 MiB of held
	// calls) does not raise the goal by half of itself (docs/performance.md,
	// "rss26").
	HeldTrim = 16 << 20
	// Headroom is how far (bytes) Tune lets the heap grow past the live heap
	// before a collection while the live heap is at most HeldGoal −
	// Headroom (32 MiB); past it the goal is HeldGoal (PercentFor).
	Headroom = 64 << 20
	// HeldGoal is the most the heap goal (live heap plus headroom) grows
	// to while the live heap is between 32 and ≈ 74.7 MiB, where 1.5 ×
	// live − HeldTrim takes over: the live heap of thousands of held calls
	// (5 KB each), whose burst ends anywhere between two collections, so
	// that the heap in use right after it is at most about this much
	// (docs/performance.md, "heldpeak3").
	HeldGoal = 96 << 20
	// TuneEvery is how often serve's Tune looks at the live heap.
	TuneEvery = time.Second
	// TuneFast is how often Tune looks while the process allocates at
	// least FastAbove bytes per second (a burst).
	TuneFast = 200 * time.Millisecond
	// FastAbove is the allocation rate (bytes per second) from which Tune
	// looks every TuneFast: well above an idle or lightly used proxy's,
	// well below a burst of admissions' (hundreds of MB/s).
	FastAbove = 32 << 20
	// QuietBelow is the allocation rate (bytes per second) under which
	// Tune sets the quiet limit (QuietLimitFor): at most one collection
	// per LimitSlack/QuietBelow (16 s) more than GOGC's.
	QuietBelow = 1 << 20
)

// Soft memory limit: see LimitFor.
const (
	// LimitSlack is what LimitFor adds to GOGC's goal and the runtime's
	// other memory: room for the goal's and the other memory's growth
	// between two looks, and the pacer's own headroom under a limit.
	LimitSlack = 16 << 20
	// limitStep: Tune sets a new limit only when it moved by more.
	limitStep = 1 << 20
	// JumpAbove is how much the live heap must grow (bytes) between two
	// looks for a completed collection to make Tune look before its timer:
	// half of LimitSlack, so that a live heap that jumps past the quiet
	// limit (live + 1/32 + other + LimitSlack) is seen one or two
	// collections later, while a heap that grows slowly (held calls,
	// 5 KB each) waits for the timed looks as before.
	JumpAbove = LimitSlack / 2
)

// CgroupMemoryMax is where cgroup v2 publishes the memory limit of the
// process's cgroup (as seen from inside a container).
const CgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// Settings is what Apply decided. A Source is "env" (the variable was set
// and the runtime's own value stands), "default" (toolgate set it) or, for
// the memory limit, "none" (no variable, no cgroup limit: no limit).
type Settings struct {
	GCPercent         int    // GOGC; -1 is off. Meaningful only when GCPercentSource is "default".
	GCPercentSource   string // "env" or "default"
	MemoryLimit       int64  // bytes. Meaningful only when MemoryLimitSource is "default".
	MemoryLimitSource string // "env", "default" or "none"
}

// Decide returns the settings for an environment (getenv) and a cgroup
// memory limit in bytes (cgroupMax; 0 when there is none), without applying
// them.
func Decide(getenv func(string) string, cgroupMax int64) Settings {
	s := Settings{GCPercentSource: "env", MemoryLimitSource: "env"}
	if getenv("GOGC") == "" {
		s.GCPercent, s.GCPercentSource = DefaultGCPercent, "default"
	}
	if getenv("GOMEMLIMIT") == "" {
		s.MemoryLimitSource = "none"
		if cgroupMax > 0 {
			s.MemoryLimit, s.MemoryLimitSource = cgroupMax/4*3, "default"
		}
	}
	return s
}

// Apply decides the settings from the process's environment (getenv, e.g.
// os.Getenv) and cgroup and applies those that are toolgate's defaults
// (debug.SetGCPercent, debug.SetMemoryLimit). Call it once, at startup.
func Apply(getenv func(string) string) Settings {
	s := Decide(getenv, readCgroupMax(CgroupMemoryMax))
	if s.GCPercentSource == "default" {
		debug.SetGCPercent(s.GCPercent)
	}
	if s.MemoryLimitSource == "default" {
		debug.SetMemoryLimit(s.MemoryLimit)
	}
	return s
}

// MemoryCeiling is the memory the process is meant to stay under, in
// bytes: the smaller of GOMEMLIMIT, when the environment (getenv) sets it
// (as the runtime parsed it; "off" is none), and the cgroup's memory.max
// (CgroupMemoryMax); 0 when there is neither. toolgate derives the agent
// listener's connection cap from it (cmd/toolgate/caps.go). The soft limit
// Apply sets under a cgroup is not a ceiling of its own: it is below the
// cgroup's by construction.
func MemoryCeiling(getenv func(string) string) int64 {
	return memoryCeiling(getenv("GOMEMLIMIT") != "", debug.SetMemoryLimit(-1), readCgroupMax(CgroupMemoryMax))
}

// memoryCeiling is MemoryCeiling's rule: envSet says GOMEMLIMIT is set,
// runtimeLimit is the runtime's soft limit (math.MaxInt64: none) and
// cgroupMax the cgroup's limit (0: none).
func memoryCeiling(envSet bool, runtimeLimit, cgroupMax int64) int64 {
	c := cgroupMax
	if envSet && runtimeLimit > 0 && runtimeLimit < math.MaxInt64 && (c == 0 || runtimeLimit < c) {
		c = runtimeLimit
	}
	return c
}

// PercentFor is the GOGC that lets a heap with live bytes of live data grow
// by Headroom before the next collection while live + Headroom is at most
// HeldGoal, and up to HeldGoal past it, at most DefaultGCPercent: 400 up
// to 16 MiB live, 200 at 32 MiB, 100 at 48 MiB, 50 at 64 MiB, 33 at
// 72 MiB. So the goal (live + headroom) grows with the live heap up to
// 96 MiB at 32 MiB live and stays there until 1.5× the live heap less
// HeldTrim is more, from about 74.7 MiB of live heap on (GOGC 28), and
// then grows by 1.5 bytes per live byte (GOGC 46 at 512 MiB, towards
// MinGCPercent): the heap of thousands of held calls is long-lived, and
// what it keeps free or unswept above the live heap is resident memory at
// the end of their burst (docs/performance.md, "heldpeak2", "heldpeak3":
// a goal of live + 64 MiB up to 128 MiB left 10,000 held calls at
// 150–217 MB RSS; "rss26": their burst ends with 10–13 MiB of batch work
// in flight on top of ≈ 60 MiB, and 1.5× that live heap was a goal of
// 108–112 MiB).
func PercentFor(live uint64) int {
	return PercentForScan(live, 0)
}

// GoalFor is the heap goal (bytes) toolgate aims at for live bytes of live
// heap (PercentFor): live + Headroom up to HeldGoal, HeldGoal until
// 1.5 × live − HeldTrim is more, then that. Live 0: 0 (no goal yet).
func GoalFor(live uint64) uint64 {
	if live == 0 {
		return 0
	}
	goal := live + Headroom
	if goal > HeldGoal {
		// live > HeldGoal − Headroom (32 MiB): 1.5 × live − HeldTrim > live
		goal = max(HeldGoal, live+live*MinGCPercent/100-HeldTrim)
	}
	return goal
}

// MinScanPercent is the least GOGC PercentForScan sets: the collector's
// work per allocated byte at most 4× Go's default (GOGC=100), however
// many goroutine stacks it scans (a burst of 10,000 connections in
// flight: up to 145 MB of stacks on 63–94 MiB of live heap).
const MinScanPercent = 25

// PercentForScan is the GOGC that makes the runtime's own heap goal,
// live + (live + scan) × GOGC/100, where scan is the goroutine stacks and
// globals the last collection scanned (bytes: Stats.Stacks + Stats.Globals),
// equal GoalFor(live), between MinScanPercent and DefaultGCPercent. The
// runtime counts the stacks in the goal, so a GOGC that follows the live
// heap alone let the goal of a burst of admissions (thousands of
// connections in flight, tens of MB of stacks) grow by GOGC/100 of the
// stacks as well: 118–187 MB instead of HeldGoal at N = 5,000 (203 on
// Postgres), and the heap grew to that goal (the soft limit follows it:
// LimitFor), which was free heap when the burst ended (docs/performance.md, "gc28"). Live 0:
// DefaultGCPercent.
func PercentForScan(live, scan uint64) int {
	if live == 0 {
		return DefaultGCPercent
	}
	p := 100 * (GoalFor(live) - live) / (live + scan)
	return int(max(min(p, DefaultGCPercent), MinScanPercent))
}

// Release policy: when to hand the heap's free pages back to the OS.
const (
	// ReleaseAbove is how much free heap (bytes; spans the collector freed
	// that the runtime has not yet returned to the OS) Tune tolerates
	// before it releases it: 16 MiB, so that the tens of MB a burst of
	// held calls leaves free are returned too (at 64 MiB, 40 MB of a
	// Postgres burst's free heap stayed resident; docs/performance.md).
	ReleaseAbove = 16 << 20
	// ReleaseQuiet: Tune releases the free heap only while the process
	// allocates so little that the free heap would last at least this long
	// at the current rate, so that it does not return pages the next
	// collection cycles reuse (a busy proxy's heap swings between its live
	// size and the GC goal).
	ReleaseQuiet = 60 * time.Second
	// ReleaseEvery is the least time between two releases. Each forces a
	// full collection and returns the free pages one run at a time
	// (debug.FreeOSMemory): measured at about 4.7 ms of CPU per MB
	// returned from a held-call heap, 0.4 s for 90 MB (docs/performance.md),
	// so bursts that come back every few seconds must not pay it each time.
	ReleaseEvery = 5 * time.Minute
)

// BurstStacks is the least peak of goroutine stacks (bytes scanned by a
// collection: Stats.Stacks) that makes its fall a burst's end
// (BurstEnded): thousands of connections in flight at once (a burst of
// 5,000 admissions peaked at 33–67 MB, one of 10,000 at up to 157 MB),
// far above a proxy serving allowed calls (1–3 MB).
const BurstStacks = 16 << 20

// BurstEnded reports whether goroutine stacks of stacks bytes (as of the
// last collection) mark the end of a burst whose stacks peaked at peak
// bytes, both counted from the stacks' low before the burst (burstWatch):
// the peak was at least BurstStacks and the stacks are down to an eighth
// of it or less. The goroutines of a burst of admissions exit as
// their calls are held (a held call keeps no goroutine), and their stacks
// become free heap, which the runtime's scavenger returns at about 1 % of
// the CPU (tens of seconds for tens of MB), on top of the room the burst's
// heap had under its goal: 58–156 MB free at the end of a burst of 5,000
// (docs/performance.md, "gc28"). Tune then returns it at once.
func BurstEnded(peak, stacks uint64) bool {
	return peak >= BurstStacks && stacks <= peak/8
}

// Stats is what Tune reads from the runtime on each look (runtime/metrics).
type Stats struct {
	Live   uint64 // the heap's live bytes as of the last collection (/gc/heap/live:bytes)
	Free   uint64 // free heap bytes not returned to the OS (/memory/classes/heap/free:bytes)
	Allocs uint64 // bytes allocated since the process started (/gc/heap/allocs:bytes)

	Stacks   uint64 // stack bytes the collector scans (/gc/scan/stack:bytes)
	Globals  uint64 // global bytes the collector scans (/gc/scan/globals:bytes)
	Goal     uint64 // the collector's current heap goal (/gc/heap/goal:bytes)
	Total    uint64 // all memory the runtime mapped (/memory/classes/total:bytes)
	Released uint64 // heap returned to the OS (/memory/classes/heap/released:bytes)
	Objects  uint64 // heap objects, live or not yet swept (/memory/classes/heap/objects:bytes)
}

// Runtime is what Tune changes: GOGC, the soft memory limit and the release
// of free heap.
type Runtime interface {
	SetGCPercent(percent int)
	SetMemoryLimit(bytes int64)
	FreeOSMemory()
}

// LimitFor is the soft memory limit Tune sets for st with GOGC at percent
// (unless the process is quiet: QuietLimitFor):
// GOGC's own heap goal (live + (live + stacks + globals) × percent/100, at
// least the collector's current goal), plus 1/32 of it (the pacer keeps 3 %
// of a limit's heap goal as headroom), plus the runtime's other memory
// (stacks, the unused part of spans, metadata: all it mapped but released,
// free and object bytes), plus LimitSlack; at most ceiling (a cgroup's
// limit; 0: none). So the limit adds no collection to GOGC's (the limit of
// 2026-12-02's heldmem3, live + 64 MiB, was tighter than GOGC's goal and
// cost 43 % more CPU per admission: docs/performance.md), and the free heap
// above it is what the allocator returns when it next takes a span.
// Before the first collection (Live 0) there is no goal to follow: no
// limit (math.MaxInt64, or the ceiling).
func LimitFor(st Stats, percent int, ceiling int64) int64 {
	noLimit := int64(math.MaxInt64)
	if ceiling > 0 {
		noLimit = ceiling
	}
	if st.Live == 0 {
		return noLimit
	}
	goal := max(st.Live+(st.Live+st.Stacks+st.Globals)*uint64(max(percent, 0))/100, st.Goal)
	var other uint64
	if heap := st.Released + st.Free + st.Objects; st.Total > heap {
		other = st.Total - heap
	}
	limit := goal + goal/32 + other + LimitSlack
	if limit >= uint64(noLimit) {
		return noLimit
	}
	return int64(limit) //nolint:gosec // limit < noLimit ≤ math.MaxInt64
}

// ShouldRelease reports whether Tune releases the free heap now: more than
// ReleaseAbove of it is free (bytes), the process allocated (bytes) over
// the last elapsed so little that the free heap would last ReleaseQuiet at
// that rate, and the previous release is at least ReleaseEvery ago
// (sinceRelease; a negative value means there was none).
//
// A burst of work (thousands of calls admitted and held at once) leaves the
// heap with hundreds of MB the collector freed but the runtime's scavenger
// returns to the OS only slowly (and only down to about 1.1× the GC goal):
// docs/performance.md, "Held calls at scale". Once the burst is over the
// pages are idle, and handing them back costs one collection.
func ShouldRelease(free, allocated uint64, elapsed, sinceRelease time.Duration) bool {
	if free <= ReleaseAbove || elapsed <= 0 {
		return false
	}
	// allocated/elapsed × ReleaseQuiet < free, in float64: the product
	// overflows uint64 for a few GB per second.
	quiet := float64(allocated)*ReleaseQuiet.Seconds() < float64(free)*elapsed.Seconds()
	return quiet && (sinceRelease < 0 || sinceRelease >= ReleaseEvery)
}

// Tune follows the runtime until ctx ends, looking every TuneEvery, or
// every TuneFast while the process allocates FastAbove bytes per second or
// more: it sets GOGC to PercentForScan the live heap and the stacks and
// globals the last collection scanned, the soft memory limit to
// LimitFor (unless GOMEMLIMIT is set; under a cgroup's limit, at most
// that), and releases the heap's free pages to the OS when ShouldRelease
// says so or a burst ended (BurstEnded, with more than ReleaseAbove free).
// It does nothing when s's GOGC came from the environment (an operator who
// sets GOGC manages the collector; a release forces a collection). It runs on the caller's goroutine (serve runs it in its
// group), and also looks as soon as a collection finds the live heap more
// than JumpAbove above the last look's or a burst's end (GCCycles).
func Tune(ctx context.Context, s Settings) {
	if s.GCPercentSource != "default" {
		return // no hook either: the operator manages the collector
	}
	tune(ctx, s, Intervals{Slow: TuneEvery, Fast: TuneFast}, GCCycles(ctx), newStatsReader(), goRuntime{})
}

// Intervals are tune's times between looks: Slow normally, Fast while the
// process allocates FastAbove bytes per second or more.
type Intervals struct{ Slow, Fast time.Duration }

// newStatsReader returns a reader of the runtime's Stats; it reports false
// when this Go lacks one of the metrics.
func newStatsReader() func() (Stats, bool) {
	sample := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
		{Name: "/gc/heap/goal:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}
	return func() (Stats, bool) {
		metrics.Read(sample)
		for _, m := range sample {
			if m.Value.Kind() != metrics.KindUint64 {
				return Stats{}, false
			}
		}
		v := func(i int) uint64 { return sample[i].Value.Uint64() }
		return Stats{
			Live: v(0), Free: v(1), Allocs: v(2),
			Stacks: v(3), Globals: v(4), Goal: v(5), Total: v(6), Released: v(7), Objects: v(8),
		}, true
	}
}

// goRuntime is Runtime on runtime/debug.
type goRuntime struct{}

func (goRuntime) SetGCPercent(p int)         { debug.SetGCPercent(p) }
func (goRuntime) SetMemoryLimit(bytes int64) { debug.SetMemoryLimit(bytes) }
func (goRuntime) FreeOSMemory()              { debug.FreeOSMemory() }

// QuietLimitFor is the soft memory limit Tune sets while the process is
// quiet (allocating under QuietBelow per second; holding calls idle): the
// live heap plus 1/32 of it, the runtime's other memory and LimitSlack,
// at most ceiling (0: none). Tighter than GOGC's goal, but at that rate
// the collections it adds are at most one per 16 s, and the free heap of
// the collection cycles before (the heap grew towards GOGC's goal) is
// returned to the OS by the runtime's scavenger without a forced
// collection, where the quiet release (ShouldRelease) needs more than
// ReleaseAbove free, a rate that would take ReleaseQuiet to reuse it,
// and at most one release per ReleaseEvery: after a burst whose free heap
// the limit already returned, 42–44 MB of a Postgres instance's idle heap
// stayed free (docs/performance.md, "heldpeak"). Live 0: no limit (or
// the ceiling).
func QuietLimitFor(st Stats, ceiling int64) int64 {
	q := st
	q.Goal = 0
	return LimitFor(q, 0, ceiling)
}

// tune is Tune with the intervals, the collection cycles' signal (cycles;
// nil: none), the runtime's reader and setters given.
//
// Between its timed looks tune also wakes at each signal on cycles (a
// completed collection: GCCycles) and looks early when the live heap grew by
// more than JumpAbove since the last look: a live heap that jumps (thousands
// of calls held at once, one large result) right after a quiet look outgrows
// the quiet limit, and until the limit follows it the collector runs back
// to back (docs/performance.md, "gcjump"). The early look is the look the
// next timer would have made, only sooner: the same GOGC and limit for the
// same stats. A collection that finds a burst's stacks gone (BurstEnded)
// makes tune look at once too, as a timed look, and release the free heap.
func tune(ctx context.Context, s Settings, iv Intervals, cycles <-chan struct{}, read func() (Stats, bool), rt Runtime) {
	if s.GCPercentSource != "default" {
		return
	}
	current := s.GCPercent
	setLimit := s.MemoryLimitSource != "env"
	var ceiling int64 // a cgroup's limit, which Apply set
	if s.MemoryLimitSource == "default" {
		ceiling = s.MemoryLimit
	}
	limit := ceiling // what is set now; 0: no limit
	t := time.NewTimer(iv.Slow)
	defer t.Stop()
	var (
		prev        Stats
		prevAt      time.Time // zero: no look yet
		lastRelease time.Time // zero: none yet
		bursts      burstWatch
	)
	for {
		var (
			st    Stats
			ok    bool
			early bool // woken by a collection: the live heap jumped
			ended bool // a burst's stacks are gone (BurstEnded)
		)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if st, ok = read(); !ok {
				return // keep the start values
			}
			ended = bursts.see(st.Stacks)
		case <-cycles:
			if st, ok = read(); !ok {
				return
			}
			if ended = bursts.see(st.Stacks); ended {
				break // a look now, as a timed one: the burst's end
			}
			if prevAt.IsZero() || st.Live <= prev.Live+JumpAbove {
				continue // the timer still runs
			}
			early = true
		}
		now := time.Now()
		if p := PercentForScan(st.Live, st.Stacks+st.Globals); p != current {
			rt.SetGCPercent(p)
			current = p
		}
		next := iv.Slow
		quiet := false
		if !prevAt.IsZero() {
			elapsed := now.Sub(prevAt)
			if early || rate(st.Allocs-prev.Allocs, elapsed) >= FastAbove {
				next = iv.Fast // an early look: the heap is growing fast
			}
			// An early look is never quiet: the live heap alone grew by
			// JumpAbove within one look's interval (its elapsed time may
			// be next to nothing, its rate then meaningless); nor is a
			// burst's end, which a collection can signal as soon.
			quiet = !early && !ended && rate(st.Allocs-prev.Allocs, elapsed) < QuietBelow
		}
		if setLimit {
			l := LimitFor(st, current, ceiling)
			if quiet {
				l = QuietLimitFor(st, ceiling)
			}
			if l-limit > limitStep || l-limit < -limitStep { // both ≥ 0: no overflow
				rt.SetMemoryLimit(l)
				limit = l
			}
		}
		if !prevAt.IsZero() {
			elapsed := now.Sub(prevAt)
			since := time.Duration(-1)
			if !lastRelease.IsZero() {
				since = now.Sub(lastRelease)
			}
			// A burst's end releases once per burst (burstWatch), apart
			// from the quiet release and its ReleaseEvery.
			quietRelease := ShouldRelease(st.Free, st.Allocs-prev.Allocs, elapsed, since)
			if quietRelease || (ended && st.Free > ReleaseAbove) {
				rt.FreeOSMemory()
				now = time.Now()
				if quietRelease {
					lastRelease = now
				}
				if st2, ok := read(); ok {
					st = st2 // the release's own collection allocates
				}
			}
		}
		prev, prevAt = st, now
		t.Reset(next) // Go ≥ 1.23: no stale tick after Reset
	}
}

// rate is allocated bytes over elapsed, per second (0 when no time
// passed).
func rate(allocated uint64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(allocated) / elapsed.Seconds()
}

// readCgroupMax returns the byte limit in a cgroup v2 memory.max file, or 0
// when the file is missing, says "max" (no limit) or cannot be parsed.
func readCgroupMax(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
