package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"toolgate/internal/gate"
	"toolgate/internal/httpserve"
)

// Parking a held call off net/http's connection (issue 13). A
// 2026-07-28 tools/call the lean front holds (lean2026.go) writes nothing
// until it is answered. On HTTP/1.1 ServeHTTP then takes the connection
// from net/http (http.Hijacker) and returns: net/http's connection
// goroutine, its backgroundRead and its per-connection bufio reader and
// writers are gone. The call is admitted on a goroutine that ends once it
// is held (admitParked); what remains per held call is the leanHold, the
// net.Conn, one waiter goroutine parked in the gate's wait (waitParked,
// on a fresh small stack) and the connection's watch on the gateway's
// shared poller (leanwatch_linux.go; elsewhere a reader goroutine whose
// one-byte read notices it, connWatch), which notices a dropped
// connection (the POST's end: context.Canceled at once, as
// PropagateRequestCancellation makes it on the SDK path). The answer is
// written by the waiter as an HTTP/1.1 response (HTTP/1.0 to an HTTP/1.0
// request, as net/http answers it) with the same
// status, headers and body the connection would have carried, with a
// Content-Length, and "Connection: close": the connection cannot go back
// to net/http's keep-alive pool, so it is closed after the answer.
//
// A client that sent more on the connection (an HTTP/1.1 pipelined
// request after the held POST, already buffered when the connection was
// taken or read by the reader meanwhile) is not closed on: the answer
// keeps the connection alive and the rest of it is served by a
// net/http server of its own (serveRest), in order, as net/http would
// have served it after the held call's response. As with net/http's
// backgroundRead, a drop is no longer noticed once such bytes came.
//
// A call that came over TLS (HTTP/1.1) is parked the same way on the
// *tls.Conn (leanparktls.go); a 2025-era session's call is parked with
// its stream (leanstream.go), also when its client asked to close the
// connection. HTTP/2 (no hijack: its streams share one connection), an
// HTTP/1.0 stream, a connection net/http cannot hand over and a gateway
// that is closing keep the path on the connection's goroutine
// (leanhold.go). Close waits for parked calls (the gateway's
// WaitGroup), which its cancellation answers (ErrShutdown).

// parkedWriteTimeout bounds the writing of a parked call's answer: a
// client that stops reading must not keep its waiter (and Close) forever.
// It is how long a write may take none of the answer (writeParked), not
// the whole answer's time: a slow reader gets it all, as on net/http's
// connection.
const parkedWriteTimeout = 30 * time.Second

// writeParked writes p on conn, the connection of a parked call. It gives
// up when timeout passes with none of what is left taken (the client
// stopped reading), or, once a timeout passed, when stop is closed (the
// gateway closing); a client that keeps reading gets all of p however
// long that takes (attack20: 30 s for the whole cut a large answer to a
// slow link).
func writeParked(conn net.Conn, p []byte, timeout time.Duration, stop <-chan struct{}) (int, error) {
	defer func() { _ = conn.SetWriteDeadline(time.Time{}) }()
	written := 0
	for {
		_ = conn.SetWriteDeadline(time.Now().Add(timeout))
		n, err := conn.Write(p[written:])
		written += n
		if err == nil || n == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return written, err
		}
		select {
		case <-stop:
			return written, err
		default:
		}
	}
}

// A parkedWriter writes on a parked call's connection (writeParked).
type parkedWriter struct {
	conn    net.Conn
	timeout time.Duration
	stop    <-chan struct{}
}

func (w parkedWriter) Write(p []byte) (int, error) { return writeParked(w.conn, p, w.timeout, w.stop) }

// restIdleTimeout is how long a connection served after a parked call
// (serveRest) may idle between requests.
const restIdleTimeout = 2 * time.Minute

// restShutdownGrace is how long, once the gateway closes, a request in
// flight on a connection serveRest serves may take to finish before the
// connection is closed: httpserve's shutdown timeout, as for the
// listener's own connections.
const restShutdownGrace = httpserve.DefaultShutdownTimeout

