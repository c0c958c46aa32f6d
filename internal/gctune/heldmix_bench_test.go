package gctune

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// heldCall is a stand-in for one held call's live memory: ≈ 6 KB in a
// dozen pointer-linked pieces, as the heap profiles of 10,000 held calls
// show (docs/performance.md, "rss26": 6.2–6.4 KB per call in 100–850 B
// pieces).
type heldCall struct {
	parts [12]*heldPart
	name  string
}

type heldPart struct {
	next *heldPart
	buf  []byte
	_    [6]*int // pointer words the collector scans
}

// heldMixSink keeps the held calls reachable.
var heldMixSink []*heldCall

// allowedSink keeps the last allowed call's garbage from being optimized
// away.
var allowedSink []*heldPart

// BenchmarkHeldHeapAllowedCalls (branch gc28) measures what GOGC costs a
// proxy that serves allowed calls while it holds many calls: a live heap
// of heldMiB in ≈ 6 KB pointer-linked held calls, and per op the garbage
// of one allowed call (the SDK decoder's 32 KiB buffer and ≈ 8 KB in small
// pointer-full objects). GOGC 28 is what PercentFor sets at ≈ 74.7 MiB of
// live heap (the goal held at HeldGoal), 50 the floor before rss26 (1.5×
// live), 100 Go's default. It reports the process's CPU and the
// collector's (without idle mark workers) per op, and collections per
// 1,000 ops. Interleave the modes with -count:
// go test -run '^$' -bench HeldHeapAllowedCalls -benchtime 200000x -count 3 ./internal/gctune/
func BenchmarkHeldHeapAllowedCalls(b *testing.B) {
	const heldMiB = 75
	for _, percent := range []int{28, 50, 100} {
		b.Run(fmt.Sprintf("gogc=%d", percent), func(b *testing.B) {
			oldPercent := debug.SetGCPercent(100)
			oldLimit := debug.SetMemoryLimit(math.MaxInt64)
			defer func() {
				heldMixSink, allowedSink = nil, nil
				debug.SetGCPercent(oldPercent)
				debug.SetMemoryLimit(oldLimit)
			}()
			heldMixSink = nil
			for range heldMiB << 20 / 6300 {
				c := &heldCall{name: "held"}
				for i := range c.parts {
					c.parts[i] = &heldPart{buf: make([]byte, 400)}
					if i > 0 {
						c.parts[i].next = c.parts[i-1]
					}
				}
				heldMixSink = append(heldMixSink, c)
			}
			runtime.GC()
			debug.SetGCPercent(percent)
			cpu0, gc0 := gcCPU()
			proc0 := processCPU()
			b.ResetTimer()
			for range b.N {
				buf := make([]byte, 32<<10)
				parts := make([]*heldPart, 0, 64)
				for i := range 64 {
					p := &heldPart{buf: buf[i*64 : i*64+64]}
					if i > 0 {
						p.next = parts[i-1]
					}
					parts = append(parts, p)
				}
				allowedSink = parts
			}
			b.StopTimer()
			cpu1, gc1 := gcCPU()
			proc1 := processCPU()
			b.ReportMetric(float64((proc1-proc0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric((cpu1-cpu0)*1e9/float64(b.N), "gc-cpu-ns/op")
			b.ReportMetric(float64(gc1-gc0)*1000/float64(b.N), "gcs/1000op")
		})
	}
}
