package httpserve

import (
	"container/list"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// busyResponse answers a connection refused at the cap.
const busyResponse = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"Content-Length: 33\r\n" +
	"\r\n" +
	"too many connections; try again\r\n"

// refuseWriteTimeout bounds writing busyResponse to a refused connection,
// so a client that does not read cannot hold up Accept.
const refuseWriteTimeout = 100 * time.Millisecond

// shedLogEvery is the least time between two log lines about shed
// connections.
const shedLogEvery = time.Minute

// LimitOptions configures Limit. The zero value (or nil) is valid.
type LimitOptions struct {
	// Name names the listener in logs.
	Name string
	// Logger receives a warning when the cap first sheds a connection and
	// then at most once a minute, with counts; default discard.
	Logger *slog.Logger
	// OnShed is called for each shed connection; see Options.OnShed.
	OnShed func(how string)
}

// A Listener caps the connections open at once that it accepted. Create it
// with [Limit] and give its ConnState method to the http.Server that
// serves it, which tells the Listener which connections carry a request.
//
// At the cap, accepting a connection first closes the connection that has
// waited longest without carrying a request (opened and sent nothing yet,
// or idle between keep-alive requests), if it has waited idleGrace. A
// connection with a request in flight (a held call, an event stream) is
// never closed, nor one whose request has come but was not read yet (an
// overloaded process reads late: in its socket, or being read, before
// http.Server calls it active). When no connection has been idle that
// long, the one whose request headers stopped coming longest ago is
// closed instead: its first bytes came at least headerGrace ago, nothing
// came for headerStall and nothing waits unread in its socket (a client
// that sent part of a request line and went silent, which would otherwise
// hold its place until read_header_timeout; listen37). Only when neither
// is there does a connection idle for less than idleGrace go, the longest
// waiting first: its client has just connected or just got an answer and
// is likely about to send on it, and a POST whose connection is closed
// under it fails with EOF (net/http's client retries only idempotent
// requests), as an agent's notifications/initialized did during a
// one-byte flood. When every open connection carries a request, the new
// one is answered 503 and closed at once. So a flood of idle or stalled
// connections holds at most the cap's descriptors and cannot crowd out
// work: new connections always get in while any idle or stalled one can
// make room. Its methods are safe for concurrent use.
type Listener struct {
	net.Listener
	maxConns int
	name     string
	log      *slog.Logger
	onShed   func(how string)

	mu   sync.Mutex // guards the fields below and every conn's elem, closed, readElem and readSince
	open int        // accepted and not yet closed
	idle list.List  // *conn without a request in flight, longest waiting first
	// reading holds the *conn whose request's first bytes were read and
	// whose headers are not complete yet (http.Server has not called it
	// active), in the order their first bytes came.
	reading list.List
	// headerGrace and headerStall: a connection in reading is closed at
	// the cap (when none is idle) once its first bytes came headerGrace
	// ago and nothing came for headerStall.
	headerGrace, headerStall time.Duration
	// idleGrace: an idle connection is closed at the cap before a stalled
	// one only once it has been idle this long.
	idleGrace time.Duration
	// Counts since the last log line, and when that was.
	evicted, refused int
	logged           time.Time
	// handoff takes idle kept-alive connections off net/http (SetHandoff,
	// handoff.go); handoffGrace is how long they idle on net/http first.
	handoff      func(net.Conn) bool
	handoffGrace time.Duration
}

// Limit returns ln capped at maxConns connections (maxConns >= 1).
func Limit(ln net.Listener, maxConns int, opts *LimitOptions) *Listener {
	var o LimitOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{Listener: ln, maxConns: maxConns, name: o.Name, log: o.Logger, onShed: o.OnShed,
		headerGrace: headerGrace, headerStall: headerStall, idleGrace: idleGrace, handoffGrace: handoffGrace}
}

// headerGrace and headerStall: see Listener.headerGrace. An HTTP client
// writes its request line and headers at once (one segment on loopback or
// a LAN), so a request whose headers are still incomplete a second after
// their first byte, and from which nothing came for half a second, is a
// client that stalled or stopped on purpose, not one that is slow to send.
const (
	headerGrace = time.Second
	headerStall = 500 * time.Millisecond
)

// idleGrace: see Listener.idleGrace. An agent sends its next request
// within milliseconds of an answer when it has one (initialize, then
// notifications/initialized, then tools/list), so a connection idle for a
// second is one its client is not about to use.
const idleGrace = time.Second

// maxEvictScan bounds how many of the longest-waiting idle connections
// Accept looks at for one it may evict (each look is a system call): past
// them, the new connection is refused.
const maxEvictScan = 16

// conn is a connection accepted by a Listener.
type conn struct {
	net.Conn
	l      *Listener
	elem   *list.Element // in l.idle while it carries no request; guarded by l.mu
	closed bool          // guarded by l.mu
	// idleSince is when c last joined l.idle; guarded by l.mu.
	idleSince time.Time
	// inIdle mirrors elem != nil, for Read to look at without l.mu.
	inIdle atomic.Bool
	// readElem is c's element in l.reading while its request's headers
	// are being read; readSince is when their first bytes were read.
	readElem  *list.Element
	readSince time.Time
	// inReading mirrors readElem != nil; lastRead is when bytes were last
	// read while it was set (Unix nanoseconds).
	inReading atomic.Bool
	lastRead  atomic.Int64
	// onEvict, guarded by l.mu, is called before c is closed by an
	// eviction (OnEvict).
	onEvict func()
	// keptIdle tells net/http's idle wait after a served request
	// (handoff.go); askedRead is the read deadline last set through c
	// (Unix nanoseconds, 0: none).
	keptIdle  atomic.Int32
	askedRead atomic.Int64
	// owedClose and owedClosed, guarded by l.mu: c was handed off, and
	// the Close and the StateClosed of the server that let go of it are
	// still to come (swallowed).
	owedClose, owedClosed bool
}

// OnEvict sets f (nil: none) to be called when the Listener evicts c,
// before it closes c: whoever watches c's descriptor outside net/http (the
// gateway's shared poller of idle kept-alive connections) stops watching
// it first, as a closed descriptor leaves an epoll set without an event.
// f runs on the goroutine of the Listener's Accept, without its lock held;
// it must not block.
func (c *conn) OnEvict(f func()) {
	c.l.mu.Lock()
	c.onEvict = f
	c.l.mu.Unlock()
}

// Read reads from the connection; the first bytes read while c counts as
// idle are a request's: c is no longer evicted (http.Server calls it
// active only once the request's headers are read). While c counts as
// idle, Read first waits for a byte without consuming it (awaitByte, or
// the hand-off's grace wait when that saw one: tryHandoff) and
// takes c out of the idle list before it reads: an eviction, which looks
// at the list under the same lock, either closed c before any byte left
// its socket (Read fails, nothing of the request was read) or finds c
// busy. Reading first and leaving the list after let an Accept in between
// close a connection whose request net/http was reading (fixes36). Leaving
// the idle list, c joins the reading list until http.Server calls it
// active (or idle, or closed); bytes read meanwhile are noted (lastRead)
// under the lock an eviction takes: a connection closed as stalled
// (Listener.stalled) between its socket's read and that note returns
// net.ErrClosed, not the bytes.
func (c *conn) Read(p []byte) (int, error) {
	seen := false
	if c.inIdle.Load() {
		var handedOff bool
		if handedOff, seen = c.tryHandoff(p); handedOff {
			return 0, errHandedOff
		}
	}
	// watched: c may be evicted during this Read (an eviction clears
	// both flags, so they are read before).
	watched := c.inIdle.Load() || c.inReading.Load()
	if c.inIdle.Load() && (seen || awaitByte(c.Conn) == nil) {
		c.l.mu.Lock()
		evicted := c.closed
		c.l.startReading(c)
		c.l.mu.Unlock()
		if evicted {
			return 0, net.ErrClosed
		}
	}
	n, err := c.Conn.Read(p)
	if n > 0 && watched {
		c.l.mu.Lock()
		evicted := c.closed
		if c.inIdle.Load() {
			c.l.startReading(c)
		} else if c.inReading.Load() {
			c.lastRead.Store(time.Now().UnixNano())
		}
		c.l.mu.Unlock()
		if evicted {
			// Closed as stalled after these bytes left the socket and
			// before this Read noted them: they go nowhere, so net/http
			// never serves a request whose connection is gone.
			return 0, net.ErrClosed
		}
	}
	return n, err
}

// startReading moves c from the idle list to the end of the reading list,
// unless c is closed. l.mu must be held.
func (l *Listener) startReading(c *conn) {
	if c.closed {
		return
	}
	l.unidle(c)
	if c.readElem == nil {
		now := time.Now()
		c.readSince = now
		c.lastRead.Store(now.UnixNano())
		c.readElem = l.reading.PushBack(c)
		c.inReading.Store(true)
	}
}

// unreading takes c out of the reading list. l.mu must be held.
func (l *Listener) unreading(c *conn) {
	if c.readElem != nil {
		l.reading.Remove(c.readElem)
		c.readElem = nil
		c.inReading.Store(false)
	}
}

// stalled returns the connection of the reading list whose first bytes
// came longest ago, at least headerGrace ago, from which nothing came for
// headerStall and that has nothing unread in its socket, among the first
// maxEvictScan; nil when there is none. l.mu must be held.
func (l *Listener) stalled(now time.Time) *conn {
	k := 0
	for e := l.reading.Front(); e != nil && k < maxEvictScan; e, k = e.Next(), k+1 {
		c := e.Value.(*conn)
		if now.Sub(c.readSince) < l.headerGrace {
			return nil // the rest came later still
		}
		if now.Sub(time.Unix(0, c.lastRead.Load())) >= l.headerStall && !hasUnread(c.Conn) {
			return c
		}
	}
	return nil
}

// errNoPeek: awaitByte cannot wait on the connection's socket.
var errNoPeek = errors.New("httpserve: no descriptor to peek")

// unidle takes c out of the idle list. l.mu must be held.
func (l *Listener) unidle(c *conn) {
	if c.elem != nil {
		l.idle.Remove(c.elem)
		c.elem = nil
		c.inIdle.Store(false)
	}
}

// pushIdle puts c at the end of the idle list. l.mu must be held.
func (l *Listener) pushIdle(c *conn) {
	c.idleSince = time.Now()
	c.elem = l.idle.PushBack(c)
	c.inIdle.Store(true)
}

// evictable returns the idle connection that has waited longest, at least
// minIdle (by now), and has no request waiting in its socket, among the
// first maxEvictScan; nil when there is none. l.mu must be held.
func (l *Listener) evictable(now time.Time, minIdle time.Duration) *conn {
	k := 0
	for e := l.idle.Front(); e != nil && k < maxEvictScan; e, k = e.Next(), k+1 {
		c := e.Value.(*conn)
		if now.Sub(c.idleSince) < minIdle {
			return nil // the rest joined later still
		}
		if !hasUnread(c.Conn) {
			return c
		}
	}
	return nil
}

// victim returns the connection Accept closes to make room, in the
// type's doc's order; nil when none may go. l.mu must be held.
func (l *Listener) victim(now time.Time) *conn {
	if c := l.evictable(now, l.idleGrace); c != nil {
		return c
	}
	if c := l.stalled(now); c != nil {
		return c
	}
	return l.evictable(now, 0)
}

// SyscallConn is the underlying connection's (syscall.Conn), so that a
// connection taken from net/http (a parked call's, which the gateway
// watches with epoll) still reaches its descriptor; an error when it has
// none.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("httpserve: the connection has no descriptor")
	}
	return sc.SyscallConn()
}

