//go:build unix

package e2e

import (
	"syscall"
	"testing"
)

// The e2e tests' Unix system calls; sys_other_test.go has their stubs.

// raiseNofile raises the soft RLIMIT_NOFILE to the hard one (children
// inherit it), or skips t when the hard one is below need.
func raiseNofile(t *testing.T, need uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if uint64(rl.Max) < need { // int64 on FreeBSD
		t.Skipf("the hard RLIMIT_NOFILE is %d; a flood process needs %d descriptors", rl.Max, need)
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
}

// selfTicks is this process's CPU time in clock ticks (user + system): the
// benchmark's own approvers and polls.
func selfTicks() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) int64 { return (t.Sec*1_000_000 + int64(t.Usec)) * clockTicks / 1_000_000 }
	return tv(ru.Utime) + tv(ru.Stime)
}
