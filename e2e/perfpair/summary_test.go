package main

import (
	"strings"
	"testing"
)

func TestRoundOrderReversesEveryOtherRound(t *testing.T) {
	ts := []target{{label: "direct"}, {label: "a"}, {label: "b"}}
	got := func(r int) string {
		var s []string
		for _, t := range roundOrder(ts, r) {
			s = append(s, t.label)
		}
		return strings.Join(s, ",")
	}
	if g := got(1); g != "direct,a,b" {
		t.Errorf("round 1: %s", g)
	}
	if g := got(2); g != "b,a,direct" {
		t.Errorf("round 2: %s", g)
	}
	if g := got(3); g != "direct,a,b" {
		t.Errorf("round 3: %s", g)
	}
	if ts[0].label != "direct" {
		t.Errorf("roundOrder changed its argument: %v", ts)
	}
}

func TestSummariseRatiosPerRound(t *testing.T) {
	rows := []result{
		{Label: "direct", Concurrency: 1, Note: "round=1", CallsPerS: 1000, P50us: 500, CPUPerCall: 300},
		{Label: "main", Concurrency: 1, Note: "round=1", CallsPerS: 800, P50us: 600, CPUPerCall: 400},
		{Label: "new", Concurrency: 1, Note: "round=1", CallsPerS: 900, P50us: 550, CPUPerCall: 300},
		{Label: "direct", Concurrency: 1, Note: "round=2", CallsPerS: 500, P50us: 900, CPUPerCall: 300},
		{Label: "main", Concurrency: 1, Note: "round=2", CallsPerS: 250, P50us: 1000, CPUPerCall: 500},
		{Label: "new", Concurrency: 1, Note: "round=2", CallsPerS: 500, P50us: 1100, CPUPerCall: 250},
		{Label: "direct", Concurrency: 16, Note: "round=1", CallsPerS: 3000, Errors: 2},
	}
	var b strings.Builder
	if err := summarise(&b, rows, []string{"direct", "main", "new"}, nil, []int{1, 16}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"warning: 2 failed calls",
		"C=1, 2 rounds",
		// main: 0.80 and 0.50 of direct, median 0.65, p50 +100 both rounds.
		"| main | 525 | 800 | 450 | 0.80 0.50 | 0.65 | +100 |  |  |",
		// new against direct 0.90 1.00; against main calls 1.12 2.00, CPU 0.75 0.50.
		"| new | 700 | 825 | 275 | 0.90 1.00 | 0.95 | +125 | 1.12 2.00 | 0.75 0.50 |",
		"C=16, 1 rounds",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if g := median(c.in); g != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, g, c.want)
		}
	}
}
