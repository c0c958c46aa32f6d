//go:build !unix

package gctune

import "time"

// processCPU is cpu_unix_test.go's: outside Unix the benchmarks that need the
// process's CPU time skip (or read 0).
func processCPU() time.Duration { return 0 }
