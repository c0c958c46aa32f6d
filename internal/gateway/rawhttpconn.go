package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"toolgate/internal/rawio"
)

// The HTTP/1.1 exchange of an HTTP upstream's POSTs without net/http's
// connection goroutines (issue 13, branch httpup). net/http's Transport
// runs a readLoop and a writeLoop goroutine per connection: a POST is
// handed to the writeLoop, written there, and its answer's head is read
// by the readLoop and handed back, and the body's end is handed to the
// readLoop again before the connection is idle. On a 2-core machine
// each hand-off is a wake-up of another goroutine (docs/performance.md,
// "hotpath5": 3.3–3.6 switches per round trip on net/http's client).
//
// A h1Transport does the exchange on the calling goroutine: it takes an
// idle connection of its own pool (or dials one), writes the request
// as (*http.Request).Write would (writeH1Request, rawhttphead.go), its
// last bytes from within the wait for the answer (h1Awaiter), and
// reads the answer with http.ReadResponse on the connection's
// bufio.Reader. The response body reads from the
// connection directly; read to its end it gives the connection back to
// the pool, closed early it closes the connection.
//
// Only what it can do exactly goes this way: POSTs with a body of known
// length, no trailers, no Expect header, no Close, and no Host other than
// the URL's, to the plain http:// origin (an ASCII host without a zone)
// of servers.<name>.url when no proxy applies to it, on Linux (the
// liveness peek below). Everything else (TLS, a proxy, GET event
// streams, DELETE) goes to the net/http Transport as before. 1xx
// answers before the final one are passed over as net/http does, within
// its bound on the head (rawhttpheadlimit.go); a 101, a malformed answer, or a
// broken connection fails the request closed.
//
// The rest of an answer: a raw call's event stream is read up to the
// call's answer; its end (the stream's last chunk) usually arrives a
// moment later. Instead of a goroutine reading it (upstream.drain), the
// connection goes back to the pool owing that rest (h1Body.park); a
// request takes it once the rest has arrived and reads it first (at most
// drainMax bytes), and meanwhile takes another connection. An upstream
// that keeps the stream open for h1OwedWait after the answer gets the
// connection closed.
//
// Retries: a request is sent again on a new connection only when no
// byte of it reached the old one (the upstream cannot have seen it).
// Once a byte was written, any failure before a complete answer head is
// the request's error (errH1Sent): the call fails as a transport_error
// and is never run twice. To keep that case rare, an idle connection is
// checked before it is used (h1Alive: a non-blocking peek sees the
// upstream's FIN of a connection it closed while idle, e.g. a keep-alive
// timeout) and connections idle longer than h1IdleMax are not used.

// h1IdleMax is how long an idle connection of a h1Transport stays
// usable (net/http's DefaultTransport: IdleConnTimeout 90 s).
const h1IdleMax = 90 * time.Second

// h1OwedWait is how long after its answer a connection may owe the
// answer's end (h1Conn.owed) before it is closed instead of used: the
// drain's bound before (drainWait). Meanwhile requests pass it over.
const h1OwedWait = drainWait

// h1FinishWait bounds a request's read of an end that has begun to
// arrive (h1Conn.finish).
const h1FinishWait = 5 * time.Millisecond

// errH1Sent marks an error of a request that was (at least partly)
// written: the upstream may have received it.
var errH1Sent = errors.New("the request was sent; the connection failed before its answer")

// aLongTimeAgo is a deadline that unblocks a connection's reads and
// writes at once.
var aLongTimeAgo = time.Unix(1, 0)

