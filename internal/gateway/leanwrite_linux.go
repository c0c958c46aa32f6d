//go:build linux

package gateway

import (
	"net"
	"syscall"
)

// writeNow writes p on conn without waiting (see parkedStream.held): one
// non-blocking write of the socket, errWouldBlock when the socket's
// buffer did not take all of p at once. A connection without a
// descriptor is written within quickWriteTimeout instead.
func writeNow(conn net.Conn, p []byte) error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return writeQuick(conn, p)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return writeQuick(conn, p)
	}
	var werr error
	cerr := rc.Write(func(fd uintptr) bool {
		for len(p) > 0 {
			n, err := syscall.Write(int(fd), p)
			switch {
			case n > 0:
				p = p[n:]
			case err == syscall.EINTR:
			case err == syscall.EAGAIN:
				werr = errWouldBlock
				return true
			case err != nil:
				werr = err
				return true
			default:
				werr = errWouldBlock // no error, nothing written
				return true
			}
		}
		return true // never wait for the socket to take more
	})
	if cerr != nil {
		return cerr
	}
	return werr
}
