package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stepTrace is a hand-made trace of one call through toolgate (pid 100:
// read, peek, write; read, write) to an HTTP upstream (pid 200), and of
// the next call through a splicing relay (pid 500, same upstream), with
// another helper's loadgen (pid 600) writing in between.
const stepTrace = `
         loadgen   300/301   [000]  20.000100:   raw_syscalls:sys_enter: NR 1 (7, c000, 1c5, 0, 0, 0)
         loadgen   600/601   [001]  20.000101:   raw_syscalls:sys_enter: NR 1 (9, c000, 1c5, 0, 0, 0)
         loadgen   300/301   [000]  20.000102:    raw_syscalls:sys_exit: NR 1 = 453
        toolgate   100/100   [000]  20.000110:   raw_syscalls:sys_enter: NR 0 (15, c000, 1000, 0, 0, 0)
        toolgate   100/100   [000]  20.000111:    raw_syscalls:sys_exit: NR 0 = 453
        toolgate   100/100   [000]  20.000150:   raw_syscalls:sys_enter: NR 45 (e, c000, 1, 42, 0, 0)
        toolgate   100/100   [000]  20.000151:    raw_syscalls:sys_exit: NR 45 = -11
        toolgate   100/100   [000]  20.000160:   raw_syscalls:sys_enter: NR 1 (e, c000, 1ce, 0, 0, 0)
        toolgate   100/100   [000]  20.000162:    raw_syscalls:sys_exit: NR 1 = 462
        toolgate   100/100   [000]  20.000163:   raw_syscalls:sys_enter: NR 0 (15, c000, 1, 0, 0, 0)
        toolgate   100/100   [000]  20.000164:    raw_syscalls:sys_exit: NR 0 = -11
      echoserver   200/200   [001]  20.000200:   raw_syscalls:sys_enter: NR 0 (8, c000, 1000, 0, 0, 0)
      echoserver   200/200   [001]  20.000201:    raw_syscalls:sys_exit: NR 0 = 462
      echoserver   200/200   [001]  20.000300:   raw_syscalls:sys_enter: NR 1 (8, c000, 194, 0, 0, 0)
      echoserver   200/200   [001]  20.000302:    raw_syscalls:sys_exit: NR 1 = 403
        toolgate   100/100   [000]  20.000380:   raw_syscalls:sys_enter: NR 0 (e, c000, 1000, 0, 0, 0)
        toolgate   100/100   [000]  20.000382:    raw_syscalls:sys_exit: NR 0 = 403
        toolgate   100/100   [000]  20.000420:   raw_syscalls:sys_enter: NR 1 (15, c000, 149, 0, 0, 0)
        toolgate   100/100   [000]  20.000426:    raw_syscalls:sys_exit: NR 1 = 329
         loadgen   600/601   [001]  20.000430:   raw_syscalls:sys_enter: NR 0 (9, c000, 1000, 0, 0, 0)
         loadgen   600/601   [001]  20.000431:    raw_syscalls:sys_exit: NR 0 = 329
         loadgen   300/302   [000]  20.000470:   raw_syscalls:sys_enter: NR 0 (7, c000, 1000, 0, 0, 0)
         loadgen   300/302   [000]  20.000472:    raw_syscalls:sys_exit: NR 0 = 329
         loadgen   300/301   [000]  20.001000:   raw_syscalls:sys_enter: NR 1 (8, c000, 1c5, 0, 0, 0)
   perffloor-tcp   500/501   [000]  20.001050:   raw_syscalls:sys_enter: NR 275 (9, 0, 16, 0, 100000, 2)
   perffloor-tcp   500/501   [000]  20.001052:    raw_syscalls:sys_exit: NR 275 = 453
   perffloor-tcp   500/501   [000]  20.001053:   raw_syscalls:sys_enter: NR 275 (15, 0, 8, 0, 1c5, 2)
   perffloor-tcp   500/501   [000]  20.001055:    raw_syscalls:sys_exit: NR 275 = 453
      echoserver   200/200   [001]  20.001100:   raw_syscalls:sys_enter: NR 0 (8, c000, 1000, 0, 0, 0)
      echoserver   200/200   [001]  20.001101:    raw_syscalls:sys_exit: NR 0 = 453
      echoserver   200/200   [001]  20.001200:   raw_syscalls:sys_enter: NR 1 (8, c000, 194, 0, 0, 0)
      echoserver   200/200   [001]  20.001202:    raw_syscalls:sys_exit: NR 1 = 403
   perffloor-tcp   500/502   [000]  20.001260:   raw_syscalls:sys_enter: NR 275 (10, 0, e, 0, 100000, 2)
   perffloor-tcp   500/502   [000]  20.001262:    raw_syscalls:sys_exit: NR 275 = 403
   perffloor-tcp   500/502   [000]  20.001264:   raw_syscalls:sys_enter: NR 275 (d, 0, f, 0, 193, 2)
   perffloor-tcp   500/502   [000]  20.001266:    raw_syscalls:sys_exit: NR 275 = 403
         loadgen   300/302   [000]  20.001300:   raw_syscalls:sys_enter: NR 0 (8, c000, 1000, 0, 0, 0)
         loadgen   300/302   [000]  20.001302:    raw_syscalls:sys_exit: NR 0 = 403
`

func writeStepTrace(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hop.txt")
	if err := os.WriteFile(p, []byte(stepTrace), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStepsThroughToolgate: the first call's marks, the peek and the
// background read's EAGAIN not counted, the other loadgen's write and
// read ignored once a loadgen group is named.
func TestStepsThroughToolgate(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-steps", "toolgate,up", "-group", "toolgate=100", "-group", "up=200", "-group", "loadgen=300", writeStepTrace(t)}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"calls: 1 ",
		"| L1 → A | 11.0 |",  // 100 → 111
		"| A → B | 49.0 |",   // 111 → 160: the peek inside
		"| B → U1 | 41.0 |",  // 160 → 201
		"| U1 → U2 | 99.0 |", // 201 → 300
		"| U2 → C | 82.0 |",  // 300 → 382
		"| C → D | 38.0 |",   // 382 → 420
		"| D → D2 | 6.0 |",
		"| D2 → L2 | 46.0 |", // 426 → 472, not the other loadgen's read at 431
		"| L1 → L2 (the call) | 372.0 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("steps output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStepsThroughASplicingRelay: a splice of 1 MiB (socket → pipe) is a
// read, one of the bytes' count a write.
func TestStepsThroughASplicingRelay(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-steps", "relay,up", "-group", "relay=500", "-group", "up=200", "-group", "loadgen=300", writeStepTrace(t)}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| A → B | 1.0 |", "| C → D | 2.0 |", "| L1 → L2 (the call) | 302.0 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("steps output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStepsNeedTwoGroups: -steps names a proxy and its upstream.
func TestStepsNeedTwoGroups(t *testing.T) {
	if err := run([]string{"-steps", "toolgate", "-group", "toolgate=100", writeStepTrace(t)}, new(bytes.Buffer)); err == nil {
		t.Error("-steps with one name: no error")
	}
}
