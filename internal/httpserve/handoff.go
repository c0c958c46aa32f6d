package httpserve

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// Idle kept-alive connections handed off net/http (issue 13, idle40).
//
// After a response, net/http keeps a kept-alive connection's goroutine
// (an 8 KiB stack once it served a request) and its 4 KiB bufio reader
// and writer while it waits for the client's next request: ≈ 21 KB per
// connection, which a client without a token gets by asking /healthz or
// getting a 401 (docs/performance.md, "Memory per open agent
// connection"). A Listener given a hand-off (Options.IdleHandoff, the
// gateway's shared poller of idle connections) makes net/http let go of
// such a connection instead, and the hand-off watches it without a
// goroutine until the client's next request, which a server of the
// hand-off's serves with the same handler and bounds (the gateway's
// serveRest).
//
// How net/http is made to let go, without hijacking (only a handler can):
// once a request was answered and the connection kept alive, net/http
// calls ConnState(StateIdle), sets the idle deadline (one
// SetReadDeadline), and peeks at its reader for the next request's first
// bytes; with nothing buffered that peek reads the connection with the
// reader's whole buffer (netHTTPReadBuffer). When that read finds nothing
// in the socket for handoffGrace, the connection is handed off and the
// read fails: net/http ends the connection's goroutine, closing the
// connection (the Close is swallowed: the hand-off owns it now) and
// telling ConnState StateClosed (swallowed too: the connection stays
// open and idle under the cap, where an eviction still closes it first,
// in the same order). A read at any other point (a request's bytes
// already in net/http's reader, a request being read, a new connection's
// first request) is never handed off: nothing net/http read is lost.
// handoffGrace keeps a client that sends its next request at once
// (benchmarks, an agent's initialize then notifications/initialized) on
// net/http's goroutine, as before.

// netHTTPReadBuffer is the size of net/http's per-connection bufio.Reader
// (bufio's default): a read of exactly this many bytes while idle is
// net/http's peek for the next request with nothing buffered.
const netHTTPReadBuffer = 4 << 10

// handoffGrace is how long an idle kept-alive connection stays on
// net/http's goroutine before it is handed off.
const handoffGrace = 100 * time.Millisecond

// errHandedOff fails net/http's idle read of a connection handed off.
var errHandedOff = errors.New("httpserve: idle connection handed off")

// keptIdle values of conn.keptIdle.
const (
	keptNone     = 0 // not idle after a served request
	keptIdle     = 1 // ConnState(StateIdle) after a served request
	keptDeadline = 2 // and then one SetReadDeadline: net/http's idle wait
	keptMore     = 3 // and then more: a request is being read
)

// SetHandoff sets the hand-off of l's idle kept-alive connections (nil:
// none): f is called, on the connection's net/http goroutine, with an
// idle connection whose client sent nothing for handoffGrace; it reports
// whether it took the connection (then it serves or closes it from then
// on, and closes it at the latest when the connection's idle timeout
// passes). Only connections served by a server whose ConnState is l's (or
// told through the connection's ConnState method) are handed off.
func (l *Listener) SetHandoff(f func(net.Conn) bool) {
	l.mu.Lock()
	l.handoff = f
	l.mu.Unlock()
}

// SetReadDeadline sets the connection's read deadline, counting the
// one net/http sets before its idle wait (see above).
func (c *conn) SetReadDeadline(t time.Time) error {
	if !c.keptIdle.CompareAndSwap(keptIdle, keptDeadline) {
		c.keptIdle.CompareAndSwap(keptDeadline, keptMore)
	}
	var at int64
	if !t.IsZero() {
		at = t.UnixNano()
	}
	c.askedRead.Store(at)
	return c.Conn.SetReadDeadline(t)
}

// readDeadline is the read deadline last set through c (zero: none).
func (c *conn) readDeadline() time.Time {
	if at := c.askedRead.Load(); at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}

// SetDeadline sets both deadlines (SetReadDeadline's count included).
func (c *conn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// tryHandoff hands c off (see above) when p is net/http's idle peek with
// nothing buffered and the client sends nothing for handoffGrace;
// handedOff when it did (the Read fails with errHandedOff). seen reports
// that the grace's wait found a byte of the client's next request (or
// the connection's end) in the socket, where it stays until read: Read
// need not peek for it again (one system call less per kept-alive
// request; docs/performance.md, "httpcpu44").
func (c *conn) tryHandoff(p []byte) (handedOff, seen bool) {
	if len(p) != netHTTPReadBuffer || !c.keptIdle.CompareAndSwap(keptDeadline, keptNone) || !canPeek {
		return false, false
	}
	l := c.l
	l.mu.Lock()
	f := l.handoff
	grace := l.handoffGrace
	ok := f != nil && !c.closed && c.elem != nil
	l.mu.Unlock()
	if !ok {
		return false, false
	}
	if grace > 0 {
		quiet, seen := c.quietFor(grace)
		if !quiet {
			return false, seen
		}
	}
	if hasUnread(c.Conn) {
		return false, true
	}
	l.mu.Lock()
	if c.closed || c.elem == nil {
		l.mu.Unlock()
		return false, false
	}
	c.owedClose, c.owedClosed = true, true
	l.mu.Unlock()
	if f(c) {
		return true, false
	}
	l.mu.Lock()
	c.owedClose, c.owedClosed = false, false
	l.mu.Unlock()
	return false, false
}

// quietFor waits up to d (within the read deadline net/http set) for a
// byte of the client's next request; quiet when none came and the socket
// holds nothing, seen when the wait ended on a byte or the connection's
// end (awaitByte) and net/http's deadline is back in force.
func (c *conn) quietFor(d time.Duration) (quiet, seen bool) {
	asked := c.readDeadline()
	until := time.Now().Add(d)
	if !asked.IsZero() && asked.Before(until) {
		return false, false // the idle timeout comes first: net/http closes it
	}
	if c.Conn.SetReadDeadline(until) != nil {
		return false, false
	}
	err := awaitByte(c.Conn)
	if c.Conn.SetReadDeadline(asked) != nil {
		return false, false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout(), err == nil
}

// swallowClose reports whether c's Close is the one owed after a
// hand-off (net/http letting go of it), which must not close it.
func (c *conn) swallowClose() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.owedClose {
		c.owedClose = false
		return true
	}
	return false
}

// swallowState reports whether state, told for c, is the StateClosed owed
// after a hand-off; l.mu is held. Any other state marks whether c is idle
// after a served request (keptIdle).
func (c *conn) swallowState(state http.ConnState) bool {
	if state == http.StateClosed && c.owedClosed {
		c.owedClosed = false
		return true
	}
	if state == http.StateIdle {
		c.keptIdle.Store(keptIdle)
	} else {
		c.keptIdle.Store(keptNone)
	}
	return false
}