// ConnState tells c's Listener that c is in state, as Listener.ConnState
// does, for a connection served after a hijack by an http.Server that is
// not the Listener's (one a handler started on the connection it took
// over): without it such a connection counts as carrying a request for
// its whole life and is never evicted, even idle between requests.
func (c *conn) ConnState(state http.ConnState) { c.l.ConnState(c, state) }

// Close closes the connection and frees its place under the cap.
func (c *conn) Close() error {
	if c.swallowClose() {
		return nil // net/http letting go of c, handed off (handoff.go)
	}
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// forget removes c from the count, once. l.mu must be held.
func (l *Listener) forget(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	l.open--
	l.unidle(c)
	l.unreading(c)
}

// Accept waits for a connection and returns it, making room under the cap
// as the type's doc says. Connections refused at the cap are not returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		var victim *conn
		var onEvict func()
		l.mu.Lock()
		if l.open >= l.maxConns {
			if victim = l.victim(time.Now()); victim != nil {
				l.forget(victim)
				onEvict, victim.onEvict = victim.onEvict, nil
			}
		}
		if l.open >= l.maxConns {
			l.refused++
			l.maybeLog()
			l.mu.Unlock()
			// Counted before the answer: whoever reads the 503 finds it
			// counted (TestCapSparesUnreadRequest read them in either order).
			l.shed("refused")
			refuse(nc)
			continue
		}
		c := &conn{Conn: nc, l: l}
		l.open++
		l.pushIdle(c)
		if victim != nil {
			l.evicted++
			l.maybeLog()
		}
		l.mu.Unlock()
		if victim != nil {
			if onEvict != nil {
				onEvict()
			}
			_ = victim.Conn.Close()
			l.shed("evicted")
		}
		return c, nil
	}
}

