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

	"toolgate/internal/fileowner"
)

// ErrUnsafeSocketDir marks an admin socket whose directory fails the check
// of CheckSocketDir; errors.Is finds it in what ListenConfig.Check and
// ListenConfig.Listen return. toolgate serve refuses to start on it.
var ErrUnsafeSocketDir = errors.New("unsafe admin socket directory")

// ListenConfig opens the admin listener. The zero value (and nil) is ready
// to use: it logs nothing and takes the service user to be os.Geteuid.
type ListenConfig struct {
	// Logger receives one warning for every connection refused because the
	// socket directory no longer passes its check; nil discards.
	Logger *slog.Logger
	// Geteuid returns the uid that must own the socket directory (the
	// service user); nil means os.Geteuid. Tests inject another.
	Geteuid func() int
}

// Listen opens the admin listener for addr with the zero ListenConfig; see
// ListenConfig.Listen.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	return (*ListenConfig)(nil).Listen(ctx, addr)
}

// Listen opens the admin listener for addr, the listen.admin config value:
// "host:port" for TCP, or "unix:///abs/dir/name.sock" for a Unix socket.
//
// For a Unix socket the directory must first pass CheckSocketDir (else the
// error wraps ErrUnsafeSocketDir and names the directory and the problem);
// Listen does not create it. A socket file left by a process that died is
// removed; one that a live server answers on is an error. The socket file
// is made 0600 (tokens are still required on it). The directory is checked
// again on every accepted connection: while it fails, each connection is
// closed at once and the reason logged, and Accept goes on waiting (it
// never fails for this). Closing the listener removes the socket file.
func (lc *ListenConfig) Listen(ctx context.Context, addr string) (net.Listener, error) {
	var nlc net.ListenConfig
	path, ok := strings.CutPrefix(addr, "unix://")
	if !ok {
		ln, err := nlc.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("admin listener: %w", err)
		}
		return ln, nil
	}
	if err := lc.Check(addr); err != nil {
		return nil, err
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
	ln, err := nlc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	log := slog.New(slog.DiscardHandler)
	if lc != nil && lc.Logger != nil {
		log = lc.Logger
	}
	return &checkedListener{UnixListener: ln.(*net.UnixListener), dir: filepath.Dir(path), euid: lc.geteuid(), log: log}, nil
}

// Check checks the directory of a "unix://" admin address with
// CheckSocketDir for the service user; any other address passes. A path
// that is not absolute is refused too. Errors wrap ErrUnsafeSocketDir.
// toolgate serve calls it before starting anything else, so an unsafe
// directory stops it early.
func (lc *ListenConfig) Check(addr string) error {
	path, ok := strings.CutPrefix(addr, "unix://")
	if !ok {
		return nil
	}
	if !filepath.IsAbs(path) {
		return unsafeDirError(fmt.Sprintf("socket path %q is relative; want unix:///absolute/dir/name.sock", path))
	}
	return CheckSocketDir(filepath.Dir(path), lc.geteuid()())
}

func (lc *ListenConfig) geteuid() func() int {
	if lc == nil || lc.Geteuid == nil {
		return os.Geteuid
	}
	return lc.Geteuid
}

// CheckSocketDir reports why dir may not hold the admin socket, as an error
// that errors.Is matches to ErrUnsafeSocketDir, or nil. The rules (issue
// 6, "Out of the agent's reach"): dir is an absolute, clean path; dir itself is not a symlink
// (os.Lstat) and no component of its path is one (filepath.EvalSymlinks
// gives dir back), so the path names the directory that was checked; it is
// a directory owned by uid euid (the service user); and its permission bits
// are exactly 0700. Owners and modes of the parent directories are not
// checked: a parent writable by another user lets that user swap the
// directory, but the replacement would not be owned by euid and so fails
// the next check. Unix only (fileowner.Of): elsewhere it fails, the owner unknown.
func CheckSocketDir(dir string, euid int) error {
	fail := func(format string, args ...any) error {
		return unsafeDirError(fmt.Sprintf(format, args...))
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fail("socket directory %q is not an absolute, clean path", dir)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fail("socket directory %s: %v (create it owned by the service user with mode 0700)", dir, errors.Unwrap(err))
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fail("socket directory %s is a symlink; want a real directory", dir)
	}
	if !fi.IsDir() {
		return fail("socket directory %s is not a directory", dir)
	}
	if real, err := filepath.EvalSymlinks(dir); err != nil {
		return fail("socket directory %s: %v", dir, err)
	} else if real != dir {
		return fail("socket directory %s has a symlink in its path (it resolves to %s); name the real path", dir, real)
	}
	uid, ok := fileowner.Of(fi)
	if !ok {
		return fail("socket directory %s: owner unknown on this system", dir)
	}
	if int64(uid) != int64(euid) {
		return fail("socket directory %s is owned by uid %d; want %d (the service user)", dir, uid, euid)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		return fail("socket directory %s has mode %04o; want 0700", dir, perm)
	}
	return nil
}

// unsafeDirError is a failed socket directory check; its message is the
// problem alone, and errors.Is matches it to ErrUnsafeSocketDir.
type unsafeDirError string

func (e unsafeDirError) Error() string { return string(e) }

func (e unsafeDirError) Is(target error) bool { return target == ErrUnsafeSocketDir }

// checkedListener is the admin Unix socket listener: it re-checks the
// socket directory on every accepted connection and closes the connection
// if the check fails.
type checkedListener struct {
	*net.UnixListener
	dir  string
	euid func() int
	log  *slog.Logger
}

// Accept waits for the next connection whose arrival finds the socket
// directory still safe; refused connections are closed and logged.
func (l *checkedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.UnixListener.Accept()
		if err != nil {
			return nil, err
		}
		if err := CheckSocketDir(l.dir, l.euid()); err != nil {
			l.log.Warn("admin connection refused", "err", err)
			_ = c.Close()
			continue
		}
		return c, nil
	}
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
