package gateway

import (
	"io"
	"net"
	"os"
	"syscall"

	"toolgate/internal/rawio"
)

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
	// Without the scheduler's system-call bookkeeping (rawio).
	n, err := rawio.Peek(fd, p.b[:])
	switch {
	case err == syscall.EAGAIN:
		p.st = h1Quiet
	case err == 0 && n > 0:
		p.st = h1Readable
	}
	return true
}

// h1Peek is a h1Peeker's peek at rc, with a peeker of its own.
func h1Peek(rc syscall.RawConn) h1PeekState {
	var p h1Peeker
	return p.peek(rc)
}

// An h1Awaiter writes a request's last bytes to a connection from within
// a read of it (syscall.RawConn.Read) and returns once the connection is
// readable: the answer has begun to arrive, or the connection ended.
// Go's poller resets a connection's readiness before each read and
// tries the read first; a read right after the POST found nothing (the
// upstream had not answered yet, EAGAIN) on most calls, one wasted
// syscall per call (docs/performance.md, "hotpath8", "httpup24"). Here
// the readiness is reset before the bytes go out, so the wait that
// follows them sees the answer's arrival and the read after it finds
// the answer. Its step function is made once per connection (a closure
// per write would escape to the heap).
type h1Awaiter struct {
	p    []byte
	n    int   // bytes of p written
	err  error // the write's error
	sent bool  // p was written in full: the next step is the answer's readiness
	fn   func(fd uintptr) bool
}

// write writes p to the connection of rc and waits until it is readable;
// n < len(p) with a nil error: the socket took no more at once, the
// rest is the caller's to write. An error of the wait alone (a deadline,
// a closed connection) is not returned: the answer's read reports it.
func (a *h1Awaiter) write(c net.Conn, rc syscall.RawConn, p []byte) (n int, err error) {
	if a.fn == nil {
		a.fn = a.step
	}
	a.p, a.n, a.err, a.sent = p, 0, nil, false
	rerr := rc.Read(a.fn)
	n, err = a.n, a.err
	a.p, a.err = nil, nil
	switch {
	case err != nil:
		// As the connection's own Write reports it.
		err = &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	case n == 0 && rerr != nil:
		// Nothing written: the read could not begin (closed, or past
		// its deadline).
		err = rerr
	}
	return n, err
}

// step is the read function of write: the first call writes, a later one
// (the connection readable) ends the read.
func (a *h1Awaiter) step(fd uintptr) bool {
	if a.sent {
		return true
	}
	for a.n < len(a.p) {
		// Without the scheduler's system-call bookkeeping (rawio).
		n, err := rawio.Write(fd, a.p[a.n:])
		a.n += n
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return true // the rest through the connection (countWriter)
		case err != 0:
			a.err = os.NewSyscallError("write", err)
			return true
		case n <= 0:
			a.err = io.ErrShortWrite
			return true
		}
	}
	a.sent = true
	return false
}
