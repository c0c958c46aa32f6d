//go:build !unix

package main

import "time"

// processCPU is not measured here: procs.Follow then follows the calls in
// flight alone.
func processCPU() time.Duration { return 0 }
