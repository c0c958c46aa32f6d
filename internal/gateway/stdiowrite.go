package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// errAgentNotReading ends a stdio session whose agent stopped reading
// toolgate's stdout: a write to it did not complete within
// Options.StdioWriteTimeout (limits.stdio_write_timeout).
var errAgentNotReading = errors.New("the stdio agent stopped reading: a write to stdout did not complete within limits.stdio_write_timeout")

// lockedWriter is a stdio agent's stdout (w). It serialises writes, so the
// guard's error lines never interleave with the SDK's messages (the SDK
// writes one message, newline included, per Write), and it bounds each
// one: an agent that stops reading fills the pipe (64 KiB on Linux), and a
// write then blocked without end, and every later one behind it (branch
// ops38; the upstream side is bounded the same way, boundedwrite.go). A
// write that has not completed within limit (the wait for the lock
// included) fails with errAgentNotReading and marks the writer stuck:
// every later write fails at once, and stuck is closed, which ends
// ServeStdio.
//
// When w honours a write deadline (a pipe or socket the runtime poller
// watches: StdioOutput makes serve's stdout one, and os.Pipe's ends are
// one) a write runs in the caller's goroutine under the deadline: nothing
// is allocated and no goroutine is started for it (branch shut39; the
// deadline's expiry ends the blocked write itself, so the SDK's own write
// lock is released too). Otherwise (a blocking pipe, a file, an
// in-process pipe) a write runs in a goroutine of its own, on a copy of
// the line; one that blocks for good ends with the process (serve --stdio
// exits once ServeStdio returned) or when the agent closes the pipe. In
// both modes the lock is held until the write returns, so nothing is
// written after the part of a line.
//
// At shutdown, shorten caps what is left of every write's wait, the one
// in flight included, to the shutdown grace (branch tail40): the limit
// (30 s by default) outlasts serve's shutdown bound (15 s), so an agent
// that stopped reading made the bound exit the process with status 1.
type lockedWriter struct {
	w     io.WriteCloser
	dl    deadliner     // w's write deadline; nil: none (a write in a goroutine)
	limit time.Duration // 0: no bound
	sem   chan struct{} // the write lock
	once  sync.Once
	stuck chan struct{} // closed once a write overran limit

	mu      sync.Mutex
	capAt   time.Time     // guarded by mu; the latest end of any write (shorten); zero: none
	writeDL time.Time     // guarded by mu; the deadline last set on dl
	capped  chan struct{} // closed at capAt
}

// newLockedWriter returns the bounded writer of w; limit 0 bounds nothing.
func newLockedWriter(w io.WriteCloser, limit time.Duration) *lockedWriter {
	l := &lockedWriter{w: w, limit: limit, sem: make(chan struct{}, 1), stuck: make(chan struct{}), capped: make(chan struct{})}
	if limit > 0 {
		l.dl = writeDeadline(w)
	}
	return l
}

type writeResult struct {
	n   int
	err error
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	select {
	case <-l.stuck:
		return 0, errAgentNotReading
	default:
	}
	if l.limit <= 0 {
		l.sem <- struct{}{}
		defer func() { <-l.sem }()
		return l.w.Write(p)
	}
	if l.dl != nil {
		return l.writeUnder(p)
	}
	t := time.NewTimer(l.limit)
	defer t.Stop()
	select {
	case l.sem <- struct{}{}:
	case <-l.stuck:
		return 0, errAgentNotReading
	case <-t.C:
		l.fail()
		return 0, errAgentNotReading
	case <-l.capped:
		l.fail()
		return 0, errAgentNotReading
	}
	b := bytes.Clone(p)
	done := make(chan writeResult, 1)
	go func() {
		n, err := l.w.Write(b)
		<-l.sem
		done <- writeResult{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-t.C:
		l.fail()
		return 0, errAgentNotReading
	case <-l.capped:
		l.fail()
		return 0, errAgentNotReading
	}
}

// writeUnder writes p in the caller's goroutine, under a write deadline
// of limit from now (the wait for the lock included), or shorten's cap
// if that comes first. The lock is taken
// without a timer when it is free, which it is but for the guard's rare
// error lines (the SDK serialises its own writes).
func (l *lockedWriter) writeUnder(p []byte) (int, error) {
	deadline := time.Now().Add(l.limit)
	select {
	case l.sem <- struct{}{}:
	default:
		t := time.NewTimer(l.limit)
		select {
		case l.sem <- struct{}{}:
			t.Stop()
		case <-l.stuck:
			t.Stop()
			return 0, errAgentNotReading
		case <-t.C:
			l.fail()
			return 0, errAgentNotReading
		case <-l.capped:
			t.Stop()
			l.fail()
			return 0, errAgentNotReading
		}
	}
	defer func() { <-l.sem }()
	if err := l.setDeadline(deadline); err != nil {
		// Not expected of a file that answered the probe; fail closed.
		l.fail()
		return 0, fmt.Errorf("%w: setting the write deadline: %w", errAgentNotReading, err)
	}
	n, err := l.w.Write(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		l.fail()
		return n, errAgentNotReading
	}
	return n, err
}

// setDeadline sets the write deadline d, or shorten's cap if that is
// earlier, for the write about to start.
func (l *lockedWriter) setDeadline(d time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.capAt.IsZero() && l.capAt.Before(d) {
		d = l.capAt
	}
	l.writeDL = d
	return l.dl.SetWriteDeadline(d)
}

// shorten caps the wait of every write, the one in flight included, at
// grace from now, once (a later call does nothing): ServeStdio calls it
// when its ctx ends (shutdown), so that a write to an agent that stopped
// reading fails, with errAgentNotReading, within the shutdown grace
// instead of the longer limit, and the session closes before serve's
// shutdown bound. Writes to an agent that reads go on as before. A writer
// without a limit is left alone. The cap's timer is not stopped: it only
// closes capped.
func (l *lockedWriter) shorten(grace time.Duration) {
	if l.limit <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.capAt.IsZero() {
		return
	}
	l.capAt = time.Now().Add(grace)
	time.AfterFunc(grace, func() { close(l.capped) })
	if l.dl != nil && l.capAt.Before(l.writeDL) {
		// The write in flight, if any, ends at the cap; setting it when
		// none is in flight is harmless: the next write sets its own.
		l.writeDL = l.capAt
		_ = l.dl.SetWriteDeadline(l.capAt) // a failure leaves the longer limit: the bound still ends the process
	}
}

// shortened reports whether shorten was called.
func (l *lockedWriter) shortened() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.capAt.IsZero()
}

// failed reports whether a write overran its bound (stuck is closed).
func (l *lockedWriter) failed() bool {
	select {
	case <-l.stuck:
		return true
	default:
		return false
	}
}

// fail marks the writer stuck.
func (l *lockedWriter) fail() { l.once.Do(func() { close(l.stuck) }) }

func (l *lockedWriter) Close() error { return l.w.Close() }

// keepOpen is a writer whose Close does nothing: ServeStdio's session
// closes its writer when it ends, and serve's stdout is not the session's
// to close (StdioOutput's duplicate is closed by done).
type keepOpen struct{ io.Writer }

func (keepOpen) Close() error { return nil }

// SetWriteDeadline passes the deadline on to the writer, when it takes
// one; os.ErrNoDeadline otherwise.
func (k keepOpen) SetWriteDeadline(t time.Time) error {
	if d, ok := k.Writer.(deadliner); ok {
		return d.SetWriteDeadline(t)
	}
	return os.ErrNoDeadline
}
