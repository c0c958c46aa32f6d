package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"
)

// A child that stops reading its stdin (busy in a long tool call, wedged)
// fills the pipe (64 KiB on Linux), and a write to it then blocks. Before
// WriteBounded a raw call's write waited for as long as that lasted: past
// its call_timeout, and every later line of the session waited behind it
// for the write lock (attack28, docs/architecture.md). WriteBounded ends
// the wait at the call's bound instead, with the pipe's write deadline
// (the runtime poller's, as for a net.Conn).
//
// A line is never cut: a write that took none of the line's bytes by the
// bound fails with errLineNotSent (nothing reached the child); one that
// took part of them fails with errLinePartlySent, and the rest of the line
// is written by a goroutine the process owns, which holds the write lock
// until it is done (or the process ends), so that the child's stream stays
// whole. Later writers wait for the lock within their own bounds.

// errLineNotSent: the bound passed before the child took any byte of the
// line; nothing was sent.
var errLineNotSent = errors.New("the upstream did not read its stdin before the call's bound: the call was not sent")

// errLinePartlySent: the bound passed while the child had taken part of
// the line; the rest is sent when the child reads again, so the call may
// still run.
var errLinePartlySent = errors.New("the upstream stopped reading its stdin while the call was being written: the rest is sent when it reads again, and the call may still run")

// deadliner is the pipe's write deadline (an *os.File, or os/exec's
// wrapper of one).
type deadliner interface {
	SetWriteDeadline(t time.Time) error
}

// lock takes the write lock, or gives up when stop is closed or fires
// (nil: never). It reports whether it took it.
func (p *process) lock(stop <-chan struct{}, timeout <-chan time.Time) bool {
	select {
	case p.writeSem <- struct{}{}:
		return true
	default:
	}
	select {
	case p.writeSem <- struct{}{}:
		return true
	case <-stop:
		return false
	case <-timeout:
		return false
	}
}

func (p *process) unlock() { <-p.writeSem }

// setDeadline sets the pipe's write deadline to t (zero: none), skipping
// the runtime call when there is none to clear. The write lock must be
// held.
func (p *process) setDeadline(t time.Time) {
	if p.dl == nil || (t.IsZero() && !p.deadlineSet) {
		return
	}
	_ = p.dl.SetWriteDeadline(t)
	p.deadlineSet = !t.IsZero()
}

// WriteBounded writes line, one JSON-RPC message, to the child's stdin as
// Write does, but gives up by deadline (zero: no bound), when stop is
// closed (also while the line is being written: the write returns at
// once), or when timeout fires while it waits for the write lock. It
// returns errLineNotSent when no byte of line was written, and
// errLinePartlySent (the rest following later, see above) when some were;
// both wrap os.ErrDeadlineExceeded when the deadline or stop ended the
// write.
//
// What the pipe takes at once is written first (writeNow), with no
// deadline and nothing watching stop: a child that reads costs no more
// than Write. Only a line the pipe does not take whole is written by the
// deadline, with stop watched by a goroutine (stopWrite).
func (p *process) WriteBounded(line []byte, deadline time.Time, stop <-chan struct{}, timeout <-chan time.Time) error {
	if !p.lock(stop, timeout) {
		return errLineNotSent
	}
	p.setDeadline(time.Time{})
	n, err := 0, error(nil)
	if p.inNow != nil {
		n, err = p.inNow.WriteNow(line)
		if err == nil && n == len(line) {
			p.unlock()
			return nil
		}
	}
	if err == nil {
		p.setDeadline(deadline)
		var m int
		if stop != nil && p.dl != nil {
			m, err = p.stopWrite(line[n:], stop)
		} else {
			m, err = p.in.Write(line[n:])
		}
		n += m
	}
	if err == nil {
		p.unlock()
		return nil
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		p.unlock()
		return err
	}
	if n == 0 {
		p.unlock()
		return fmt.Errorf("%w (%w)", errLineNotSent, os.ErrDeadlineExceeded)
	}
	rest := bytes.Clone(line[n:])
	p.finishing.Add(1)
	p.qmu.Lock()
	p.finisher = true
	p.qmu.Unlock()
	go func() {
		defer p.finishing.Done()
		defer p.unlock()
		p.setDeadline(time.Time{})
		_, err := p.in.Write(rest) // an error: the process ended, and its stdin with it
		for {
			p.qmu.Lock()
			q := p.queued
			p.queued = nil
			if len(q) == 0 {
				p.finisher = false
				p.qmu.Unlock()
				return
			}
			p.qmu.Unlock()
			for _, l := range q {
				if err == nil {
					_, err = p.in.Write(l)
				}
			}
		}
	}()
	return fmt.Errorf("%w (%w)", errLinePartlySent, os.ErrDeadlineExceeded)
}

// WriteAfterRest queues line, one JSON-RPC message, to be written right
// after the rest of a partly written line (WriteBounded), when such a
// rest is being written, and reports whether it did; the caller does not
// wait for it. A line that can only follow that rest (a cancellation of
// the call it carries, rawCalls.cancel) so goes as soon as the child
// reads again, without its caller waiting for the write lock.
func (p *process) WriteAfterRest(line []byte) bool {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if !p.finisher {
		return false
	}
	p.queued = append(p.queued, bytes.Clone(line))
	return true
}

// stopWrite writes b to stdin (whose deadline the caller set) until it is
// written, the deadline passes, or stop is closed: then a goroutine sets
// the deadline to the past, which ends the write at once with
// os.ErrDeadlineExceeded and the bytes written so far. It returns once
// that goroutine has ended, so that it sets no deadline after; the
// deadline is then taken to be set (the next write clears it). The write
// lock must be held.
func (p *process) stopWrite(b []byte, stop <-chan struct{}) (int, error) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-stop:
			_ = p.dl.SetWriteDeadline(time.Unix(1, 0))
		case <-done:
		}
	}()
	n, err := p.in.Write(b)
	close(done)
	<-ended
	p.deadlineSet = true
	return n, err
}

// A nowWriter writes what a descriptor takes at once (rawio.File).
type nowWriter interface {
	WriteNow(b []byte) (int, error)
}
