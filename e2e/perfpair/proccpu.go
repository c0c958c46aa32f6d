package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procCPUTicks is the CPU time (user + system, in clock ticks) that process
// pid and its threads, live and exited, have used: the 14th and 15th fields
// of /proc/PID/stat (proc(5)). Elsewhere than on Linux, or for a process that
// is gone, it is an error.
func procCPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command end", pid)
	}
	// After ") " the fields start at the third (state); utime is the 14th.
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var sum int64
	for _, x := range f[11:13] {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		sum += n
	}
	return sum, nil
}

// cpuSnapshot is procCPUTicks of each pid, -1 for one that cannot be read.
func cpuSnapshot(pids []int) []int64 {
	out := make([]int64, len(pids))
	for i, p := range pids {
		t, err := procCPUTicks(p)
		if err != nil {
			t = -1
		}
		out[i] = t
	}
	return out
}

// withProcessSplit returns loadgen's JSON line with "proc_cpu_us_per_call_each"
// added: loadgen's proc_cpu_us_per_call (the measured phase's CPU of all the
// row's processes) split between the processes in proportion to their CPU
// over the whole loadgen run (before and after are cpuSnapshot around it),
// in the order of the row's pids (toolgate first, then its upstream). Where
// a process could not be read or nothing was used, the line is returned as
// it is.
func withProcessSplit(line []byte, before, after []int64) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("loadgen output: %w", err)
	}
	var total float64
	if raw, ok := m["proc_cpu_us_per_call"]; ok {
		if err := json.Unmarshal(raw, &total); err != nil {
			return nil, fmt.Errorf("loadgen proc_cpu_us_per_call: %w", err)
		}
	}
	var sum int64
	d := make([]int64, len(before))
	for i := range before {
		if before[i] < 0 || after[i] < 0 {
			return line, nil
		}
		d[i] = after[i] - before[i]
		sum += d[i]
	}
	if sum <= 0 || total <= 0 {
		return line, nil
	}
	each := make([]float64, len(d))
	for i, x := range d {
		each[i] = total * float64(x) / float64(sum)
	}
	raw, err := json.Marshal(each)
	if err != nil {
		return nil, err
	}
	m["proc_cpu_us_per_call_each"] = raw
	return json.Marshal(m)
}