// parkHook, when set (tests), is told of each held call the front parked
// off net/http's connection.
type parkHook func()

// park takes the connection of the 2026-07-28 POST r, whose call the
// front holds as l, from net/http and holds the call on a goroutine of
// the gateway, answering it on the connection itself (see above). It
// reports false, having changed nothing, when the call is not parked this
// way; the caller then holds it on the connection's goroutine.
//
//go:noinline // its frame is gone before a call held on the connection's goroutine waits
func (l *leanHold) park(w http.ResponseWriter, r *http.Request) bool {
	g := l.f.g
	if r.ProtoMajor != 1 || l.later.cancel == nil || l.f.noPark {
		return false
	}
	// A 2025-era session's call, and a 2026-07-28 call with a progress
	// token, streams its response (leanstream.go): on HTTP/1.1 only
	// (chunked); a client that asked to close gets "Connection: close"
	// and the connection's end after the answer, as from net/http.
	stream := l.w != nil
	if (!stream && l.mw == nil) || (stream && r.ProtoMinor != 1) {
		return false
	}
	if !g.parkStarts() {
		return false
	}
	header := keepHeader(w.Header())
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2, or a writer that cannot hand its connection over.
		g.wg.Done()
		return false
	}
	// What the client sent after the POST's body, already read into
	// net/http's buffer (bufio.Reader.Peek of what is buffered cannot fail).
	var pending []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Peek(n)
		pending = bytes.Clone(b)
	}
	// Over TLS, the rest of it may be in the TLS layer, decrypted
	// (leanparktls.go).
	var tlsEnd error
	if tc, ok := conn.(*tls.Conn); ok {
		var got []byte
		got, tlsEnd = drainTLS(tc)
		pending = append(pending, got...)
	}
	// r's context ends when ServeHTTP returns: the drop watch
	// (admitParked) watches the connection instead. If the watch already fired, the call is
	// cancelled already, and answered as such.
	if l.later.stop != nil {
		l.later.stop()
		l.later.stop = nil
	}
	l.mw = nil // the response (and through it the request and net/http's buffers) is not kept
	if l.f.park != nil {
		l.f.park() // before the answer can be written
	}
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	// What the answer keeps of the request's framing goes with whatever
	// writes the answer's head: the stream, or else the parkedConn.
	l.pc = &parkedConn{conn: conn, pending: pending, srv: srv}
	if stream {
		timeout := parkedWriteTimeout
		if d := g.parkWrite; d > 0 {
			timeout = d
		}
		l.pc.stream = &parkedStream{conn: conn, kept: header, timeout: timeout, stop: g.root.Done(), gone: l.streamGone, held: true, close: r.Close}
		l.w.parkOn(l.pc.stream)
	} else {
		l.pc.header, l.pc.close, l.pc.http10 = header, r.Close, r.ProtoMinor == 0
	}
	// The drop watch and the heartbeat start now, so that a call that
	// waits for its admission (parkadmit.go) notices its client going
	// away and keeps its stream alive meanwhile.
	cancel := l.later.cancel
	gone := func() { cancel(context.Canceled) }
	if l.pc.stream != nil {
		gone = l.streamGone
	}
	if tlsEnd != nil {
		// The client ended the connection already (a close_notify).
		l.pc.watch = goneWatch{}
		gone()
	} else {
		l.pc.watch = g.watchParked(conn, gone)
	}
	l.armHold()
	g.parkQ.add(l)
	return true
}

// streamGone is what the end of a parked stream's connection, or a failed
// write on it, does to its call l: a 2026-07-28 call (with a progress
// token) is cancelled at once with context.Canceled, as the POST's end
// cancels it on the connection's goroutine (serveLeanModern); a 2025-era
// one after the drop grace (clientGone).
func (l *leanHold) streamGone() {
	if l.modern {
		l.later.cancel(context.Canceled)
		return
	}
	l.clientGone()
}

