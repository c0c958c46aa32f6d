//go:build linux

package gateway

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
)

// A connPoller notices, for every parked call's connection at once, that
// its client went away, on one goroutine with one epoll set: a parked call
// needs no reader goroutine of its own (docs/performance.md, "One
// goroutine per parked call"). A connection is watched for readability,
// one-shot: at the event, a non-blocking peek (MSG_PEEK, nothing is
// consumed) tells the end of the connection or an error (the client went
// away: gone is called) from the start of the client's next request (the
// watch ends, as net/http's backgroundRead ends at a pipelined byte; the
// bytes stay in the socket for serveRest). The runtime's own netpoller
// keeps the descriptor in its epoll set; Linux allows a descriptor in
// several sets, and no read by the poller consumes anything.
//
// The poller's goroutine belongs to the gateway (its WaitGroup) and ends
// when the gateway's root context does, or when the set cannot be waited
// on. Once it has ended, a new watch is left to a reader goroutine of its
// own (the caller's connWatch); a watch left in the set when the loop
// failed is handed to one (the drop of a call parked before the failure
// is still noticed); when the loop ended because the gateway closes, the
// watches left never fire (the gateway cancels every held call as it
// closes).
type connPoller struct {
	log  *slog.Logger
	epfd int
	wake [2]int // a pipe whose read end is in the set: its write ends the loop
	// epollWait is syscall.EpollWait, epollCtl syscall.EpollCtl (tests
	// make them fail: a set that cannot be waited on, a connection the set
	// does not take); both are set before run.
	epollWait func(epfd int, events []syscall.EpollEvent, msec int) (int, error)
	epollCtl  func(epfd, op, fd int, event *syscall.EpollEvent) error

	mu      sync.Mutex
	closed  bool                  // guarded by mu: epfd and the pipe are closed
	next    uint64                // guarded by mu: the key of the next watch (0 is the pipe)
	watches map[uint64]*pollWatch // guarded by mu
}

// A pollWatch is one parked connection's watch (watchConn).
type pollWatch struct {
	p    *connPoller
	key  uint64
	conn net.Conn
	rc   syscall.RawConn
	gone func()
	// tls: conn is a *tls.Conn, rc its TCP socket's (leanparktls.go): a
	// readable byte is handed to a reader goroutine (fire).
	tls bool
	// fb, guarded by p.mu, is the reader goroutine the watch was handed
	// to when the poller's loop failed, or, over TLS, when the client
	// sent a record.
	fb *connWatch
	// ready and left are set for an answered connection idle between
	// requests (watchIdle; never TLS): ready is called at the first byte
	// of the client's next request, left when the loop ends (the gateway
	// closing, or the set failed) with the watch still in the set. Both
	// are called without p.mu held, after the watch left the set.
	ready, left func()
}

// newConnPoller makes the epoll set; run runs its loop.
func newConnPoller(log *slog.Logger) (*connPoller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	p := &connPoller{log: log, epfd: epfd, watches: make(map[uint64]*pollWatch), next: 1, epollWait: syscall.EpollWait, epollCtl: syscall.EpollCtl}
	if err := syscall.Pipe2(p.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		_ = syscall.Close(epfd)
		return nil, err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p.wake[0], &ev); err != nil {
		p.closeFDs()
		return nil, err
	}
	return p, nil
}

func (p *connPoller) closeFDs() {
	_ = syscall.Close(p.epfd)
	_ = syscall.Close(p.wake[0])
	_ = syscall.Close(p.wake[1])
}

// stopLoop makes run return (it may be called from any goroutine, more
// than once).
func (p *connPoller) stopLoop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		_, _ = syscall.Write(p.wake[1], []byte{0})
	}
}

// run waits for events until stopLoop, then closes the set. When the set
// cannot be waited on, the watches in it are handed to reader goroutines
// (connWatch) before it is closed.
func (p *connPoller) run() {
	failed := false
	defer func() {
		p.mu.Lock()
		p.closed = true
		var idle []*pollWatch
		for _, w := range p.watches {
			switch {
			case w.left != nil:
				idle = append(idle, w)
			case failed:
				w.fb = watchConn(w.conn, w.gone)
			}
		}
		clear(p.watches)
		p.closeFDs()
		p.mu.Unlock()
		for _, w := range idle {
			w.left()
		}
	}()
	var events [64]syscall.EpollEvent
	for {
		n, err := p.epollWait(p.epfd, events[:], -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			p.log.Error("cannot wait for parked connections; each is watched on a goroutine of its own from now on", "err", err)
			failed = true
			return
		}
		for i := range n {
			key := uint64(uint32(events[i].Fd)) | uint64(uint32(events[i].Pad))<<32 //nolint:gosec // the key's two halves, bit for bit (ctl)
			if key == 0 {
				return
			}
			p.fire(key)
		}
	}
}

