// Package gctune sets the garbage collector's defaults for a proxy: much
// short-lived garbage per call (each JSON-RPC decode in the MCP Go SDK
// allocates a 32 KiB buffer; docs/performance.md) and, usually, a small
// live heap that grows with the calls held for approval.
//
// Go's default (GOGC=100, no memory limit) collects every time the heap has
// grown by its live size, which for a proxy with a few MB of live data means
// a collection every few dozen calls. toolgate instead lets the heap grow
// by about [Headroom] past the live heap, between GOGC=100 and GOGC=400
// (400 while the live heap is under 16 MiB, 100 from 64 MiB on; [Tune]
// follows the live heap), so the collector runs a quarter as often while
// the proxy is idle-ish and the heap does not grow to five times a large
// live heap (ten thousand held calls). A fixed GOGC=400 with a fixed soft
// memory limit of 512 MiB, the previous default, made the collector run
// without pause once held calls needed more than the limit (measured in
// docs/performance.md). Inside a cgroup with a memory.max, toolgate sets a
// soft memory limit (GOMEMLIMIT) of three quarters of it. The environment
// variables GOGC and GOMEMLIMIT, when set, win (the runtime has read them
// already; Apply and Tune then leave that setting alone).
package gctune

import (
	"context"
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
	// MinGCPercent is the least Tune sets: Go's own default.
	MinGCPercent = 100
	// Headroom is how far (bytes) Tune lets the heap grow past the live heap
	// before a collection, within MinGCPercent and DefaultGCPercent.
	Headroom = 64 << 20
	// TuneEvery is how often serve's Tune looks at the live heap.
	TuneEvery = time.Second
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

// PercentFor is the GOGC that lets a heap with live bytes of live data grow
// by about Headroom before the next collection, within MinGCPercent and
// DefaultGCPercent.
func PercentFor(live uint64) int {
	if live == 0 {
		return DefaultGCPercent
	}
	return int(min(max(100*uint64(Headroom)/live, MinGCPercent), DefaultGCPercent))
}

// liveHeap is the runtime metric of the heap's live bytes as of the last
// collection.
const liveHeap = "/gc/heap/live:bytes"

// Tune follows the live heap every interval and sets GOGC to PercentFor
// it, until ctx ends. It does nothing when s's GOGC came from the
// environment. It runs on the caller's goroutine (serve runs it in its
// group).
func Tune(ctx context.Context, s Settings, every time.Duration) {
	sample := []metrics.Sample{{Name: liveHeap}}
	readLive := func() (uint64, bool) {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0, false // a runtime without the metric
		}
		return sample[0].Value.Uint64(), true
	}
	tune(ctx, s, every, readLive, func(p int) { debug.SetGCPercent(p) })
}

// tune is Tune with the live heap's reader and GOGC's setter given.
func tune(ctx context.Context, s Settings, every time.Duration, readLive func() (uint64, bool), setPercent func(int)) {
	if s.GCPercentSource != "default" {
		return
	}
	current := s.GCPercent
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		live, ok := readLive()
		if !ok {
			return // keep the start value
		}
		if p := PercentFor(live); p != current {
			setPercent(p)
			current = p
		}
	}
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
