package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// diskTrace: three calls of the loadgen (pid 300; its 1-byte write is not
// a request), toolgate (pid 100) committing once during the second (two
// page writes and a sync on thread 103, 1 ms apart), and another process's
// fsync (pid 900) during the third, which is not toolgate's.
const diskTrace = `
         loadgen   300/301   [000]  30.000000:   raw_syscalls:sys_enter: NR 1 (7, c000, 1c5, 0, 0, 0)
         loadgen   300/301   [000]  30.000001:    raw_syscalls:sys_exit: NR 1 = 453
         loadgen   300/301   [000]  30.000500:   raw_syscalls:sys_enter: NR 1 (7, c000, 1, 0, 0, 0)
         loadgen   300/301   [000]  30.000501:    raw_syscalls:sys_exit: NR 1 = 1
         loadgen   300/301   [000]  30.001000:   raw_syscalls:sys_enter: NR 1 (7, c000, 1c5, 0, 0, 0)
         loadgen   300/301   [000]  30.001001:    raw_syscalls:sys_exit: NR 1 = 453
             old   100/103   [001]  30.001100:   raw_syscalls:sys_enter: NR 18 (9, c000, 1018, 1000, 0, 0)
             old   100/103   [001]  30.001200:    raw_syscalls:sys_exit: NR 18 = 4120
             old   100/103   [001]  30.002200:   raw_syscalls:sys_enter: NR 18 (9, c000, 1018, 2018, 0, 0)
             old   100/103   [001]  30.002300:    raw_syscalls:sys_exit: NR 18 = 4120
             old   100/103   [001]  30.002400:   raw_syscalls:sys_enter: NR 74 (9, 0, 0, 0, 0, 0)
             old   100/103   [001]  30.006400:    raw_syscalls:sys_exit: NR 74 = 0
         loadgen   300/301   [000]  30.007000:   raw_syscalls:sys_enter: NR 1 (7, c000, 1c5, 0, 0, 0)
         loadgen   300/301   [000]  30.007001:    raw_syscalls:sys_exit: NR 1 = 453
          sqlite   900/900   [001]  30.007100:   raw_syscalls:sys_enter: NR 74 (3, 0, 0, 0, 0, 0)
          sqlite   900/900   [001]  30.007600:    raw_syscalls:sys_exit: NR 74 = 0
         loadgen   300/301   [000]  30.008000:   raw_syscalls:sys_enter: NR 1 (7, c000, 1c5, 0, 0, 0)
`

// TestDiskCommitsAndTheCallsTheyOverlap: one commit (two page writes and a
// sync, 5.3 ms) found, the second call (6 ms) overlapping it, the first
// and third (1 ms each) not: the other process's sync and the 1-byte
// write are not counted.
func TestDiskCommitsAndTheCallsTheyOverlap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hop.txt")
	if err := os.WriteFile(p, []byte(diskTrace), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"-disk", "toolgate", "-group", "toolgate=100", "-group", "loadgen=300", p}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"calls: 3 in 0.01 s; commits: 1 (125.0 a second), page writes per commit p50 2; syncs: 1\n",
		"commit µs p50 / p90 / max 5300 / 5300 / 5300; sync µs p50 / p90 4000 / 4000;",
		"| overlapping a commit | 1 | 33.3 % | 6000 | 6000 | 6000 | 6000 |\n",
		"| not overlapping | 2 | 66.7 % | 1000 | 1000 | 1000 | 1000 |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// TestDiskNeedsTheNamedGroup: -disk names a group that is not given.
func TestDiskNeedsTheNamedGroup(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hop.txt")
	if err := os.WriteFile(p, []byte(diskTrace), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"-disk", "proxy", "-group", "toolgate=100", p}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no -group of that name") {
		t.Fatalf("err = %v, want no -group of that name", err)
	}
}
