package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Listen opens the admin listener for addr, the listen.admin config value:
// "host:port" for TCP, or "unix:///abs/path.sock" for a Unix socket. A
// socket file left by a process that died is removed first; one that a live
// server answers on is an error. The socket file is made 0600 (tokens are
// still required on it). Closing the listener removes the file.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	path, ok := strings.CutPrefix(addr, "unix://")
	if !ok {
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("admin listener: %w", err)
		}
		return ln, nil
	}
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("admin listener %q: want unix:///absolute/path", addr)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		var d net.Dialer
		if c, err := d.DialContext(ctx, "unix", path); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("admin listener %s: a server is already listening", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("admin listener: remove stale socket: %w", err)
		}
	}
	ln, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	return ln, nil
}

// shutdownGrace is how long Serve lets requests in flight finish.
const shutdownGrace = 5 * time.Second

// Serve answers requests on ln until ctx ends, then shuts down gracefully
// (requests in flight get a few seconds) and returns nil. It returns an error
// if serving fails before that. ln is closed in both cases.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("admin api: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		_ = hs.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("admin api: %w", serr)
	}
	if err != nil {
		return fmt.Errorf("admin api shutdown: %w", err)
	}
	return nil
}
