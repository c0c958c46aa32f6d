//go:build unix

package main

import "syscall"

// softNofile is the process's soft RLIMIT_NOFILE, or 0 when unknown.
func softNofile() uint64 {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0
	}
	return uint64(rl.Cur) // int64 on FreeBSD
}