// clientGone cancels the parked 2025-era call l after the drop grace, as
// the end of its POST does on the connection's goroutine (serveLean):
// its connection ended, or a write on it failed.
func (l *leanHold) clientGone() {
	cancel := l.later.cancel
	time.AfterFunc(l.f.opts.DropGrace, func() { cancel(ErrClientGone) })
}

// A parkedConn is what a parked call keeps of its connection: the
// connection, the response's headers as the front set them, what the
// client sent after the POST (read already), and the watch for its
// client going away.
type parkedConn struct {
	conn    net.Conn
	header  parkedHeader
	pending []byte
	watch   dropWatch
	// stream, for a 2025-era session's call (header nil), is its
	// response, which its heartbeatWriter writes on (leanstream.go).
	stream *parkedStream
	// srv is the server the POST came through (nil if unknown), whose
	// handler serves what follows the answer (serveRest).
	srv *http.Server
	// close is set when the client asked to close the connection after
	// the response ("Connection: close", or HTTP/1.0 without
	// keep-alive): the answer says so and nothing after it is served,
	// as net/http does (RFC 9112 9.6). http10: the request was HTTP/1.0,
	// and so is the answer. Both are for an answer without a stream;
	// a stream (HTTP/1.1 only) keeps its own (parkedStream.close).
	close, http10 bool
}

// admitParked admits the parked call l (the policy, the store write of
// its request and its first read: deep frames) on one of the gateway's
// admitting goroutines (parkadmit.go), and hands the hold to the gate's
// events (no goroutine) or to a fresh goroutine (waitParked) whose stack
// never held those frames: the one goroutine a parked call keeps while
// held (docs/performance.md, "One goroutine per parked call"). A call
// decided at once is answered on a goroutine of its own, so that the
// admitting goroutine does not wait for the client.
func (l *leanHold) admitParked() {
	if sp, ok := l.f.g.gk.(admitterSplit); ok && l.admitFirst(sp) {
		if as, ok := sp.(admitterAsync); ok && !l.f.g.opts.HeldGoroutines {
			// Waited for without a goroutine: the gate calls heldDone.
			hctx, hold := l.hctx, l.hold
			l.hctx, l.hold = nil, gate.HeldCall{}
			as.WaitHoldFunc(hctx, hold, l.heldDone)
			return
		}
		go l.waitParked()
		return
	}
	go l.waitParked()
}

// admitterAsync is an admitterSplit that also waits for a held call's
// decision without a goroutine ([gate.Gate.WaitHoldFunc]).
type admitterAsync interface {
	WaitHoldFunc(hctx context.Context, hc gate.HeldCall, done func(*gate.Admission))
}

// heldDone queues the parked call l, with adm, the gate's answer after a
// wait without a goroutine (admitParked), to be answered by one of the
// gateway's answering goroutines (parkanswer.go); the gate's goroutine
// that ended the wait returns at once.
func (l *leanHold) heldDone(adm *gate.Admission) {
	l.adm = adm
	l.f.g.answerQ.add(l)
}

// waitParked holds the parked call l until it is decided and answers it
// on its connection. Its frame is small: the answer is written after it
// returns from the wait (answerParked).
func (l *leanHold) waitParked() {
	defer l.f.g.wg.Done()
	l.wait()
	l.answerParked()
}

// answerParked writes the answer to the parked call l on its connection
// and closes it, or serves what the client sent after the POST (not when
// the client asked to close: parkedConn.close).
//
//go:noinline // its locals stay out of waitParked's parked frame
func (l *leanHold) answerParked() {
	if l.pc.stream != nil {
		l.answerStream()
		return
	}
	conn, pending, cw, srv, closing, http10 := l.pc.conn, l.pc.pending, l.pc.watch, l.pc.srv, l.pc.close, l.pc.http10
	h, herr := l.pc.header.header()
	if herr != nil {
		l.f.g.log.Error("cannot rebuild a parked call's response header; answering without it", "err", herr)
	}
	pw := &parkedResponse{h: h}
	l.pc = nil
	l.writeParked(pw)
	l.end()
	got, more := cw.stop()
	pending = append(pending, got...)
	more = more || len(pending) > 0
	log := l.f.g.log
	timeout := parkedWriteTimeout
	if d := l.f.g.parkWrite; d > 0 {
		timeout = d
	}
	closing = closing || !more
	if werr := pw.writeTo(parkedWriter{conn: conn, timeout: timeout, stop: l.f.g.root.Done()}, closing, http10); werr != nil {
		log.Debug("cannot write a parked call's answer", "err", werr)
		_ = conn.Close()
		return
	}
	if closing {
		// A client that asked to close and sent more anyway gets its
		// answer before the close; what it sent is not served.
		closeAfterReply(conn, more)
		return
	}
	l.f.serveRest(conn, pending, true, srv)
}