// A h1Transport is the base round tripper of one HTTP upstream
// (captureRoundTripper.base).
type h1Transport struct {
	fallback http.RoundTripper // the net/http Transport, for everything not lean
	host     string            // URL.Host the pool serves; "" if nothing goes lean
	// hostHeader is the Host header of its requests (http.NewRequest's:
	// host without an empty port).
	hostHeader string
	addr       string // host:port to dial
	dialer     net.Dialer
	maxIdle    int
	alive      func(syscall.RawConn) bool // nil: the connection's own peek (h1Conn.alive); tests set it

	mu     sync.Mutex
	idle   []*h1Conn // most recently used last
	closed bool      // CloseIdleConnections ran: nothing more is kept

	dials atomic.Int64 // connections dialled (tests)
}

// newH1Transport returns the transport of an upstream at endpoint
// (servers.<name>.url) over fallback, keeping at most maxIdle idle
// connections. proxy is fallback's Proxy (nil: none).
func newH1Transport(fallback http.RoundTripper, proxy func(*http.Request) (*url.URL, error), endpoint string, maxIdle int) *h1Transport {
	t := &h1Transport{fallback: fallback, maxIdle: maxIdle,
		dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" || u.Host == "" || strings.ContainsAny(u.Host, "%") || !isASCII(u.Host) || !h1ValidHost(u.Host) || !h1Supported {
		// A zone or a host that is not ASCII: Request.Write rewrites
		// it, writeH1Request does not.
		return t
	}
	if proxy != nil {
		if p, err := proxy(&http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}}); err != nil || p != nil {
			return t
		}
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	t.host, t.hostHeader, t.addr = u.Host, strings.TrimSuffix(u.Host, ":"), net.JoinHostPort(u.Hostname(), port)
	return t
}

// lean reports whether req goes the lean way.
func (t *h1Transport) lean(req *http.Request) bool {
	return t.leanURL(req.URL) && req.Method == http.MethodPost && !req.Close && (req.Host == "" || req.Host == t.hostHeader) &&
		req.Body != nil && req.Body != http.NoBody && req.ContentLength > 0 && len(req.TransferEncoding) == 0 &&
		len(req.Trailer) == 0 && req.Header.Get("Expect") == "" && h1HeaderSendable(req.Header) // rawhttpheadvalid.go
}

// leanURL reports whether POSTs to u can go the lean way.
func (t *h1Transport) leanURL(u *url.URL) bool {
	return t.host != "" && u.Scheme == "http" && u.Host == t.host && u.Opaque == "" && u.User == nil
}

// h1Under returns the h1Transport under hc (an HTTP upstream's client,
// newUpstreamHTTPClient); nil if there is none.
func h1Under(hc *http.Client) *h1Transport {
	if hc == nil {
		return nil
	}
	if ct, ok := hc.Transport.(*captureRoundTripper); ok {
		t, _ := ct.base.(*h1Transport)
		return t
	}
	return nil
}

// RoundTrip implements http.RoundTripper.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.lean(req) {
		return t.fallbackRoundTrip(req) // httpreached.go
	}
	resp, err := t.exchange(req, req.Body)
	var retry *h1Retry
	if errors.As(err, &retry) {
		// Nothing of req reached the reused connection: once more on a
		// new one, with a fresh body.
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, fmt.Errorf("%w (and its body cannot be read again: %w)", retry.err, gerr)
		}
		resp, err = t.exchange(req, body)
		if errors.As(err, &retry) {
			err = retry.err
		}
	}
	return resp, err
}

// isASCII reports whether s is printable ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// A h1Retry is the error of a request none of which was written to a
// reused connection, and whose body can be read again.
type h1Retry struct{ err error }

func (e *h1Retry) Error() string { return e.err.Error() }
func (e *h1Retry) Unwrap() error { return e.err }

