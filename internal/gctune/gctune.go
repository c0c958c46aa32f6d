// Package gctune sets the garbage collector's defaults for a proxy: much
// short-lived garbage per call (each JSON-RPC decode in the MCP Go SDK
// allocates a 32 KiB buffer; docs/performance.md) and a small live heap.
//
// Go's default (GOGC=100, no memory limit) collects every time the heap has
// grown by its live size, which for a proxy with a few MB of live data means
// a collection every few dozen calls. toolgate instead starts with
// GOGC=400 and a soft memory limit (GOMEMLIMIT) of 512 MiB, or three
// quarters of the cgroup's memory.max when that is lower, so the collector
// runs a quarter as often while the heap stays bounded. The environment
// variables GOGC and GOMEMLIMIT, when set, win (the runtime has read them
// already; Apply then leaves that setting alone).
package gctune

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Defaults used when the environment does not set GOGC or GOMEMLIMIT.
const (
	DefaultGCPercent   = 400
	DefaultMemoryLimit = 512 << 20 // bytes
)

// CgroupMemoryMax is where cgroup v2 publishes the memory limit of the
// process's cgroup (as seen from inside a container).
const CgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// Settings is what Apply decided. A Source is "env" (the variable was set
// and the runtime's own value stands) or "default" (toolgate set it).
type Settings struct {
	GCPercent         int    // GOGC; -1 is off. Meaningful only when GCPercentSource is "default".
	GCPercentSource   string // "env" or "default"
	MemoryLimit       int64  // bytes. Meaningful only when MemoryLimitSource is "default".
	MemoryLimitSource string // "env" or "default"
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
		s.MemoryLimit, s.MemoryLimitSource = DefaultMemoryLimit, "default"
		if cgroupMax > 0 {
			s.MemoryLimit = min(s.MemoryLimit, cgroupMax/4*3)
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
