package gateway

import (
	"bytes"
	"context"
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