// A dropWatch notices that a parked call's client went away (the end of
// its connection) until stopped. stop ends it and returns the bytes of the
// client's next request it read, if any, and whether the client sent more
// (read already, or left in the connection).
type dropWatch interface {
	stop() (got []byte, more bool)
}

// parkStarts reports whether a call may be parked (the gateway is not
// closed) and if so counts it in the gateway's WaitGroup, which the
// parked call's goroutine leaves (or park, when it parks nothing after
// all), and starts the shared poller of parked connections. Only this
// holds closeMux, not park's hijack of the connection, which waits for
// net/http's background read to stop: at thousands of calls parked at
// once, with the lock held through it, most of the burst's goroutines
// queued on closeMux (docs/performance.md, "held29").
func (g *Gateway) parkStarts() bool {
	g.closeMux.Lock()
	defer g.closeMux.Unlock()
	if g.closed || g.root.Err() != nil {
		return false
	}
	g.startParkPoller()
	g.wg.Add(1)
	return true
}

// startParkPoller starts the gateway's shared poller of parked
// connections (leanwatch_linux.go) unless it runs or cannot run; closeMux
// is held and the gateway is not closed.
func (g *Gateway) startParkPoller() {
	if g.parkPoll.Load() != nil || g.parkPollFailed {
		return
	}
	p, err := newConnPoller(g.log)
	if err != nil {
		g.parkPollFailed = true
		return
	}
	g.parkPoll.Store(p)
	stop := context.AfterFunc(g.root, p.stopLoop)
	g.wg.Go(func() {
		defer stop()
		p.run()
	})
}

// watchParked watches conn, a parked call's connection, for its client
// going away (gone): on the gateway's shared poller when there is one,
// else on a reader goroutine of its own (connWatch).
func (g *Gateway) watchParked(conn net.Conn, gone func()) dropWatch {
	if p := g.parkPoll.Load(); p != nil {
		if w, ok := p.watch(conn, gone); ok {
			return w
		}
	}
	return watchConn(conn, gone)
}

// A connWatch reads one byte of a parked connection: an error before the
// watch is stopped means the client went away (gone is called); a byte
// is the start of the client's next request, kept for serveRest.
type connWatch struct {
	conn    net.Conn
	done    chan struct{}
	aborted atomic.Bool
	got     [1]byte
	n       int // set before done is closed
}

// watchConn starts watching conn on a goroutine of its own, which stop
// ends and waits for.
func watchConn(conn net.Conn, gone func()) *connWatch {
	cw := &connWatch{conn: conn, done: make(chan struct{})}
	go cw.read(gone)
	return cw
}

func (cw *connWatch) read(gone func()) {
	defer close(cw.done)
	n, err := cw.conn.Read(cw.got[:])
	cw.n = n
	if n == 0 && err != nil && !cw.aborted.Load() {
		gone()
	}
}

// stop ends the watch (a read deadline in the past, as net/http aborts
// its backgroundRead), waits for its goroutine and returns the byte it
// read, if any.
func (cw *connWatch) stop() ([]byte, bool) {
	cw.aborted.Store(true)
	_ = cw.conn.SetReadDeadline(time.Unix(1, 0))
	<-cw.done
	_ = cw.conn.SetReadDeadline(time.Time{})
	return cw.got[:cw.n], cw.n > 0
}

