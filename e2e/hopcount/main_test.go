package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trace is a hand-made `perf script -F comm,pid,tid,cpu,time,event,trace`
// text of two calls: loadgen (pid 300) → toolgate (pid 100, threads 100
// and 101) → its child (pid 200) and back, with the line shapes perf
// prints (a command with a space in it, an idle CPU's wake-up).
const trace = `
         loadgen   300/301   [000]  10.000001:   raw_syscalls:sys_enter: NR 1 (7, c000, 1c5, 0, 0, 0)
         loadgen   300/301   [000]  10.000002:       sched:sched_wakeup: comm=toolgate pid=100 prio=120 target_cpu=000
         loadgen   300/301   [000]  10.000003:    raw_syscalls:sys_exit: NR 1 = 453
         loadgen   300/301   [000]  10.000004:       sched:sched_switch: prev_comm=loadgen prev_pid=301 prev_prio=120 prev_state=S ==> next_comm=toolgate next_pid=100 next_prio=120
        toolgate   100/100   [000]  10.000005:   raw_syscalls:sys_enter: NR 0 (15, c000, 1000, 0, 0, 0)
        toolgate   100/100   [000]  10.000006:    raw_syscalls:sys_exit: NR 0 = 453
        toolgate   100/100   [000]  10.000007:   raw_syscalls:sys_enter: NR 1 (f, c000, cf, 0, 0, 0)
        toolgate   100/100   [000]  10.000008:       sched:sched_wakeup: comm=echoserver pid=200 prio=120 target_cpu=001
        toolgate   100/100   [000]  10.000009:    raw_syscalls:sys_exit: NR 1 = 207
        toolgate   100/100   [000]  10.000010:   raw_syscalls:sys_enter: NR 0 (15, c000, 1, 0, 0, 0)
        toolgate   100/100   [000]  10.000011:    raw_syscalls:sys_exit: NR 0 = -11
        toolgate   100/100   [000]  10.000012:   raw_syscalls:sys_enter: NR 281 (6, c000, 80, 0, 0, 0)
        toolgate   100/100   [000]  10.000013:    raw_syscalls:sys_exit: NR 281 = 0
        toolgate   100/100   [000]  10.000014:   raw_syscalls:sys_enter: NR 281 (6, c000, 80, 11, 0, 0)
        toolgate   100/100   [000]  10.000015:       sched:sched_switch: prev_comm=toolgate prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=npm ci next_pid=400 next_prio=120
      echoserver   200/200   [001]  10.000016:   raw_syscalls:sys_enter: NR 0 (0, c000, 5ff, 0, 0, 0)
      echoserver   200/200   [001]  10.000017:    raw_syscalls:sys_exit: NR 0 = 207
      echoserver   200/200   [001]  10.000018:   raw_syscalls:sys_enter: NR 202 (c0, 81, 1, 0, 0, 0)
      echoserver   200/200   [001]  10.000019:       sched:sched_wakeup: comm=echoserver pid=201 prio=120 target_cpu=001
      echoserver   200/200   [001]  10.000020:    raw_syscalls:sys_exit: NR 202 = 1
      echoserver   200/201   [001]  10.000021:   raw_syscalls:sys_enter: NR 1 (1, c000, bc, 0, 0, 0)
      echoserver   200/201   [001]  10.000022:    raw_syscalls:sys_exit: NR 1 = 188
      echoserver   200/201   [001]  10.000023:   raw_syscalls:sys_enter: NR 202 (c0, 80, 0, 0, 0, 0)
      echoserver   200/201   [001]  10.000024:       sched:sched_switch: prev_comm=echoserver prev_pid=201 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          npm ci   400/400   [000]  10.000025:       sched:sched_wakeup: comm=toolgate pid=100 prio=120 target_cpu=000
          npm ci   400/400   [000]  10.000026:       sched:sched_switch: prev_comm=npm ci prev_pid=400 prev_prio=120 prev_state=R ==> next_comm=toolgate next_pid=100 next_prio=120
        toolgate   100/100   [000]  10.000027:    raw_syscalls:sys_exit: NR 281 = 1
        toolgate   100/100   [000]  10.000028:   raw_syscalls:sys_enter: NR 0 (10, c000, 10000, 0, 0, 0)
        toolgate   100/100   [000]  10.000029:    raw_syscalls:sys_exit: NR 0 = 188
        toolgate   100/100   [000]  10.000030:   raw_syscalls:sys_enter: NR 1 (15, c000, 149, 0, 0, 0)
        toolgate   100/100   [000]  10.000031:       sched:sched_wakeup: comm=loadgen pid=301 prio=120 target_cpu=000
        toolgate   100/100   [000]  10.000032:    raw_syscalls:sys_exit: NR 1 = 329
        toolgate   100/100   [000]  10.000033:   raw_syscalls:sys_enter: NR 0 (10, c000, 10000, 0, 0, 0)
        toolgate   100/100   [000]  10.000034:    raw_syscalls:sys_exit: NR 0 = 0
        toolgate   100/100   [000]  10.000035:       sched:sched_wakeup: comm=toolgate pid=101 prio=120 target_cpu=001
        toolgate   100/100   [000]  10.000036:       sched:sched_switch: prev_comm=toolgate prev_pid=100 prev_prio=120 prev_state=R+ ==> next_comm=loadgen next_pid=301 next_prio=120
         swapper     0/0     [001]  10.000037:       sched:sched_wakeup: comm=toolgate pid=101 prio=120 target_cpu=001
        toolgate   100/101   [001]  10.000038:  sched:sched_migrate_task: comm=toolgate pid=101 prio=120 orig_cpu=1 dest_cpu=0
         loadgen   300/301   [000]  10.000039:   raw_syscalls:sys_enter: NR 1 (7, c000, 1c5, 0, 0, 0)
         loadgen   300/301   [000]  10.000040:    raw_syscalls:sys_exit: NR 1 = 453
         loadgen   300/301   [000]  10.000041:   raw_syscalls:sys_enter: NR 1 (7, c000, 20, 0, 0, 0)
         loadgen   300/301   [000]  10.000042:    raw_syscalls:sys_exit: NR 1 = 32
`

func TestHopCountPerCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hop.txt")
	if err := os.WriteFile(path, []byte(trace), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run([]string{"-group", "toolgate=100", "-group", "child=200", path}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"calls: 2 (loadgen requests in the trace: 2)",
		"== toolgate: 4.00 system calls per call, 1 threads made them",
		"read data 1.00, write data 1.00, epoll_pwait look (timeout 0) 0.50, epoll_pwait wait 0.50, read EAGAIN 0.50, read EOF 0.50",
		"switches out: slept 0.50, preempted 0.50; migrations 0.50",
		"woken 2.00: idle/irq 0.50, loadgen 0.50, other: npm ci 0.50, self 0.50",
		"== child: 1.50 system calls per call, 2 threads made them",
		"futex wake 0.50, read data 0.50, write data 0.50",
		"woken 1.00: self 0.50, toolgate 0.50",
		"== loadgen: 1.50 system calls per call",
		"switches out: slept 0.50, preempted 0.00; migrations 0.00",
		"woken 0.50: toolgate 0.50",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
}

func TestHopCountCallsGiven(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hop.txt")
	if err := os.WriteFile(path, []byte(trace), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run([]string{"-calls", "1", "-group", "toolgate=100", path}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "== toolgate: 8.00 system calls per call") {
		t.Errorf("with -calls 1 the counts are not per one call:\n%s", out.String())
	}
	if err := run([]string{"-group", "x=1", filepath.Join(t.TempDir(), "none")}, &out); err == nil {
		t.Error("a missing trace file gave no error")
	}
}

func TestHopCountNamedLoadgen(t *testing.T) {
	// A second loadgen (pid 500) on the machine: with the group named, its
	// requests and system calls are not counted.
	other := "         loadgen   500/500   [001]  10.000050:   raw_syscalls:sys_enter: NR 1 (7, c000, 1c5, 0, 0, 0)\n" +
		"         loadgen   500/500   [001]  10.000051:    raw_syscalls:sys_exit: NR 1 = 453\n"
	path := filepath.Join(t.TempDir(), "hop.txt")
	if err := os.WriteFile(path, []byte(trace+other), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run([]string{"-group", "toolgate=100", "-group", "loadgen=300", path}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "calls: 2 (loadgen requests in the trace: 2)") || !strings.Contains(out.String(), "== loadgen: 1.50 system calls per call") {
		t.Errorf("another loadgen was counted:\n%s", out.String())
	}
	out.Reset()
	if err := run([]string{"-group", "toolgate=100", path}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "calls: 3 (loadgen requests in the trace: 3)") {
		t.Errorf("without a loadgen group every loadgen counts:\n%s", out.String())
	}
}

func TestParseEventCommandWithSpacesAndSlash(t *testing.T) {
	e, ok := parseEvent("  kworker/1:0H-kb   55/55   [001]  1.5:       sched:sched_wakeup: comm=x pid=9 prio=120 target_cpu=001")
	if !ok || e.comm != "kworker/1:0H-kb" || e.pid != 55 || e.tid != 55 || e.name != "sched:sched_wakeup" || field(e.trace, "pid") != "9" {
		t.Errorf("parseEvent = %+v, %v", e, ok)
	}
	if _, ok := parseEvent("# captured on: Sat Dec  5"); ok {
		t.Error("a header line parsed as an event")
	}
}
