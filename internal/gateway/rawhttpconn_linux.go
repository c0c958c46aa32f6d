package gateway

import "syscall"

// h1Supported: the lean HTTP/1.1 exchange (rawhttpconn.go) needs
// h1Peeker's non-blocking peek.
const h1Supported = true

// A h1Peeker tells, without blocking or consuming anything, what an idle
// connection has to read: nothing (h1Quiet: open, EAGAIN), bytes
// (h1Readable), or its end or an error (h1Gone). Its read function is
// made once per connection: a closure per peek escaped to the heap with
// its result and buffer (three allocations per peek).
type h1Peeker struct {
	st h1PeekState
	b  [1]byte
	fn func(fd uintptr) bool
}

func (p *h1Peeker) peek(rc syscall.RawConn) h1PeekState {
	if rc == nil {
		return h1Gone
	}
	if p.fn == nil {
		p.fn = p.read
	}
	p.st = h1Gone
	if rc.Read(p.fn) != nil {
		return h1Gone
	}
	return p.st
}

func (p *h1Peeker) read(fd uintptr) bool {
	n, _, err := syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == syscall.EAGAIN:
		p.st = h1Quiet
	case err == nil && n > 0:
		p.st = h1Readable
	}
	return true
}

// h1Peek is a h1Peeker's peek at rc, with a peeker of its own.
func h1Peek(rc syscall.RawConn) h1PeekState {
	var p h1Peeker
	return p.peek(rc)
}
