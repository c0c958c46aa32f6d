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

// processCPU is the process's CPU time for procs.Follow and
// execpages.WhenQuiet: readCPU (a failed reading is a busy look to both,
// not an idle one: cpuuse.Meter).
func processCPU() func() (time.Duration, error) { return readCPU }