// exchange writes req with body on a connection and reads the answer's
// head.
func (t *h1Transport) exchange(req *http.Request, body io.ReadCloser) (*http.Response, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		_ = body.Close()
		return nil, err
	}
	lc, reused, err := t.get(ctx)
	if err != nil {
		_ = body.Close()
		return nil, err
	}
	stop := context.AfterFunc(ctx, lc.breakOff)
	lc.cw.n = 0
	err = writeH1Request(lc.bw, req, body) // closes body
	if err == nil {
		// The request's last bytes are written from within a wait for
		// the answer (h1Awaiter), so that the read after them does not
		// find the answer missing first: when they are all of it
		// (countWriter).
		lc.cw.await = true
		err = lc.bw.Flush()
		lc.cw.await = false
	}
	if err != nil {
		stop()
		lc.close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if lc.cw.n == 0 {
			if reused && req.GetBody != nil {
				return nil, &h1Retry{err: err}
			}
			return nil, fmt.Errorf("write the request: %w", err)
		}
		return nil, fmt.Errorf("%w: write: %w", errH1Sent, err)
	}
	resp, err := lc.readHead(req) // rawhttpheadlimit.go
	if err == nil && resp.StatusCode < 200 {
		_ = resp.Body.Close()
		err = fmt.Errorf("an informational answer (HTTP %d) toolgate does not expect", resp.StatusCode)
	}
	if err != nil {
		stop()
		lc.close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("%w: %w", errH1Sent, cerr)
		}
		return nil, fmt.Errorf("%w: read the answer: %w", errH1Sent, err)
	}
	keep := !req.Close && !resp.Close
	if resp.Body == http.NoBody {
		t.release(lc, stop, keep, nil)
		return resp, nil
	}
	resp.Body = &h1Body{rc: resp.Body, lc: lc, t: t, stop: stop, keep: keep}
	return resp, nil
}

// h1Aside bounds how many idle connections whose previous answer's end
// has not arrived yet a request passes over before it dials.
const h1Aside = 4

// get returns an idle connection that is still open, or a new one;
// reused reports the former. A connection that owes the end of its last
// answer (h1Conn.owed) is taken once that end has arrived; until then,
// for h1OwedWait, it is passed over (the request takes another, or
// dials once it has passed over h1Aside), so that no request waits for
// another's answer. One whose end has not come by then is closed (an
// upstream that keeps the stream open).
func (t *h1Transport) get(ctx context.Context) (lc *h1Conn, reused bool, err error) {
	now := time.Now()
	var aside [h1Aside]*h1Conn
	na := 0
	defer func() { t.putBack(aside[:na]) }()
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		lc = t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if now.Sub(lc.since) >= h1IdleMax {
			lc.close()
			continue
		}
		if lc.owed != nil {
			switch lc.peek() {
			case h1Readable:
				if !lc.finish() {
					lc.close()
					continue
				}
			case h1Quiet:
				if now.Sub(lc.since) >= h1OwedWait {
					lc.close()
					continue
				}
				if na < len(aside) {
					aside[na] = lc
					na++
					continue
				}
				t.putBack([]*h1Conn{lc})
				return t.dial(ctx)
			default:
				lc.close()
				continue
			}
		}
		if t.isAlive(lc) {
			return lc, true, nil
		}
		lc.close()
	}
	return t.dial(ctx)
}

// dial opens a new connection to the upstream.
func (t *h1Transport) dial(ctx context.Context) (*h1Conn, bool, error) {
	c, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, false, err
	}
	t.dials.Add(1)
	// Read and written without the scheduler's system-call bookkeeping
	// (rawio; docs/performance.md, "cpu25").
	return newH1Conn(rawio.WrapConn(c)), false, nil
}

