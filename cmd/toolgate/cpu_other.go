//go:build !unix

package main

import "time"

// processCPU is the process's CPU time for procs.Follow and
// execpages.WhenQuiet: nil here (not measured), so Follow follows the
// calls in flight instead, and WhenQuiet the requests seen alone.
func processCPU() func() (time.Duration, error) { return nil }
