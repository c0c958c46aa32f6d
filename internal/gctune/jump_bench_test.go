package gctune

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// gcCPU returns the collector's CPU seconds so far, without the idle mark
// workers (which only use Ps nothing else wanted), and the number of
// completed collections.
func gcCPU() (float64, uint64) {
	s := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/idle:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(s)
	return s[0].Value.Float64() - s[1].Value.Float64(), s[2].Value.Uint64()
}

// jumpSink keeps the jump's live heap reachable.
var jumpSink [][]byte

// BenchmarkLiveHeapJump (branch attack15) measures what the collector
// costs when the live heap jumps by jumpMiB at once, e.g. thousands of
// calls held in one burst, right after Tune set its quiet soft limit
// (live heap + 1/32 + the runtime's other memory + LimitSlack, tighter
// than GOGC's goal): until Tune's next look (TuneEvery) the live heap
// passes the limit and the collector runs without pause (held back only
// by the runtime's GC CPU limiter, 50 %). "tuned" runs Tune as serve does
// and waits for its quiet limit; "go-default" is GOGC=100 without a limit;
// "flat-400" GOGC=400 without a limit or Tune. It reports the collector's
// CPU (without idle mark workers) and collections during the jump, the
// jump's wall time, and the soft limit when it began. Run each alone:
// go test -run '^$' -bench 'LiveHeapJump/tuned' -benchtime 1x ./internal/gctune/
func BenchmarkLiveHeapJump(b *testing.B) {
	const jumpMiB = 256
	for _, mode := range []string{"tuned", "go-default", "flat-400"} {
		b.Run(mode, func(b *testing.B) {
			oldPercent := debug.SetGCPercent(100)
			oldLimit := debug.SetMemoryLimit(math.MaxInt64)
			defer func() {
				debug.SetGCPercent(oldPercent)
				debug.SetMemoryLimit(oldLimit)
			}()
			for range b.N {
				b.StopTimer()
				jumpSink = nil
				runtime.GC()
				debug.FreeOSMemory()
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				switch mode {
				case "tuned":
					debug.SetGCPercent(DefaultGCPercent)
					wg.Go(func() {
						tune(ctx, Settings{GCPercent: DefaultGCPercent, GCPercentSource: "default", MemoryLimitSource: "none"},
							Intervals{Slow: TuneEvery, Fast: TuneFast}, GCCycles(ctx), newStatsReader(), goRuntime{})
					})
					// Tune's quiet look sets a limit (the process allocates
					// next to nothing meanwhile).
					for debug.SetMemoryLimit(-1) == math.MaxInt64 {
						time.Sleep(50 * time.Millisecond)
					}
				case "go-default":
					debug.SetGCPercent(100)
				case "flat-400":
					debug.SetGCPercent(400)
				}
				limit := debug.SetMemoryLimit(-1)
				cpu0, n0 := gcCPU()
				start := time.Now()
				b.StartTimer()
				for range jumpMiB * 16 {
					jumpSink = append(jumpSink, make([]byte, 64<<10))
				}
				b.StopTimer()
				wall := time.Since(start)
				cpu1, n1 := gcCPU()
				cancel()
				wg.Wait()
				b.ReportMetric(cpu1-cpu0, "gc-cpu-s")
				b.ReportMetric(float64(n1-n0), "gcs")
				b.ReportMetric(wall.Seconds(), "wall-s")
				if limit == math.MaxInt64 {
					limit = 0
				}
				b.ReportMetric(float64(limit>>20), "limit-MiB")
				jumpSink = nil
			}
		})
	}
}
