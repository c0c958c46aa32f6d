//go:build linux && !race

package rawio

import (
	"syscall"
	"unsafe"
)

// enabled: the wrappers are used (Linux; a race build: sys_linux_race.go).
const enabled = true

// sysRead is read(2) of fd into p, the scheduler not told (see the
// package doc): fd is non-blocking, so it returns at once.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p))) //nolint:gosec // G103: p's address for read(2), kept alive by RawSyscall (uintptrkeepalive)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// sysWrite is write(2) of p on fd, as sysRead.
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p))) //nolint:gosec // G103: as sysRead
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// sysPeek is recv(2) of fd into p with MSG_PEEK|MSG_DONTWAIT, as sysRead.
func sysPeek(fd uintptr, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), //nolint:gosec // G103: as sysRead
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// isNonblock reports whether fd has O_NONBLOCK set.
func isNonblock(fd uintptr) bool {
	fl, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	return e == 0 && fl&syscall.O_NONBLOCK != 0
}
