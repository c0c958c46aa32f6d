package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// Leader/follower reading of a stdio upstream's stdout (issue 13). The
// lines of a stdio session used to be read by one goroutine, the SDK's
// reader, which handed each raw call's answer to the call over a channel:
// at one call at a time that is a goroutine hand-off (and a wake-up of a
// second thread) per call, on the call's path. Now a raw call that waits
// for its answer reads the child's stdout itself when nobody else does: it
// holds the read token, reads lines until its own answer has come, and
// gives the token back. A line for another raw call is delivered to that
// call as before; a line for the SDK (notifications, server→client
// requests, answers to the SDK's own requests) is copied to a queue the
// SDK's reader takes it from, in wire order (rawCalls.passed still counts
// it, so "Wire order" in rawcall.go holds unchanged).
//
// The SDK's reader reads the pipe itself only when no raw call is in
// flight and none ended within stdoutLinger: otherwise it would sit in the
// pipe's read when the next call comes, and that call could not read its
// own answer. So between raw calls a line the upstream sends on its own
// waits at most stdoutLinger to be read. A raw call whose context ends
// while it reads is woken by a read deadline in the past; what was read of
// a line is kept for the next reader (lineReader.next).
//
// Fail closed: nothing here decides anything; a call still gets only the
// answer with its own id, the end of the input still fails every waiting
// call (rawCalls.end), and a pipe without read deadlines keeps the single
// reader (newStdoutGuard).

// stdoutLinger is how long after the last raw call ended the SDK's reader
// waits before it reads the pipe itself.
const stdoutLinger = 5 * time.Millisecond

// A deadlineReader is a pipe whose reads can be given a deadline.
type deadlineReader interface {
	SetReadDeadline(t time.Time) error
}

// readDeadlines returns r as a deadlineReader when its reads honour
// deadlines (an *os.File of a pipe the runtime polls), else nil.
func readDeadlines(r io.Reader) deadlineReader {
	d, ok := r.(deadlineReader)
	if !ok || d.SetReadDeadline(time.Time{}) != nil {
		return nil
	}
	return d
}

// stdoutLead is the reading side of one stdio session's stdout shared by
// the SDK's reader (Read) and the raw calls (lead).
type stdoutLead struct {
	lines  *lineReader
	handle func(jsonLine) []byte // the guard's: the bytes for the SDK (may share the line's memory), or nil
	end    func(error)           // called once with the read error; only by the token's holder
	dl     deadlineReader
	linger time.Duration

	token chan struct{} // cap 1: whoever received its value may read lines

	buf []byte // the SDK reader's: what is left of its current line

	mu        sync.Mutex
	q         [][]byte      // guarded by mu: lines for the SDK, copied, in wire order
	err       error         // guarded by mu: the read error, once seen
	active    int           // guarded by mu: raw calls in flight
	lingering bool          // guarded by mu: no raw call in flight, the last ended < linger ago
	sig       chan struct{} // cap 1: q grew or err was set
	idle      *time.Timer   // fires linger after the last raw call ended
}

func newStdoutLead(r io.Reader, dl deadlineReader, max int, handle func(jsonLine) []byte, end func(error)) *stdoutLead {
	s := &stdoutLead{
		lines: newLineReader(bufio.NewReaderSize(r, 64<<10), max), handle: handle, end: end, dl: dl,
		linger: stdoutLinger, token: make(chan struct{}, 1), sig: make(chan struct{}, 1),
		idle: time.NewTimer(time.Hour),
	}
	s.idle.Stop()
	s.token <- struct{}{}
	return s
}

// Read is the SDK reader's: the next bytes of the lines for the SDK.
func (s *stdoutLead) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		s.mu.Lock()
		if len(s.q) > 0 {
			s.buf = s.q[0]
			s.q[0] = nil
			s.q = s.q[1:]
			s.mu.Unlock()
			break
		}
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return 0, err
		}
		down := s.active > 0 || s.lingering
		s.mu.Unlock()
		if down {
			select {
			case <-s.sig:
			case <-s.idle.C:
				s.mu.Lock()
				s.lingering = false
				s.mu.Unlock()
			}
			continue
		}
		select {
		case <-s.sig:
			continue
		case <-s.token:
		}
		s.mu.Lock()
		read := s.active == 0 && !s.lingering && s.err == nil && len(s.q) == 0
		s.mu.Unlock()
		if read {
			s.readOne()
		}
		s.token <- struct{}{}
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// readOne reads and handles one line; only the token's holder calls it,
// and not after the input ended. A read interrupted by a deadline reads
// nothing and clears the deadline.
func (s *stdoutLead) readOne() {
	l, err := s.lines.next()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		_ = s.dl.SetReadDeadline(time.Time{})
		return
	}
	out := s.handle(l)
	if out == nil && err == nil {
		return
	}
	s.mu.Lock()
	if out != nil {
		s.q = append(s.q, bytes.Clone(out))
	}
	if err != nil {
		s.err = err
	}
	s.mu.Unlock()
	select {
	case s.sig <- struct{}{}:
	default:
	}
	if err != nil && s.end != nil {
		s.end(err)
		s.end = nil
	}
}

// enter records a raw call in flight: the SDK's reader stops reading the
// pipe once it has handled the line it may be waiting for.
func (s *stdoutLead) enter() {
	s.mu.Lock()
	s.active++
	if s.active == 1 {
		s.idle.Stop()
	}
	s.mu.Unlock()
}

// leave records the end of a raw call; after the last one the SDK's
// reader takes the pipe back once linger has passed without another.
func (s *stdoutLead) leave() {
	s.mu.Lock()
	s.active--
	if s.active == 0 {
		s.lingering = true
		s.idle.Reset(s.linger)
	}
	s.mu.Unlock()
}

// lead is called by a raw call that received the token: it reads lines
// until answered reports true, ctx ends or the input has ended, and then
// gives the token back.
func (s *stdoutLead) lead(ctx context.Context, answered func() bool) {
	defer func() { s.token <- struct{}{} }()
	stop := context.AfterFunc(ctx, s.interrupt)
	defer stop()
	for !answered() && ctx.Err() == nil {
		s.mu.Lock()
		ended := s.err != nil
		s.mu.Unlock()
		if ended {
			return
		}
		s.readOne()
	}
}

// interrupt wakes the read under way (a deadline in the past).
func (s *stdoutLead) interrupt() { _ = s.dl.SetReadDeadline(time.Unix(1, 0)) }
