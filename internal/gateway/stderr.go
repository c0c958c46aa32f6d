package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
)

// maxStderrLine bounds one logged stderr line, in bytes; the rest of a longer
// line is dropped and the record says so.
const maxStderrLine = 4096

// stderrQueue is how many stderr lines wait for the logger before new ones
// are dropped (and counted).
const stderrQueue = 1024

type stderrLine struct {
	text      string
	truncated bool
}

// A stderrLog is the stderr of a stdio upstream. Write splits the stream
// into lines and queues them without ever blocking the child (case C08);
// run logs them. A full queue drops lines and counts them.
type stderrLog struct {
	server  string
	log     *slog.Logger
	lines   chan stderrLine
	dropped atomic.Int64

	mu       sync.Mutex
	buf      []byte // guarded by mu: the current partial line
	skipping bool   // guarded by mu: discarding the rest of a too long line
}

func newStderrLog(server string, log *slog.Logger) *stderrLog {
	return &stderrLog{server: server, log: log, lines: make(chan stderrLine, stderrQueue)}
}

// Write implements io.Writer. It never fails and never blocks on the logger.
func (s *stderrLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !s.skipping {
			room := maxStderrLine - len(s.buf)
			if len(chunk) > room {
				s.buf = append(s.buf, chunk[:room]...)
				s.emit(true)
				s.skipping = true
			} else {
				s.buf = append(s.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !s.skipping {
			s.emit(false)
		}
		s.skipping = false
		p = p[i+1:]
	}
	return n, nil
}

// stderrChunk is the buffer (bytes) ReadFrom reads a child's stderr with.
const stderrChunk = 1024

// ReadFrom implements io.ReaderFrom: os/exec copies each child's stderr
// into s with io.Copy on a goroutine that lives as long as the child, and
// io.Copy would hold a 32 KiB buffer all that time; ReadFrom reads with
// stderrChunk bytes (lines are put together in Write). A stdio server
// with sessions: per_agent starts a child per agent session: 100 children
// held 3.2 MB of copy buffers at approve-all's peak (docs/performance.md,
// "admit36"). It returns the bytes read and r's error other than io.EOF.
func (s *stderrLog) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, stderrChunk)
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = s.Write(buf[:n]) // never fails
			total += int64(n)
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// emit queues the buffered line. s.mu must be held.
func (s *stderrLog) emit(truncated bool) {
	line := stderrLine{text: string(bytes.TrimSuffix(s.buf, []byte("\r"))), truncated: truncated}
	s.buf = s.buf[:0]
	select {
	case s.lines <- line:
	default:
		s.dropped.Add(1)
	}
}

// run logs queued lines until ctx is done.
func (s *stderrLog) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case l := <-s.lines:
			if n := s.dropped.Swap(0); n > 0 {
				s.log.WarnContext(ctx, "upstream stderr lines dropped", "server", s.server, "lines", n)
			}
			if l.truncated {
				s.log.InfoContext(ctx, "upstream stderr", "server", s.server, "line", l.text, "truncated", true)
			} else {
				s.log.InfoContext(ctx, "upstream stderr", "server", s.server, "line", l.text)
			}
		}
	}
}
