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
type firstByteConn struct {
	net.Conn
	waitUntil time.Time

	mu      sync.Mutex
	started bool          // a byte was read; deadlines pass through from then on
	asked   time.Duration // the read deadline asked for before, as a duration from when it was asked; 0: none
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if !c.started {
			c.started = true
			if c.asked > 0 {
				_ = c.Conn.SetReadDeadline(time.Now().Add(c.asked))
			}
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *firstByteConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return c.Conn.SetReadDeadline(t)
	}
	c.asked = 0
	now := time.Now()
	if t.IsZero() || !t.After(now) {
		// None, or one in the past (an abort of a pending read): at once.
		return c.Conn.SetReadDeadline(t)
	}
	c.asked = t.Sub(now)
	if t.Before(c.waitUntil) {
		t = c.waitUntil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *firstByteConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// SyscallConn is the underlying connection's (syscall.Conn), as
// conn.SyscallConn says.
func (c *firstByteConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("httpserve: the connection has no descriptor")
	}
	return sc.SyscallConn()
}
