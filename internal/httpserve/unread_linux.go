//go:build linux

package httpserve

import (
	"net"
	"syscall"
)

// hasUnread reports whether nc's socket holds bytes not read yet (a
// request the process has not got to): a peek that neither blocks nor
// consumes. False when nc has no descriptor or the peek fails.
func hasUnread(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		b [1]byte
		n int
	)
	if err := rc.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return false
	}
	return n > 0
}