// fire looks at the connection of watch key, which became readable.
func (p *connPoller) fire(key uint64) {
	p.mu.Lock()
	w := p.watches[key]
	if w == nil {
		p.mu.Unlock()
		return
	}
	n, err := peek(w.rc)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
		// Nothing after all: watch again.
		if p.ctl(w, syscall.EPOLL_CTL_MOD) == nil {
			p.mu.Unlock()
			return
		}
	}
	delete(p.watches, key)
	_ = p.ctl(w, syscall.EPOLL_CTL_DEL)
	if n > 0 && w.ready != nil {
		p.mu.Unlock()
		w.ready()
		return
	}
	if n > 0 && w.tls {
		// A TLS record: the next request, a close_notify or a
		// post-handshake message, which only the TLS layer can tell
		// apart; a read through it decides (connWatch).
		w.fb = watchConn(w.conn, w.gone)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	if n == 0 {
		// The end of the connection, or an error on it: the client went away.
		w.gone()
	}
}

// ctl adds, re-arms or removes w's connection in the set; p.mu is held.
func (p *connPoller) ctl(w *pollWatch, op int) error {
	// The key in the event's 64 bits of user data (Fd and Pad), bit for bit.
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT,
		Fd: int32(uint32(w.key)), Pad: int32(uint32(w.key >> 32))} //nolint:gosec // split, not narrowed
	var cerr error
	err := w.rc.Control(func(fd uintptr) { cerr = p.epollCtl(p.epfd, op, int(fd), &ev) })
	if err != nil {
		return err
	}
	return cerr
}

// peek reads, without consuming it and without blocking, one byte of rc's
// connection: n is 1 when the client sent more, 0 with a nil error at the
// connection's end, 0 with EAGAIN when nothing is there.
func peek(rc syscall.RawConn) (int, error) {
	var (
		b    [1]byte
		n    int
		perr error
	)
	err := rc.Control(func(fd uintptr) {
		n, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	if err != nil {
		return 0, err
	}
	if n < 0 {
		n = 0
	}
	return n, perr
}

// watch starts watching conn (see connPoller); ok is false when conn has
// no descriptor to watch or the set would not take it (the caller then
// watches it on a goroutine).
func (p *connPoller) watch(conn net.Conn, gone func()) (dropWatch, bool) {
	w, ok := p.add(conn, gone, nil, nil)
	if !ok {
		return nil, false
	}
	return w, true
}

// watchIdle starts watching conn, an answered connection idle between
// requests, for the first byte of the client's next request (ready) or
// its end (gone), one of which, or left (the loop ended first), is called
// once unless unwatch took the watch out of the set first; ok is false
// when conn is a TLS connection (decrypted bytes may wait in its layer),
// has no descriptor or the set would not take it.
func (p *connPoller) watchIdle(conn net.Conn, gone, ready, left func()) (idleWatch, bool) {
	if _, isTLS := conn.(*tls.Conn); isTLS {
		return nil, false
	}
	w, ok := p.add(conn, gone, ready, left)
	if !ok {
		return nil, false
	}
	return w, true
}

// add adds conn's watch to the set (watch, watchIdle).
func (p *connPoller) add(conn net.Conn, gone, ready, left func()) (*pollWatch, bool) {
	raw := conn
	tc, isTLS := conn.(*tls.Conn)
	if isTLS {
		raw = tc.NetConn()
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		// The loop ended (the gateway closing, or the set failed): the
		// caller watches conn on a goroutine.
		return nil, false
	}
	w := &pollWatch{p: p, key: p.next, conn: conn, rc: rc, gone: gone, tls: isTLS, ready: ready, left: left}
	p.next++
	if err := p.ctl(w, syscall.EPOLL_CTL_ADD); err != nil {
		return nil, false
	}
	p.watches[w.key] = w
	return w, true
}

// stop ends the watch and reports whether the client sent more on the
// connection (its next request, left in the socket).
func (w *pollWatch) stop() ([]byte, bool) {
	p := w.p
	p.mu.Lock()
	if p.watches[w.key] == w {
		delete(p.watches, w.key)
		if !p.closed {
			_ = p.ctl(w, syscall.EPOLL_CTL_DEL)
		}
	}
	fb := w.fb
	w.fb = nil
	p.mu.Unlock()
	if fb != nil {
		return fb.stop()
	}
	n, _ := peek(w.rc)
	return nil, n > 0
}

// unwatch takes the watch out of the set and reports whether it was still
// there (none of its callbacks ran or will run).
func (w *pollWatch) unwatch() bool {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watches[w.key] != w {
		return false
	}
	delete(p.watches, w.key)
	if !p.closed {
		_ = p.ctl(w, syscall.EPOLL_CTL_DEL)
	}
	return true
}
