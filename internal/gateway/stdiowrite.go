package gateway

import (
	"bytes"
	"errors"
	"io"
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
// A plain stdout has no write deadline (a pipe the agent made is
// blocking), so a write runs in a goroutine of its own, on a copy of the
// line; one that blocks for good ends with the process (serve --stdio
// exits once ServeStdio returned) or when the agent closes the pipe. The
// lock is held until the write returns, so nothing is written after the
// part of a line.
type lockedWriter struct {
	w     io.WriteCloser
	limit time.Duration // 0: no bound
	sem   chan struct{} // the write lock
	once  sync.Once
	stuck chan struct{} // closed once a write overran limit
}

// newLockedWriter returns the bounded writer of w; limit 0 bounds nothing.
func newLockedWriter(w io.WriteCloser, limit time.Duration) *lockedWriter {
	return &lockedWriter{w: w, limit: limit, sem: make(chan struct{}, 1), stuck: make(chan struct{})}
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
	t := time.NewTimer(l.limit)
	defer t.Stop()
	select {
	case l.sem <- struct{}{}:
	case <-l.stuck:
		return 0, errAgentNotReading
	case <-t.C:
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
	}
}

// fail marks the writer stuck.
func (l *lockedWriter) fail() { l.once.Do(func() { close(l.stuck) }) }

func (l *lockedWriter) Close() error { return l.w.Close() }
