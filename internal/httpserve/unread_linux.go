//go:build linux

package httpserve

import (
	"net"
	"syscall"

	"toolgate/internal/rawio"
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

// awaitByte waits, under nc's read deadline, until nc's socket holds a
// byte or its end, without consuming anything. It returns nil then, the
// deadline's or the closed connection's error, or errNoPeek when nc has no
// descriptor (the caller reads as usual).
func awaitByte(nc net.Conn) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return errNoPeek
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return errNoPeek
	}
	return rc.Read(peekDone)
}

// peekDone peeks at fd without blocking: false (wait for readability)
// while nothing is there. A func of its own, not a closure: nothing is
// allocated per wait.
func peekDone(fd uintptr) bool {
	var b [1]byte
	_, e := rawio.Peek(fd, b[:])
	return e != syscall.EAGAIN
}

// canPeek: idle connections may be handed off (handoff.go).
const canPeek = true