// A parkedResponse is an http.ResponseWriter that keeps the answer to a
// parked call, to be written on its connection by writeTo. It has no
// Flush: the answer is written as a whole.
type parkedResponse struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (p *parkedResponse) Header() http.Header { return p.h }

func (p *parkedResponse) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}

func (p *parkedResponse) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return p.body.Write(b)
}

// writeTo writes p on w as an HTTP/1.1 response (HTTP/1.0 to an HTTP/1.0
// request: http10) with a Content-Length and a Date, as net/http writes a
// handler's whole answer, with "Connection: close" when closing (the
// connection is closed after it); as net/http's, an HTTP/1.0 answer says
// "Connection: keep-alive" when not closing and nothing when closing. A
// client that stops reading gets its connection closed (writeParked).
func (p *parkedResponse) writeTo(w parkedWriter, closing, http10 bool) error {
	h := p.h
	if closing {
		h.Del("Connection")
	}
	minor, closeHeader := 1, closing
	if http10 {
		minor, closeHeader = 0, false
		if _, set := h["Connection"]; !closing && !set {
			h.Set("Connection", "keep-alive")
		}
	}
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	status := p.status
	if status == 0 {
		status = http.StatusOK
	}
	resp := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: minor, Header: h,
		ContentLength: int64(p.body.Len()), Body: io.NopCloser(&p.body), Close: closeHeader}
	bw := bufio.NewWriterSize(w, p.body.Len()+512)
	if err := resp.Write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// serveRest serves what follows a parked call's answer on conn (pending:
