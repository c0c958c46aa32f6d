package gateway

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// An answered kept-alive connection idles without a goroutine (issue 13,
// idle35). After a parked call's answer, a connection whose client sent
// nothing more and did not ask to close is served on by a net/http server
// of the gateway's own (serveRest), as net/http would: its connection
// goroutine (≈ 17 KB with its bufio buffers) then waits in a read for the
// client's next request, which a kept-alive agent may send much later or
// never. At approve-all's peak with 10,000 held 2025-era calls, those were
// ≈ 10,000 goroutines (docs/performance.md, "peak33", "idle33").
//
// Instead, on Linux, the connection is watched on the gateway's shared
// poller (leanwatch_linux.go) while it idles: no goroutine and no buffer
// per connection, one epoll registration and one runtime timer. The first
// byte of the client's next request hands the connection to serveRest on
// a goroutine (the read-header timeout runs from that byte, as net/http's
// for a later request); its end closes it; so does the idle timeout of
// the server the POST came through (restIdleTimeout without one), a
// runtime timer (time.AfterFunc: no goroutine until it fires). A listener
// that caps connections (httpserve.Listener) sees it idle, and its
// eviction takes it out of the set before closing it (OnEvict): a closed
// descriptor leaves an epoll set without an event. The gateway's closing
// ends the poller's loop, which closes every connection still watched.
// The watch counts in the gateway's WaitGroup until one of these ended
// it. A TLS connection (its layer may hold decrypted bytes), a platform
// without the poller, a poller that has stopped or a connection without a
// descriptor keep serveRest's goroutine.

// An idleWatch is a connection's watch on the shared poller while it idles
// (connPoller.watchIdle).
type idleWatch interface {
	// unwatch takes the watch out of the set and reports whether it was
	// still there (none of its callbacks ran or will run).
	unwatch() bool
}

// An evictNotifier is a connection of a listener that evicts idle
// connections (httpserve.Listener's): f is called before it is closed by
// an eviction (nil: nothing).
type evictNotifier interface {
	OnEvict(f func())
}

// restIdleWait is how long a connection served after a parked call may
// idle between requests: from's IdleTimeout, else restIdleTimeout.
func restIdleWait(from *http.Server) time.Duration {
	if from != nil && from.IdleTimeout > 0 {
		return from.IdleTimeout
	}
	return restIdleTimeout
}

// An idleConn is an answered connection idle on the shared poller
// (serveIdle): exactly one of its ends runs (end).
type idleConn struct {
	f     *httpFront
	conn  net.Conn
	from  *http.Server
	evict evictNotifier // nil when conn's listener evicts nothing

	// mu is held by serveIdle until w and timer are set, so that an end
	// that comes at once (the client's byte already there) finds them.
	mu    sync.Mutex
	w     idleWatch   // guarded by mu
	timer *time.Timer // guarded by mu
	done  bool        // guarded by mu
}

// serveIdle watches conn, a connection whose parked call was answered and
// whose client sent nothing more, on the gateway's shared poller until
// the client's next request comes (then serveRest serves it), the client
// ends it, it idles past its idle timeout, the listener evicts it or the
// gateway closes (see above). It reports false, having changed nothing,
// when conn cannot be watched so; serveRest then serves it. The caller
// holds a count of the gateway's WaitGroup. handed: conn comes from its
// listener's hand-off (KeepIdle), which counts it idle already.
func (f *httpFront) serveIdle(conn net.Conn, from *http.Server, handed bool) bool {
	g := f.g
	p := g.parkPoll.Load()
	if p == nil || g.root.Err() != nil {
		return false
	}
	// A connection served after a parked answer (serveRest) and parked
	// again comes back wrapped, with nothing left to read in its prefix.
	if pc, ok := conn.(*prefixConn); ok && pc.pre.Len() == 0 {
		conn = pc.Conn
	}
	ic := &idleConn{f: f, conn: conn, from: from}
	ic.evict, _ = conn.(evictNotifier)
	ic.mu.Lock()
	defer ic.mu.Unlock()
	g.wg.Add(1) // while the caller's count is held: Close has not returned
	w, ok := p.watchIdle(conn, ic.gone, ic.ready, ic.left)
	if !ok {
		g.wg.Done()
		return false
	}
	ic.w = w
	ic.timer = time.AfterFunc(restIdleWait(from), ic.expire)
	// The hook before the listener may evict it.
	if ic.evict != nil {
		ic.evict.OnEvict(ic.evicted)
	}
	if tell, ok := conn.(connStater); ok && !handed {
		tell.ConnState(http.StateIdle)
	}
	return true
}

