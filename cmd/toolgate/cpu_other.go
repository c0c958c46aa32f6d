//go:build !unix

package main

import "time"

// processCPU is not measured here: it returns zero.
func processCPU() time.Duration { return 0 }

// followCPU is procs.Follow's view of the process's CPU time: nil here
// (not measured), so Follow follows the calls in flight instead.
func followCPU() func() (time.Duration, error) { return nil }