// ConnState is the http.Server.ConnState hook that tells l which
// connections carry a request.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*conn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed || c.swallowState(state) {
		return
	}
	l.unidle(c)
	l.unreading(c)
	switch state {
	case http.StateNew, http.StateIdle:
		l.pushIdle(c) // now the one that waited least
	case http.StateClosed:
		l.forget(c)
	case http.StateActive, http.StateHijacked:
		// Carries a request (or left net/http's hands): never evicted.
	}
}

// Idle returns the number of open connections that carry no request
// (the ones Accept may evict).
func (l *Listener) Idle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle.Len()
}

// Open returns the number of open connections.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func (l *Listener) shed(how string) {
	if l.onShed != nil {
		l.onShed(how)
	}
}

// maybeLog logs the shed counts when the last line is old enough. l.mu
// must be held.
func (l *Listener) maybeLog() {
	now := time.Now()
	if !l.logged.IsZero() && now.Sub(l.logged) < shedLogEvery {
		return
	}
	l.log.Warn("connection cap reached: idle or stalled connections closed to make room, new ones refused when none was",
		"listener", l.name, "max_conns", l.maxConns, "evicted", l.evicted, "refused", l.refused)
	l.logged, l.evicted, l.refused = now, 0, 0
}

// refuse answers nc 503 (best effort, bounded in time) and closes it.
func refuse(nc net.Conn) {
	_ = nc.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	_, _ = io.WriteString(nc, busyResponse)
	_ = nc.Close()
}