// putBack returns idle connections get passed over to the pool.
func (t *h1Transport) putBack(lcs []*h1Conn) {
	if len(lcs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, lc := range lcs {
		if t.closed || len(t.idle) >= t.maxIdle {
			lc.close()
			continue
		}
		t.idle = append(t.idle, lc)
	}
}

// An h1PeekState is what an idle connection has to read (h1Peeker).
type h1PeekState int

const (
	h1Gone     h1PeekState = iota // closed by the upstream, or failed
	h1Quiet                       // open, nothing to read
	h1Readable                    // bytes to read
)

// h1Alive reports whether the idle connection of rc is still open and
// has nothing to read (h1Peek). A FIN, a reset, or bytes no request asked
// for mean the connection is not used again.
func h1Alive(rc syscall.RawConn) bool { return h1Peek(rc) == h1Quiet }

// isAlive is h1Alive of lc, by its own peek (which allocates nothing)
// unless a test set t.alive.
func (t *h1Transport) isAlive(lc *h1Conn) bool {
	if t.alive != nil {
		return t.alive(lc.rc)
	}
	return lc.peek() == h1Quiet
}

// release ends an exchange on lc: back to the pool when keep and the
// request's context did not end (stop), closed otherwise. owed is the
// rest of the answer, unread (nil: read to its end).
func (t *h1Transport) release(lc *h1Conn, stop func() bool, keep bool, owed io.Reader) {
	if !stop() || !keep || (owed == nil && lc.br.Buffered() > 0) {
		// stop false: the deadline may have been set, or will be.
		lc.close()
		return
	}
	lc.owed = owed
	now := time.Now()
	lc.since = now
	t.mu.Lock()
	if t.closed || len(t.idle) >= t.maxIdle {
		t.mu.Unlock()
		lc.close()
		return
	}
	t.idle = append(t.idle, lc)
	old := t.takeStale(now)
	t.mu.Unlock()
	if old != nil {
		t.settle(old)
	}
}

// takeStale removes and returns the least recently used idle connection
// if it is past h1IdleMax or has owed its answer's end for h1OwedWait,
// so that such connections (an upstream keeping a stream open) do not
// stay at the bottom of the pool while the top serves every request.
// t.mu is held.
func (t *h1Transport) takeStale(now time.Time) *h1Conn {
	if len(t.idle) < 2 {
		return nil
	}
	b := t.idle[0]
	if age := now.Sub(b.since); age < h1IdleMax && (b.owed == nil || age < h1OwedWait) {
		return nil
	}
	copy(t.idle, t.idle[1:])
	t.idle[len(t.idle)-1] = nil
	t.idle = t.idle[:len(t.idle)-1]
	return b
}

// settle puts a stale connection (takeStale) back whose end has arrived
// by now, and closes any other.
func (t *h1Transport) settle(lc *h1Conn) {
	if time.Since(lc.since) < h1IdleMax && lc.owed != nil && lc.peek() == h1Readable && lc.finish() && t.isAlive(lc) {
		t.putBack([]*h1Conn{lc})
		return
	}
	lc.close()
}

// CloseIdleConnections closes the idle connections, and those that
// become idle later; the fallback's too.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.closed = true
	t.mu.Unlock()
	for _, lc := range idle {
		lc.close()
	}
	if ci, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// A h1Conn is one connection of a h1Transport.
type h1Conn struct {
	c     net.Conn
	rc    syscall.RawConn // for h1Alive; nil if c has none
	br    *bufio.Reader
	bw    *bufio.Writer
	cw    countWriter
	since time.Time // when it became idle
	owed  io.Reader // the unread rest of the last answer (h1Body.park); nil if none
	pk    h1Peeker

	lim h1HeadLimit // under br: bounds the answer's head (rawhttpheadlimit.go)

	// breakOff sets a past deadline on c: its blocked reads and writes
	// return at once. Made once per connection for the exchanges'
	// context.AfterFunc (a closure per exchange was an allocation).
	breakOff func()
}

// peek tells what the idle connection lc has to read (h1Peeker).
func (lc *h1Conn) peek() h1PeekState { return lc.pk.peek(lc.rc) }

// finish reads the rest of the last answer on lc, if it owes one, within
// h1FinishWait and drainMax bytes; false: it could not (lc is not used
// again).
func (lc *h1Conn) finish() bool {
	if lc.owed == nil {
		return true
	}
	if lc.c.SetReadDeadline(time.Now().Add(h1FinishWait)) != nil {
		return false
	}
	n, err := io.Copy(io.Discard, io.LimitReader(lc.owed, drainMax+1))
	lc.owed = nil
	// io.Copy ends without an error at the answer's end (or at the limit).
	return err == nil && n <= drainMax && lc.br.Buffered() == 0 && lc.c.SetReadDeadline(time.Time{}) == nil
}

func newH1Conn(c net.Conn) *h1Conn {
	lc := &h1Conn{c: c}
	lc.breakOff = func() { _ = c.SetDeadline(aLongTimeAgo) }
	lc.br = newH1Reader(lc)
	lc.cw.w = c
	lc.bw = bufio.NewWriterSize(&lc.cw, 4<<10)
	if sc, ok := c.(syscall.Conn); ok {
		lc.rc, _ = sc.SyscallConn()
		lc.cw.rc = lc.rc
	}
	return lc
}

func (lc *h1Conn) close() { _ = lc.c.Close() }

// A countWriter counts the bytes its writer accepted. While await is
// set and the connection has a RawConn, a write that carries the
// request's first bytes (n is 0) waits for the answer once its bytes are
// out (h1Awaiter); what that write could not take at once goes through
// w. A later write does not wait: the upstream may have answered what
// it got before (an answer before the whole body), and the wait, which
// begins with the connection's readiness reset, would wait for more
// than that answer (attack25: until the call's context ended).
type countWriter struct {
	w     net.Conn
	n     int64
	rc    syscall.RawConn
	await bool
	aw    h1Awaiter
}

func (w *countWriter) Write(p []byte) (int, error) {
	written := 0
	if w.await && w.rc != nil && w.n == 0 {
		n, err := w.aw.write(w.w, w.rc, p)
		w.n += int64(n)
		if err != nil || n == len(p) {
			return n, err
		}
		written, p = n, p[n:]
	}
	n, err := w.w.Write(p)
	w.n += int64(n)
	return written + n, err
}

// A h1Body is the body of a lean answer. Read to its end it gives its
// connection back (release); closed before, or failed, it closes it.
type h1Body struct {
	rc    io.ReadCloser // http.ReadResponse's body, reading lc.br
	lc    *h1Conn
	t     *h1Transport
	stop  func() bool
	keep  bool
	state atomic.Int32 // 0 open, 1 read to its end, 2 closed or failed
}

var errH1BodyClosed = errors.New("http: read on closed response body")

func (b *h1Body) Read(p []byte) (int, error) {
	switch b.state.Load() {
	case 1:
		return 0, io.EOF
	case 2:
		return 0, errH1BodyClosed
	}
	n, err := b.rc.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		if b.state.CompareAndSwap(0, 1) {
			b.t.release(b.lc, b.stop, b.keep, nil)
		}
	case err != nil:
		if b.state.CompareAndSwap(0, 2) {
			b.stop()
			b.lc.close()
		}
	}
	return n, err
}

// park gives the connection back to the pool with the rest of the body
// unread, for the next request on it to read first (h1Conn.finish). The
// caller has stopped reading the body and must not read it again. A
// body read to its end was given back already.
func (b *h1Body) park() {
	if b.state.CompareAndSwap(0, 2) {
		b.t.release(b.lc, b.stop, b.keep, b.rc)
	}
}

// Close closes the connection unless the body was read to its end. It
// may be called while a Read is under way (which then fails).
func (b *h1Body) Close() error {
	if b.state.CompareAndSwap(0, 2) {
		b.stop()
		b.lc.close()
	}
	return nil
}

// h1BodyOf returns the h1Body under rc, the body of an HTTP upstream's
// answer as captureRoundTripper wraps it; nil if it is none.
func h1BodyOf(rc io.ReadCloser) *h1Body {
	for {
		switch b := rc.(type) {
		case *h1Body:
			return b
		case *sseTee:
			rc = b.ReadCloser
		case activityBody:
			rc = b.ReadCloser
		default:
			return nil
		}
	}
}
