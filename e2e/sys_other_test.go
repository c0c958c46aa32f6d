//go:build !unix

package e2e

import "testing"

// Stubs of sys_unix_test.go's system calls.

func raiseNofile(t *testing.T, _ uint64) {
	t.Skip("RLIMIT_NOFILE is Unix's")
}

func selfTicks() int64 { return 0 }
