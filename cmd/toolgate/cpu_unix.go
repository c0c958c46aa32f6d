//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU is the process's user and system CPU time so far (zero if
// getrusage fails), for procs.Follow.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// followCPU is procs.Follow's view of the process's CPU time:
// processCPU.
func followCPU() func() time.Duration { return processCPU }
