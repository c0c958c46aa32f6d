package gateway

import "syscall"

// h1Supported: the lean HTTP/1.1 exchange (rawhttpconn.go) needs
// h1Alive's non-blocking peek.
const h1Supported = true

// h1Alive reports whether the idle connection of rc is still open and
// has nothing to read: a non-blocking MSG_PEEK that finds no data
// (EAGAIN). A FIN (0 bytes), a reset, or bytes no request asked for mean
// the connection is not used again.
func h1Alive(rc syscall.RawConn) bool {
	if rc == nil {
		return false
	}
	alive := false
	var b [1]byte
	err := rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN
		return true
	})
	return err == nil && alive
}
