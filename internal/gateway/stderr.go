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
	red     *envRedactor
	log     *slog.Logger
	lines   chan stderrLine
	dropped atomic.Int64

	mu    sync.Mutex
	split lineSplitter // guarded by mu
}

// newStderrLog returns the stderr log of server, whose lines are logged with
// the values of env (the child's complete environment) and secret-shaped
// text redacted, as a failed start's tail is: a child that prints its
// environment or a token would otherwise put it in the log (attack38).
func newStderrLog(server string, env map[string]string, log *slog.Logger) *stderrLog {
	return &stderrLog{server: server, red: newEnvRedactor(env), log: log, lines: make(chan stderrLine, stderrQueue)}
}

// Write implements io.Writer. It never fails and never blocks on the logger.
func (s *stderrLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.split.write(p, s.emit)
	return len(p), nil
}

// emit queues line. s.mu must be held.
func (s *stderrLog) emit(line []byte, truncated bool) {
	select {
	case s.lines <- stderrLine{text: string(line), truncated: truncated}:
	default:
		s.dropped.Add(1)
	}
}

// A lineSplitter cuts a byte stream into lines, each without its "\n" and
// a trailing "\r" and kept to maxStderrLine bytes (the rest of a longer
// line is dropped). Its owner's lock guards it.
type lineSplitter struct {
	buf      []byte // the current partial line
	skipping bool   // discarding the rest of a too long line
}

// write feeds p, calling emit with each line it completes (truncated when
// the line was cut); line is valid only during the call.
func (l *lineSplitter) write(p []byte, emit func(line []byte, truncated bool)) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !l.skipping {
			room := maxStderrLine - len(l.buf)
			if len(chunk) > room {
				l.buf = append(l.buf, chunk[:room]...)
				l.flush(true, emit)
				l.skipping = true
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !l.skipping {
			l.flush(false, emit)
		}
		l.skipping = false
		p = p[i+1:]
	}
}

// flush hands the current line to emit and empties it.
func (l *lineSplitter) flush(truncated bool, emit func(line []byte, truncated bool)) {
	emit(bytes.TrimSuffix(l.buf, []byte("\r")), truncated)
	l.buf = l.buf[:0]
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
			text := l.text
			if l.truncated {
				text = s.red.trimCut(text) // a value cut at maxStderrLine is not whole: redact cannot find it
			}
			text = s.red.redact(text)
			if l.truncated {
				s.log.InfoContext(ctx, "upstream stderr", "server", s.server, "line", text, "truncated", true)
			} else {
				s.log.InfoContext(ctx, "upstream stderr", "server", s.server, "line", text)
			}
		}
	}
}
