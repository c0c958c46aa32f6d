//go:build !unix

package sqlstore

import (
	"testing"
	"time"
)

// cpuTime is cpu_unix_test.go's: outside Unix the benchmarks that need the
// process's CPU time skip (or read 0).
func cpuTime(b *testing.B, _ int) time.Duration {
	b.Skip("getrusage is Unix's")
	return 0
}
