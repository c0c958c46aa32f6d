package httpserve

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// The read-header timeout from the request's first byte (issue 13, robust).
//
// net/http arms Server.ReadHeaderTimeout for a connection's first request
// when its goroutine starts, and for each later request once the first
// byte of it came (it waits for that under IdleTimeout). Under a burst of
// thousands of agents, on a busy machine, an agent's process may connect
// and get to writing its POST more than ReadHeaderTimeout later: net/http
// then closed the connection before the request came, and the agent got
// EOF, or "connection reset by peer" when its request arrived after the
// close: a transport error for a call it had sent, not a held call or a
// clear answer. A firstByteListener's connections count the read-header
// timeout of the first request from its first byte too, as net/http does
// for the later ones: until then a connection waits up to the idle
// timeout (a connection that sends nothing is closed then, and it is idle
// to the connection cap, which closes it first when it needs room).

// AwaitFirstByte returns c, whose next request a server other than
// Serve's will read (toolgate's connections served on after a parked
// call's answer), with that request's read-header timeout counted from its
// first byte, as for the connections Serve accepts: until then c may send
// nothing for wait.
func AwaitFirstByte(c net.Conn, wait time.Duration) net.Conn {
	return &firstByteConn{Conn: c, waitUntil: time.Now().Add(wait)}
}

// firstByteListener wraps the connections it accepts in firstByteConns.
type firstByteListener struct {
	net.Listener
	wait time.Duration // how long a new connection may send nothing
}

func (l *firstByteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &firstByteConn{Conn: c, waitUntil: time.Now().Add(l.wait)}, nil
}

// A firstByteConn defers the read deadlines asked for before its first
// byte was read: until then the deadline in force is the later of the one
// asked for and waitUntil, and once a byte was read the one asked for
// (net/http's read-header deadline) is moved to run from that moment, as
// long as it had run from when it was asked for.
//
// It also hands a read deadline to the connection below only when a read
// (Read, or its descriptor's RawConn.Read) is to wait under it, or at once
// when one is in flight (lazy.go): net/http and the cap set it about nine
// times per kept-alive request, most of them replaced before any read
// (docs/performance.md, "front49"). SetReadDeadline then returns nil; an
// error setting it below is the read's.
type firstByteConn struct {
	net.Conn
	waitUntil time.Time

	mu           sync.Mutex
	started      bool          // a byte was read; deadlines pass through from then on
	asked        time.Duration // the read deadline asked for before, as a duration from when it was asked; 0: none
	lazyDeadline               // guarded by mu
	raw          lazyRawConn   // SyscallConn's; raw.rc set at its first call, guarded by mu
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	if err := c.beginRead(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.reading--
	if n > 0 && !c.started {
		c.started = true
		if c.asked > 0 {
			_ = c.setLocked(time.Now().Add(c.asked))
		}
	}
	c.mu.Unlock()
	return n, err
}

// beginRead hands the read deadline in force to the connection below and
// counts a read in flight (the caller ends it: reading--).
func (c *firstByteConn) beginRead() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.flushLocked(c.Conn); err != nil {
		return err
	}
	c.reading++
	return nil
}

func (c *firstByteConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return c.setLocked(t)
	}
	c.asked = 0
	now := time.Now()
	if t.IsZero() || !t.After(now) {
		// None, or one in the past (an abort of a pending read): as
		// asked, not deferred to waitUntil.
		return c.setLocked(t)
	}
	c.asked = t.Sub(now)
	if t.Before(c.waitUntil) {
		t = c.waitUntil
	}
	return c.setLocked(t)
}

// setLocked makes t the read deadline in force: at once when a read is in
// flight (it must reach that read: net/http's abort of its background
// read), else at the next read. c.mu is held.
func (c *firstByteConn) setLocked(t time.Time) error {
	c.want = t
	if c.reading > 0 {
		return c.flushLocked(c.Conn)
	}
	return nil
}

func (c *firstByteConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// SyscallConn is the underlying connection's (syscall.Conn), as
// conn.SyscallConn says, whose Read waits under c's read deadline.
func (c *firstByteConn) SyscallConn() (syscall.RawConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.raw.rc == nil {
		sc, ok := c.Conn.(syscall.Conn)
		if !ok {
			return nil, errors.New("httpserve: the connection has no descriptor")
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return nil, err
		}
		c.raw = lazyRawConn{c: c, rc: rc}
	}
	return &c.raw, nil
}

// A lazyRawConn is a firstByteConn's descriptor: its Read waits under the
// connection's read deadline (handed below first, as Read does).
type lazyRawConn struct {
	c  *firstByteConn
	rc syscall.RawConn
}

func (r *lazyRawConn) Control(f func(fd uintptr)) error { return r.rc.Control(f) }

func (r *lazyRawConn) Write(f func(fd uintptr) bool) error { return r.rc.Write(f) }

func (r *lazyRawConn) Read(f func(fd uintptr) bool) error {
	if err := r.c.beginRead(); err != nil {
		return err
	}
	err := r.rc.Read(f)
	r.c.mu.Lock()
	r.c.reading--
	r.c.mu.Unlock()
	return err
}
