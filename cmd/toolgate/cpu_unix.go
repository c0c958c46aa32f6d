//go:build unix

package main

import (
	"fmt"
	"syscall"
	"time"
)

// readCPU is the process's user and system CPU time so far, or
// getrusage's error.
func readCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// processCPU is readCPU's time (zero if getrusage fails), for
// execpages.WhenQuiet.
func processCPU() time.Duration {
	d, _ := readCPU()
	return d
}

// followCPU is procs.Follow's view of the process's CPU time: readCPU (a
// failed reading is a busy look there, not an idle one).
func followCPU() func() (time.Duration, error) { return readCPU }
