package main

import (
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestWithProcessSplit(t *testing.T) {
	line := []byte(`{"label":"new","calls":100,"proc_cpu_us_per_call":400,"client_cpu_s":0.05}`)
	got, err := withProcessSplit(line, []int64{10, 50}, []int64{40, 60})
	if err != nil {
		t.Fatal(err)
	}
	var r result
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	// 30 and 10 ticks: three quarters of 400 µs and one quarter.
	if len(r.CPUEach) != 2 || r.CPUEach[0] != 300 || r.CPUEach[1] != 100 {
		t.Errorf("split %v, want [300 100]", r.CPUEach)
	}
	if r.Label != "new" || r.CPUPerCall != 400 || r.ClientCPU != 0.05 {
		t.Errorf("the line's own fields changed: %s", got)
	}
	for _, c := range []struct{ before, after []int64 }{
		{[]int64{-1, 5}, []int64{3, 6}}, // a process not read
		{[]int64{5, 5}, []int64{5, 5}},  // nothing used
	} {
		got, err := withProcessSplit(line, c.before, c.after)
		if err != nil || string(got) != string(line) {
			t.Errorf("%v → %v: got %s, %v; want the line as it is", c.before, c.after, got, err)
		}
	}
	if _, err := withProcessSplit([]byte("not json"), nil, nil); err == nil {
		t.Error("a line that is not JSON: no error")
	}
}

func TestProcCPUTicksCountsThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/stat is Linux's")
	}
	before, err := procCPUTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the counter moves (clock ticks are 10 ms where USER_HZ is 100).
	x := 0
	for {
		for i := 0; i < 1e6; i++ {
			x += i
		}
		after, err := procCPUTicks(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
	}
	_ = x
	if _, err := procCPUTicks(-5); err == nil {
		t.Error("a pid that does not exist: no error")
	}
}

func TestSummariseProcessTable(t *testing.T) {
	rows := []result{
		{Label: "direct", Concurrency: 1, Note: "round=1", Calls: 1000, CallsPerS: 1000, CPUPerCall: 300, CPUEach: []float64{300}, ClientCPU: 0.4},
		{Label: "new", Concurrency: 1, Note: "round=1", Calls: 800, CallsPerS: 800, CPUPerCall: 700, CPUEach: []float64{420, 280}, ClientCPU: 0.24},
	}
	var b strings.Builder
	if err := summarise(&b, rows, []string{"direct", "new"}, nil, []int{1}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"CPU µs per call by process",
		"| direct | 300 |  | 400 |",
		"| new | 420 | 280 | 300 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	rows[0].CPUEach, rows[1].CPUEach = nil, nil
	if err := summarise(&b, rows, []string{"direct", "new"}, nil, []int{1}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "by process") {
		t.Errorf("no split in the results, yet a process table:\n%s", b.String())
	}
}
