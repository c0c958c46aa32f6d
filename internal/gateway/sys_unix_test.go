//go:build unix

package gateway

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The tests' Unix system calls; sys_other_test.go has their stubs, so
// that GOOS=windows go vet checks the package.

// mkfifo makes a named pipe in a temporary directory and returns its
// path: a tool of the test upstreams blocks opening it for reading.
func mkfifo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// peeked reports whether the socket fd has a byte to read, without
// reading it or blocking.
func peeked(fd uintptr) bool {
	var buf [1]byte
	n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err == nil && n > 0
}

// pageFaults is the process's minor and major page faults and its system
// CPU time so far.
func pageFaults(b *testing.B) (minor, major int64, sys time.Duration) {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return int64(ru.Minflt), int64(ru.Majflt), time.Duration(ru.Stime.Nano())
}
