package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// hwmMB returns the peak resident set (VmHWM, MiB) of process pid so far:
// in BenchmarkHeldCalls, read at "held", the admission burst's peak
// (goroutine stacks of the connections in flight and the heap under its
// goal; docs/performance.md, "gc28").
func hwmMB(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb / 1024
		}
	}
	tb.Fatalf("no VmHWM for %d", pid)
	return 0
}
