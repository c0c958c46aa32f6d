package procs

import (
	"math"
	"runtime/metrics"
	"time"
)

// schedLatencies is the runtime's distribution of the time goroutines
// spent runnable before they ran.
const schedLatencies = "/sched/latencies:seconds"

// trackEvery is how many of a goroutine's schedulings the runtime
// tracks per one it records in schedLatencies (runtime.gTrackingPeriod,
// Go 1.17 to 1.26 at least): the sum is scaled by it.
const trackEvery = 8

// SchedWait returns a func reporting the time the process's goroutines
// spent runnable but not running, summed since the process started: an
// estimate from the runtime's /sched/latencies:seconds, which records one
// in trackEvery of each goroutine's schedulings, each wait rounded down
// to its bucket's lower bound (at most a fifth under). Only its changes
// mean anything. It returns zero when the runtime does not keep the
// distribution. The func is for one goroutine (Follow's); each call
// reads the runtime's metrics without allocating.
func SchedWait() func() time.Duration {
	s := []metrics.Sample{{Name: schedLatencies}}
	return func() time.Duration {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindFloat64Histogram {
			return 0
		}
		return histSum(s[0].Value.Float64Histogram()) * trackEvery
	}
}

// histSum is the sum of h's values taken at their bucket's lower bound
// (a negative or infinite bound counts as zero).
func histSum(h *metrics.Float64Histogram) time.Duration {
	var sum float64
	for i, n := range h.Counts {
		lo := h.Buckets[i]
		if n == 0 || lo <= 0 || math.IsInf(lo, 0) {
			continue
		}
		sum += float64(n) * lo
	}
	return time.Duration(sum * float64(time.Second))
}
