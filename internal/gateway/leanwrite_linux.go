//go:build linux

package gateway

import (
	"net"
	"sync"
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
	w := getNowWrite()
	w.p = p
	cerr := rc.Write(w.fn)
	werr := w.err
	putNowWrite(w)
	if cerr != nil {
		return cerr
	}
	return werr
}

// A nowWrite is one writeNow's state, pooled with its function bound once,
// so that a held call's keep-alive (one every 15 s for each of thousands)
// allocates no closure for the raw connection's Write.
type nowWrite struct {
	p   []byte
	err error
	fn  func(fd uintptr) bool // w.write
}

var nowWrites = sync.Pool{New: func() any {
	w := new(nowWrite)
	w.fn = w.write
	return w
}}

func getNowWrite() *nowWrite {
	w, _ := nowWrites.Get().(*nowWrite)
	if w == nil {
		w = new(nowWrite)
		w.fn = w.write
	}
	return w
}

func putNowWrite(w *nowWrite) {
	w.p, w.err = nil, nil
	nowWrites.Put(w)
}

// write is the raw connection's Write function: it writes w.p without
// waiting for the socket to take more, and keeps the outcome in w.err.
func (w *nowWrite) write(fd uintptr) bool {
	for len(w.p) > 0 {
		n, err := syscall.Write(int(fd), w.p)
		switch {
		case n > 0:
			w.p = w.p[n:]
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			w.err = errWouldBlock
			return true
		case err != nil:
			w.err = err
			return true
		default:
			w.err = errWouldBlock // no error, nothing written
			return true
		}
	}
	return true // never wait for the socket to take more
}
