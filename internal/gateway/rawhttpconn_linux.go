package gateway

import "syscall"

// h1Supported: the lean HTTP/1.1 exchange (rawhttpconn.go) needs
// h1Peek's non-blocking peek.
const h1Supported = true

// h1Peek tells, without blocking or consuming anything, what the idle
// connection of rc has to read: nothing (h1Quiet: open, EAGAIN), bytes
// (h1Readable), or its end or an error (h1Gone).
func h1Peek(rc syscall.RawConn) h1PeekState {
	if rc == nil {
		return h1Gone
	}
	st := h1Gone
	var b [1]byte
	err := rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN:
			st = h1Quiet
		case err == nil && n > 0:
			st = h1Readable
		}
		return true
	})
	if err != nil {
		return h1Gone
	}
	return st
}
