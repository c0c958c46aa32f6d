package telemetry

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// toolCallCounts gathers toolgate_tool_calls_total from reg as
// "server effect" → count.
func toolCallCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "toolgate_tool_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["server"]+" "+labels["effect"]] = m.GetCounter().GetValue()
		}
	}
	return got
}

// TestToolCallCountsEachSeries: every (server, effect) pair is its own
// series with its own count, whether ToolCall meets it for the first time
// or again (the cached counter, toolCallSeries), interleaved.
func TestToolCallCountsEachSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for _, c := range [][2]string{
		{"fs", "allow"}, {"fs", "allow"}, {"fs", "deny"}, {"git", "allow"},
		{"fs", "allow"}, {"git", "allow"}, {"fs", EffectGrant},
	} {
		m.ToolCall(c[0], c[1])
	}
	want := map[string]float64{"fs allow": 3, "fs deny": 1, "git allow": 2, "fs " + EffectGrant: 1}
	got := toolCallCounts(t, reg)
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %v, want %v", k, got[k], n)
		}
	}
}

// TestToolCallCachedSeriesAllocatesNothing: counting a call on a series
// counted before allocates nothing (the kept counter's look-up builds no
// key on the heap).
func TestToolCallCachedSeriesAllocatesNothing(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.ToolCall("fs", "allow")
	if n := testing.AllocsPerRun(100, func() { m.ToolCall("fs", "allow") }); n != 0 {
		t.Errorf("%v allocations per ToolCall on a counted series, want 0", n)
	}
}

// TestToolCallSeriesCacheBounded: past maxCachedToolCalls label pairs the
// cache stops growing and the pairs beyond are still counted.
func TestToolCallSeriesCacheBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	pairs := maxCachedToolCalls + 10
	for i := range pairs {
		m.ToolCall(fmt.Sprintf("s%d", i), "allow")
	}
	m.ToolCall("s0", "allow")                        // kept
	m.ToolCall(fmt.Sprintf("s%d", pairs-1), "allow") // past the bound
	if s := m.toolCallSeries.Load(); s == nil || len(*s) != maxCachedToolCalls {
		t.Fatalf("the cache holds %v pairs, want %d", s, maxCachedToolCalls)
	}
	got := toolCallCounts(t, reg)
	if len(got) != pairs {
		t.Fatalf("%d series, want %d", len(got), pairs)
	}
	last := fmt.Sprintf("s%d allow", pairs-1)
	if got["s0 allow"] != 2 || got[last] != 2 || got["s1 allow"] != 1 {
		t.Errorf("s0 %v, s1 %v, %s %v; want 2, 1 and 2", got["s0 allow"], got["s1 allow"], last, got[last])
	}
}

// BenchmarkToolCall is the gate's count of one decided call on a series
// counted before (every allowed call's), one goroutine and all Ps at once.
func BenchmarkToolCall(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry())
	m.ToolCall("echo", "allow")
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.ToolCall("echo", "allow")
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.ToolCall("echo", "allow")
			}
		})
	})
}
