//go:build linux && race

package rawio

import "syscall"

// In a race build the reads and writes are the syscall package's, which
// tell the race detector of the order the I/O makes (its ioSync): with raw
// system calls, memory handed from a goroutine that wrote to a connection
// to one that read it would be reported as a race. Everything else (the
// waiting, the errors) is as in other builds.

const enabled = true

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func sysPeek(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, err := syscall.Recvfrom(int(fd), p, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno) //nolint:errorlint,forcetypeassert // syscall.Read and Write return a bare Errno
}

func isNonblock(fd uintptr) bool {
	fl, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return e == 0 && fl&syscall.O_NONBLOCK != 0
}
