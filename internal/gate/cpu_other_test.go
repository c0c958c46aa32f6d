//go:build !unix

package gate

import (
	"testing"
	"time"
)

// processCPU is cpu_unix_test.go's: outside Unix the benchmarks that need the
// process's CPU time skip (or read 0).
func processCPU(b *testing.B) time.Duration {
	b.Skip("getrusage is Unix's")
	return 0
}