// the bytes the client sent after the POST, read already; waiting: the
// client sent more, read already or left in the connection) with a
// net/http server of its own, until the connection closes, is taken over
// again (another parked call) or the gateway closes. It returns once the
// server handed the connection to its connection goroutine, which is
// counted in the gateway's WaitGroup until it is done with it. It serves as from,
// the server the POST came through, would have: from's whole handler (a
// listener serves more than /mcp: toolgate serve's agent listener has the
// agents' session API beside it), header bound and timeouts; without from
// (nil), /mcp alone, handed to the front as the gateway's handler does.
// A connection the client sent nothing more on is idle, as net/http's is
// after a response: it may send nothing for the idle timeout, and the
// read-header timeout of its next request runs from that request's first
// byte. On Linux it idles on the gateway's shared poller, without a
// goroutine, until that byte comes (serveIdle, leanparkidle.go); else on
// net/http's connection goroutine (httpserve.AwaitFirstByte).
func (f *httpFront) serveRest(conn net.Conn, pending []byte, waiting bool, from *http.Server) {
	if !waiting && f.serveIdle(conn, from, false) {
		// Idle on the shared poller until the next request (leanparkidle.go).
		return
	}
	handler := http.Handler(nil)
	headerWait, idleWait := parkedWriteTimeout, restIdleWait(from)
	if from != nil {
		handler = from.Handler
		if from.ReadHeaderTimeout > 0 {
			headerWait = from.ReadHeaderTimeout
		}
	}
	if handler == nil {
		mux := http.NewServeMux()
		mux.Handle("/mcp", f)
		handler = mux
	}
	if tc, ok := conn.(*tls.Conn); ok {
		handler = withTLSState(handler, tc)
	}
	under := conn
	if !waiting {
		under = httpserve.AwaitFirstByte(conn, idleWait)
	}
	pre := bytes.NewReader(pending)
	c := net.Conn(&prefixConn{Conn: under, pre: pre, r: io.MultiReader(pre, under)})
	l := &oneConnListener{c: c, addr: conn.LocalAddr()}
	// The server's Serve loop ends once it handed the connection to its
	// connection goroutine (the listener's second Accept fails): what is
	// left per connection is net/http's connection goroutine. The
	// connection is counted in the gateway's WaitGroup until that
	// goroutine is done with it (closed or taken over) and the shutdown
	// below is done or will not run (two parties: left), so that the
	// gateway's Close leaves no goroutine of it behind (after a 413,
	// net/http lingers half a second before closing).
	g := f.g
	g.wg.Add(1) // while the caller's count is held: Close has not returned
	var left atomic.Int32
	left.Store(2)
	release := func() {
		if left.Add(-1) == 0 {
			g.wg.Done()
		}
	}
	// A listener that caps connections (httpserve.Listener) learns when
	// the connection idles between requests, so that it may evict it as
	// any idle one; "new" is passed on only when the client sent nothing
	// more (the connection is idle): else it carries a request, and stays
	// one that carries a request until its first idle.
	tell, _ := conn.(connStater)
	// busy: the connection carries a request (or the client sent more
	// than the POST, not yet read); set by ConnState, read at Close.
	var busy atomic.Bool
	busy.Store(waiting)
	// served is closed once the connection ended (ended).
	served := make(chan struct{})
	var stop func() bool
	var endOnce sync.Once
	ended := func() {
		endOnce.Do(func() {
			close(served)
			if stop() {
				release() // the shutdown will not run
			}
			release()
		})
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: headerWait,
		IdleTimeout:       idleWait,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if tell != nil && (s != http.StateNew || !waiting) {
				tell.ConnState(s)
			}
			switch s {
			case http.StateActive:
				busy.Store(true)
			case http.StateIdle:
				busy.Store(false)
			case http.StateClosed, http.StateHijacked:
				ended()
			}
		},
	}
	if from != nil {
		srv.MaxHeaderBytes, srv.ReadTimeout, srv.WriteTimeout = from.MaxHeaderBytes, from.ReadTimeout, from.WriteTimeout
		if from.ErrorLog != nil {
			srv.ErrorLog = from.ErrorLog
		}
	}
	// At the gateway's Close the server shuts down as net/http's does: an
	// idle connection is closed, a request in flight finishes (its
	// response says "Connection: close") for up to restShutdownGrace, then
	// the connection is closed. It runs after Serve returned: the server
	// still closes the connections it tracks.
	stop = context.AfterFunc(g.root, func() {
		defer release()
		srv.SetKeepAlivesEnabled(false)
		if !busy.Load() {
			_ = srv.Close()
			return
		}
		t := time.NewTimer(restShutdownGrace)
		defer t.Stop()
		select {
		case <-t.C:
			_ = srv.Close()
		case <-served:
		}
	})
	_ = srv.Serve(l)
	// A server closed before it accepted the connection (the gateway
	// closing) leaves it to us.
	l.mu.Lock()
	c, l.c = l.c, nil
	l.mu.Unlock()
	if c != nil {
		_ = c.Close()
		ended()
	}
}

// A connStater is a connection that is told its http.ConnState by
// whoever serves it (httpserve's capped listener's connections).
type connStater interface {
	ConnState(http.ConnState)
}

// A prefixConn reads r (pre, bytes read from the connection already, then
// the connection) instead of its Conn.
type prefixConn struct {
	net.Conn
	pre *bytes.Reader
	r   io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// SyscallConn is the connection's (syscall.Conn) once the bytes read
// already are all read, so that a call parked again on a connection
// served after a parked answer (serveRest) is watched by the gateway's
// poller, whose peek sees only the socket; an error before, or when the
// connection has no descriptor (the caller then watches it by reading).
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) {
	if c.pre.Len() > 0 {
		return nil, errors.New("bytes read from the connection are still unread")
	}
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("the connection has no descriptor")
	}
	return sc.SyscallConn()
}

// A oneConnListener accepts its one connection; its next Accept fails
// (errOneConnServed), which ends the server's Serve loop and leaves the
// connection to its connection goroutine.
type oneConnListener struct {
	mu   sync.Mutex
	c    net.Conn // nil once accepted
	addr net.Addr
}

// errOneConnServed ends a oneConnListener's server's Serve loop.
var errOneConnServed = errors.New("the one connection was handed over")

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	return nil, errOneConnServed
}

func (l *oneConnListener) Close() error { return nil }

func (l *oneConnListener) Addr() net.Addr { return l.addr }
