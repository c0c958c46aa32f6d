// Package httpserve serves HTTP on a listener with the bounds both of
// toolgate's listeners share (issue 9): read-header, read and idle
// timeouts, no write timeout (held calls and event streams stay open for
// as long as a person takes), and a cap on open connections that sheds
// idle ones first, so that connections that carry no request cannot use
// up the process's file descriptors and starve real work.
//
// The read timeout bounds reading one request's body, not the request:
// http.Server's own ReadTimeout also arms the read that watches for the
// client going away while a handler runs, and cancels the request's
// context when it fires, which would end every held call and event stream
// after that long. So the deadline is set when a handler starts reading a
// body and cleared once the body has been read; requests without a body
// (an SSE GET) get none.
package httpserve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultShutdownTimeout   = 3 * time.Second
	// DefaultMaxHeaderBytes bounds a request's headers (net/http's default
	// is 1 MiB, which a flood of slow connections could each fill).
	DefaultMaxHeaderBytes = 64 << 10
)

// Options configures Serve. The zero value (or nil) gives the defaults and
// no connection cap.
type Options struct {
	// Name names the listener in logs ("mcp", "admin").
	Name string
	// Logger receives the cap's warnings and net/http's own errors;
	// default discard.
	Logger *slog.Logger
	// MaxConns caps the open connections; 0 means no cap. See [Limit].
	MaxConns int
	// ReadHeaderTimeout bounds reading a request's headers, from the first
	// byte of the request on; a new connection may wait IdleTimeout (or
	// this, if longer) for its first byte. Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a request's body, from the handler's
	// start to the body's end; 0 means no bound. See the package doc.
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection after this long without
	// a request. Default 60s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers; default 64 KiB.
	MaxHeaderBytes int
	// ShutdownTimeout is how long Serve waits for requests in flight when
	// ctx ends before it closes their connections. Default 3s.
	ShutdownTimeout time.Duration
	// BeforeShutdown, when set, runs once ctx has ended and before the
	// server drains (toolgate ends held calls there, so draining is quick).
	BeforeShutdown func()
	// OnShed, when set, is called for each connection the cap closes: how
	// is "evicted" (an idle or stalled connection closed to make room) or
	// "refused" (a new connection answered 503 because every other one
	// carries a request).
	OnShed func(how string)
	// IdleHandoff, when set (and MaxConns is), takes a kept-alive
	// connection idle after a request net/http answered off net/http, so
	// that it waits for its next request without a goroutine or buffers
	// (the gateway's shared poller: gateway.Gateway.KeepIdle): it is called
	// with the connection and the server that served it once the client
	// sent nothing for a tenth of a second, and reports whether it took
	// the connection; it then serves the client's next request as from
	// would (handler, timeouts, header bound) and closes the connection at
	// its idle timeout at the latest. See handoff.go.
	IdleHandoff func(c net.Conn, from *http.Server) bool

	// headerGrace, when set, replaces the cap's headerGrace (tests).
	headerGrace time.Duration
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.ReadHeaderTimeout <= 0 {
		r.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if r.IdleTimeout <= 0 {
		r.IdleTimeout = DefaultIdleTimeout
	}
	if r.MaxHeaderBytes <= 0 {
		r.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if r.ShutdownTimeout <= 0 {
		r.ShutdownTimeout = DefaultShutdownTimeout
	}
	return r
}

// Serve serves h on ln until ctx ends or serving fails, then shuts down:
// it runs Options.BeforeShutdown, waits up to Options.ShutdownTimeout for
// requests in flight and closes what is left. It returns nil after a
// shutdown caused by ctx, else the error that ended serving. ln is closed
// when Serve returns. Serve starts one goroutine and waits for it.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, opts *Options) error {
	o := opts.withDefaults()
	srv := &http.Server{
		Handler:           withReadTimeout(h, o.ReadTimeout),
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(o.Logger.With("listener", o.Name).Handler(), slog.LevelWarn),
	}
	// The first request's read-header timeout runs from its first byte
	// (firstbyte.go); the cap, outside it, still sees the Listener's conns.
	ln = &firstByteListener{Listener: rawListener{ln}, wait: o.IdleTimeout}
	if o.MaxConns > 0 {
		l := Limit(ln, o.MaxConns, &LimitOptions{Name: o.Name, Logger: o.Logger, OnShed: o.OnShed})
		if o.headerGrace > 0 {
			l.headerGrace = o.headerGrace
		}
		if o.IdleHandoff != nil {
			l.SetHandoff(func(c net.Conn) bool { return o.IdleHandoff(c, srv) })
		}
		ln = l
		srv.ConnState = l.ConnState
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		_ = ln.Close()
		return err
	case <-ctx.Done():
	}
	if o.BeforeShutdown != nil {
		o.BeforeShutdown()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// withReadTimeout bounds the reading of each request body to d from the
// handler's start (see the package doc); d <= 0 returns h.
func withReadTimeout(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			if setReadDeadline(w, time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, w: w}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline once the body has
// been read to its end (or failed). Closing it early keeps the deadline:
// net/http may still read the rest of the body after the handler. It
// keeps w, not a controller and a closure: one allocation per POST where
// there were three (docs/performance.md, "http47").
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	w    http.ResponseWriter
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		// Clearing also reaches the read net/http starts at the body's end
		// to notice a client going away, which must not time out.
		b.once.Do(b.clear)
	}
	return n, err
}

func (b *deadlineBody) clear() { _ = setReadDeadline(b.w, time.Time{}) }

// setReadDeadline is http.NewResponseController(w).SetReadDeadline(t)
// without the controller, which escaped to the heap, when w has the
// method itself (net/http's own ResponseWriter: Serve's handler is the
// outermost).
func setReadDeadline(w http.ResponseWriter, t time.Time) error {
	if d, ok := w.(interface{ SetReadDeadline(time.Time) error }); ok {
		return d.SetReadDeadline(t)
	}
	return http.NewResponseController(w).SetReadDeadline(t)
}
