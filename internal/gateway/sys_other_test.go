//go:build !unix

package gateway

import (
	"testing"
	"time"
)

// Stubs of sys_unix_test.go's system calls: the tests and benchmarks that
// need them skip.

func mkfifo(t *testing.T) string {
	t.Skip("named pipes are Unix's")
	return ""
}

func peeked(uintptr) bool { return true }

func pageFaults(b *testing.B) (minor, major int64, sys time.Duration) {
	b.Skip("getrusage is Unix's")
	return 0, 0, 0
}
