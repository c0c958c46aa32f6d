package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Leader/follower reading of a stdio upstream's stdout (issue 13). The
// lines of a stdio session used to be read by one goroutine, the SDK's
// reader, which handed each raw call's answer to the call over a channel:
// at one call at a time that is a goroutine hand-off (and a wake-up of a
// second thread) per call, on the call's path. Now a raw call that finds
// nobody reading the child's stdout when it has written its line reads it
// itself (it leads) until its own answer has come. A line for another raw
// call is delivered to that call as before; a line for the SDK
// (notifications, server→client requests, answers to the SDK's own
// requests) is copied to a queue the SDK's reader takes it from, in wire
// order (rawCalls.passed still counts it, so "Wire order" in rawcall.go
// holds unchanged).
//
// Who reads is decided under rawCalls.mu (reading): a raw call that finds
// somebody reading waits for its answer as before (it follows). The SDK's
// reader reads while a raw call waits for its answer and nobody leads
// (several calls in flight: one reader, as before), and when no raw call is
// in flight and none ended within stdoutLinger (notifications between
// calls wait at most that long to be read). A leader that stops while
// other calls wait for answers wakes the SDK's reader to go on. A raw call
// whose context ends while it reads is woken by a read deadline in the
// past; what was read of a line is kept for the next reader
// (lineReader.next).
//
// Fail closed: nothing here decides anything; a call still gets only the
// answer with its own id, the end of the input still fails every waiting
// call (rawCalls.end), and a pipe without read deadlines keeps the single
// reader (newStdoutGuard).

// stdoutLinger is how long after the last raw call ended the SDK's reader
// waits before it reads the pipe itself (rawCalls.linger; tests change it).
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
// the SDK's reader (Read) and the raw calls that lead (rawCalls.lead);
// who reads is decided by raw under its mu.
type stdoutLead struct {
	raw    *rawCalls
	lines  *lineReader           // read only by the one reading (rawCalls.reading)
	handle func(jsonLine) []byte // the guard's: the bytes for the SDK (may share the line's memory), or nil
	end    func(error)           // called once with the read error, by the one reading
	dl     deadlineReader

	buf       []byte // the SDK reader's: what is left of its current line
	bgReading bool   // the SDK reader's: it holds rawCalls.reading

	mu  sync.Mutex
	q   [][]byte // guarded by mu: lines for the SDK, copied, in wire order
	err error    // guarded by mu: the read error, once seen

	sig  chan struct{} // cap 1: wakes the SDK's reader (a line queued, the input ended, a leader stopped)
	idle *time.Timer   // fires rawCalls.linger after the last raw call ended

	led atomic.Uint64 // lines read by leading raw calls (for tests)
}

func newStdoutLead(raw *rawCalls, r io.Reader, dl deadlineReader, max int, handle func(jsonLine) []byte, end func(error)) *stdoutLead {
	s := &stdoutLead{
		raw: raw, lines: newLineReader(bufio.NewReaderSize(r, 64<<10), max), handle: handle, end: end, dl: dl,
		sig: make(chan struct{}, 1), idle: time.NewTimer(time.Hour),
	}
	s.idle.Stop()
	return s
}

// wake wakes the SDK's reader if it waits.
func (s *stdoutLead) wake() {
	select {
	case s.sig <- struct{}{}:
	default:
	}
}

// Read is the SDK reader's: the next bytes of the lines for the SDK.
func (s *stdoutLead) Read(p []byte) (int, error) {
	r := s.raw
	for len(s.buf) == 0 {
		s.mu.Lock()
		if len(s.q) > 0 {
			s.buf = s.q[0]
			s.q[0] = nil
			s.q = s.q[1:]
			s.mu.Unlock()
			break
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			if s.bgReading {
				r.mu.Lock()
				r.reading = false
				r.mu.Unlock()
				s.bgReading = false
			}
			return 0, err
		}
		if !s.bgReading {
			r.mu.Lock()
			can := !r.reading && r.sdkShouldRead()
			if can {
				r.reading = true
			}
			r.mu.Unlock()
			if !can {
				select {
				case <-s.sig:
				case <-s.idle.C:
					r.mu.Lock()
					r.lingering = false
					r.mu.Unlock()
				}
				continue
			}
			s.bgReading = true
		}
		s.readOne(nil)
		r.mu.Lock()
		if !r.sdkShouldRead() {
			r.reading = false
			s.bgReading = false
		}
		r.mu.Unlock()
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// readOne reads and handles one line, counted in n when n is not nil;
// only the one reading calls it. A read interrupted by a deadline reads
// nothing and clears the deadline; after the end of the input it does
// nothing.
func (s *stdoutLead) readOne(n *atomic.Uint64) {
	s.mu.Lock()
	ended := s.err != nil
	s.mu.Unlock()
	if ended {
		return
	}
	l, err := s.lines.next()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		_ = s.dl.SetReadDeadline(time.Time{})
		return
	}
	if n != nil {
		n.Add(1)
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
	s.wake()
	if err != nil && s.end != nil {
		s.end(err)
		s.end = nil
	}
}

// ended reports whether the input has ended.
func (s *stdoutLead) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// lead reads lines for raw call w, which holds rawCalls.reading, until w
// is answered, ctx ends or the input has ended; then it lets go of
// reading and wakes the SDK's reader when other calls wait for answers.
func (s *stdoutLead) lead(ctx context.Context, w *rawWaiter) {
	r := s.raw
	stop := context.AfterFunc(ctx, s.interrupt)
	for ctx.Err() == nil && !s.ended() {
		r.mu.Lock()
		done := w.answered
		r.mu.Unlock()
		if done {
			break
		}
		s.readOne(&s.led)
	}
	stop()
	r.mu.Lock()
	r.reading = false
	wake := r.sdkShouldRead()
	r.mu.Unlock()
	if wake {
		s.wake()
	}
}

// interrupt wakes the read under way (a deadline in the past).
func (s *stdoutLead) interrupt() { _ = s.dl.SetReadDeadline(time.Unix(1, 0)) }