// KeepIdle takes conn, a kept-alive connection of an agent listener idle
// after a request that from, the listener's server, answered itself
// (/healthz, the /v1/ agent API, a 401), off net/http: on Linux it waits
// for the client's next request on the gateway's shared poller, without
// a goroutine or buffers, as an answered parked call's connection does
// (serveIdle; issue 13, idle40), and that request is served by serveRest
// as from would serve it (from's handler, so the same authentication and
// limits; its header bound and timeouts); from's idle timeout closes it
// first, and so do an eviction by its capped listener and the gateway's
// Close. It reports false, having changed nothing, when it cannot take
// conn (no poller on this platform or any more, a TLS connection, no
// descriptor, the gateway closing, from without a handler). It is
// httpserve.Options.IdleHandoff for toolgate serve's agent listener.
func (g *Gateway) KeepIdle(conn net.Conn, from *http.Server) bool {
	if from == nil || from.Handler == nil || !g.parkStarts() {
		return false
	}
	defer g.wg.Done()
	// With from set, serveRest serves from's handler: the front's own
	// fields are not used.
	f := &httpFront{g: g}
	return f.serveIdle(conn, from, true)
}

// end reports whether the caller is the one end of ic, and if so stops
// its timer; release then leaves the WaitGroup.
func (ic *idleConn) end() bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.done {
		return false
	}
	ic.done = true
	ic.timer.Stop()
	return true
}

// unwatch takes ic's watch out of the set (expire, evicted).
func (ic *idleConn) unwatch() bool {
	ic.mu.Lock()
	w := ic.w
	ic.mu.Unlock()
	return w.unwatch()
}

func (ic *idleConn) release() { ic.f.g.wg.Done() }

// ready: the client's next request came; serveRest serves it on a
// goroutine (the poller's must not wait).
func (ic *idleConn) ready() {
	if !ic.end() {
		return
	}
	if ic.evict != nil {
		ic.evict.OnEvict(nil)
	}
	go func() {
		defer ic.release()
		ic.f.serveRest(ic.conn, nil, true, ic.from)
	}()
}

// gone: the client ended the connection.
func (ic *idleConn) gone() {
	if ic.end() {
		_ = ic.conn.Close()
		ic.release()
	}
}

// expire: the idle timeout passed with nothing from the client.
func (ic *idleConn) expire() {
	if ic.unwatch() && ic.end() {
		_ = ic.conn.Close()
		ic.release()
	}
}

// evicted: the listener evicts the connection and closes it next.
func (ic *idleConn) evicted() {
	if ic.unwatch() && ic.end() {
		ic.release()
	}
}

// left: the poller's loop ended with the connection still watched: the
// gateway closing closes it; a failed set hands it to serveRest's
// goroutine, which waits for the next request as before.
func (ic *idleConn) left() {
	if !ic.end() {
		return
	}
	if ic.f.g.root.Err() != nil {
		_ = ic.conn.Close()
		ic.release()
		return
	}
	if ic.evict != nil {
		ic.evict.OnEvict(nil)
	}
	go func() {
		defer ic.release()
		ic.f.serveRest(ic.conn, nil, false, ic.from)
	}()
}
