package gateway

import (
	"bufio"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// The read turn of a stdio upstream's stdout (issue 13; docs/performance.md,
// "The caller reads its own answer"). Every line the child writes is read
// by whoever holds the turn: the SDK's reader goroutine (through Read) or a
// raw call waiting for its answer (rawCalls.call). The holder routes each
// line as the stdout guard always did: an answer to a raw call to that call
// (rawCalls.divert), everything else through the guard to the SDK, queued
// in wire order. A raw call that reads its own answer returns without being
// woken by another goroutine; with one call in flight that saves the
// reader's wake-up of the caller on every call.
//
// Who reads when:
//   - A raw call takes a free turn and reads until its answer has come (or
//     was parked behind lines the SDK has yet to read), its context ends,
//     or the input ends; then it passes the turn to the next raw call
//     waiting for it, or, when none waits, arms the idle timer.
//   - The SDK's reader takes a free turn when no raw call waits for it and
//     the SDK may read (sdkTurn): at the start, idleGrace after the last
//     raw call let go of the turn, and when the SDK sends a request of its
//     own. It reads one line per turn and lets go of it when a raw call
//     waits or the line answered a raw call, so that the next call reads
//     its own answer.
//   - A raw call that finds the turn taken waits in the queue; an answer
//     read by another holder is handed to it as before.
//
// So the pipe is read whenever a raw call waits, and otherwise at most
// idleGrace after the last one (the upstream's notifications between calls
// wait that long at most). A holder whose call is cancelled is woken from
// its read by a read deadline in the past (kick); what it read of a line
// stays with the lineReader for the next holder, so no line is lost or
// read twice. Without read deadlines (the input is not a pollable pipe) no
// raw call reads: the SDK's reader reads every line, as before.

// idleGrace is how long after the last raw call let go of the turn the
// SDK's reader takes it back.
const idleGrace = 2 * time.Millisecond

// deadliner is a reader whose blocked Read a read deadline interrupts.
type deadliner interface {
	SetReadDeadline(t time.Time) error
}

// stdoutTurn is a stdio upstream's stdout as the SDK reads it (Read) and as
// raw calls read it (lead). Its state is guarded by raw.mu.
type stdoutTurn struct {
	lines  *lineReader           // read only by the holder of the turn
	handle func(jsonLine) []byte // the stdout guard, for lines that are no raw answer
	raw    *rawCalls
	dl     deadliner // nil: raw calls never take the turn

	held    bool          // guarded by raw.mu: someone reads lines
	leader  uint64        // guarded by raw.mu: the raw call holding the turn, else 0
	sdkTurn bool          // guarded by raw.mu: the SDK's reader may take a free turn
	queue   []*rawWaiter  // guarded by raw.mu: raw calls waiting for the turn, in order
	sdkQ    [][]byte      // guarded by raw.mu: lines for the SDK, in wire order
	err     error         // guarded by raw.mu: the input's error, once seen
	sdkWake chan struct{} // cap 1: the SDK's reader has something to look at
	idle    *time.Timer   // gives the turn back to the SDK's reader (grace)
	grace   time.Duration // guarded by raw.mu: idleGrace (tests set it)

	// ownReads counts the raw answers read by their own call (tests).
	ownReads atomic.Uint64

	buf []byte // the SDK's reader's current line (Read only)
}

// newStdoutTurn returns the turn over r (read through a lineReader keeping
// at most max bytes of a line), routing lines that answer no raw call
// through handle, and sets raw.turn. Raw calls read only when r has read
// deadlines.
func newStdoutTurn(r io.Reader, max int, handle func(jsonLine) []byte, raw *rawCalls) *stdoutTurn {
	t := &stdoutTurn{
		lines:   newLineReader(bufio.NewReaderSize(r, 64<<10), max),
		handle:  handle,
		raw:     raw,
		sdkTurn: true,
		sdkWake: make(chan struct{}, 1),
		grace:   idleGrace,
	}
	if d, ok := r.(deadliner); ok && d.SetReadDeadline(time.Time{}) == nil {
		t.dl = d
	}
	t.idle = time.AfterFunc(time.Hour, t.idleOver)
	t.idle.Stop()
	raw.mu.Lock()
	raw.turn = t
	raw.mu.Unlock()
	return t
}

// Read is the SDK's reader: it returns the bytes of the lines routed to the
// SDK, reading them itself when it may take the turn.
func (t *stdoutTurn) Read(p []byte) (int, error) {
	r := t.raw
	for len(t.buf) == 0 {
		r.mu.Lock()
		switch {
		case len(t.sdkQ) > 0:
			t.buf = t.sdkQ[0]
			t.sdkQ[0] = nil
			t.sdkQ = t.sdkQ[1:]
			r.mu.Unlock()
			continue
		case t.err != nil:
			err := t.err
			r.mu.Unlock()
			return 0, err
		case !t.held && t.sdkTurn && !t.queuedLocked():
			t.held = true
			r.mu.Unlock()
			t.sdkLead()
			continue
		}
		r.mu.Unlock()
		<-t.sdkWake
	}
	n := copy(p, t.buf)
	t.buf = t.buf[n:]
	return n, nil
}

// sdkLead reads one line as the holder of the turn and lets go of it.
func (t *stdoutTurn) sdkLead() {
	for {
		l, err := t.lines.next()
		if isDeadline(err) {
			// A stale kick, meant for a raw call that held the turn.
			_ = t.dl.SetReadDeadline(time.Time{})
			continue
		}
		diverted := t.route(l, err)
		r := t.raw
		r.mu.Lock()
		t.held = false
		if diverted && t.dl != nil {
			// Raw calls are about: the next one reads its own answer.
			t.sdkTurn = false
		}
		t.passLocked()
		r.mu.Unlock()
		return
	}
}

// lead reads lines as the holder of the turn for w, the raw call of ctx,
// until w's answer came (delivered or parked), ctx ended or the input
// ended, and then passes the turn on. The caller holds the turn (held was
// set for it).
func (t *stdoutTurn) lead(ctxErr func() error, w *rawWaiter) {
	r := t.raw
	for {
		l, err := t.lines.next()
		diverted := false
		if isDeadline(err) {
			_ = t.dl.SetReadDeadline(time.Time{})
		} else {
			diverted = t.route(l, err)
		}
		r.mu.Lock()
		if diverted && w.done {
			t.ownReads.Add(1) // (only this read can have answered it)
		}
		if w.done || w.parked || t.err != nil || ctxErr() != nil {
			t.held, t.leader = false, 0
			t.passLocked()
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}

// route does with the line l (and the input's error err) what the stdout
// guard does: an answer to a raw call goes to it, another line through
// handle to the SDK's queue. It reports whether l answered a raw call.
// Only the holder of the turn calls it.
func (t *stdoutTurn) route(l jsonLine, err error) (diverted bool) {
	r := t.raw
	var out []byte
	if l.size > 0 || l.over {
		if r.divert(l) {
			diverted = true
		} else if out = t.handle(l); out != nil {
			t.lines.detach() // out may share the line's memory: the SDK keeps it
			r.passed.Add(1)
		}
	}
	r.mu.Lock()
	if out != nil {
		t.sdkQ = append(t.sdkQ, out)
	}
	if err != nil && t.err == nil {
		t.err = err
	}
	r.mu.Unlock()
	if out != nil || err != nil {
		t.wakeSDK()
	}
	if err != nil {
		r.end(err)
	}
	return diverted
}

// passLocked finds the next reader of a free turn: the first raw call in
// the queue that still waits, else the SDK's reader when it may read, else
// the idle timer, which lets it read after idleGrace. raw.mu is held.
func (t *stdoutTurn) passLocked() {
	if t.held {
		return
	}
	for len(t.queue) > 0 {
		w := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		w.queued = false
		if w.done || w.left || w.parked {
			continue
		}
		w.offered = true
		wakeUp(w.wake)
		return
	}
	if t.sdkTurn || t.err != nil {
		t.wakeSDK()
		return
	}
	t.idle.Reset(t.grace)
}

// queuedLocked reports whether a raw call waits for the turn. raw.mu is
// held.
func (t *stdoutTurn) queuedLocked() bool {
	for _, w := range t.queue {
		if !w.done && !w.left && !w.parked {
			return true
		}
	}
	return false
}

// idleOver gives a free turn back to the SDK's reader when no raw call has
// taken it for idleGrace.
func (t *stdoutTurn) idleOver() {
	t.raw.mu.Lock()
	defer t.raw.mu.Unlock()
	if t.held || t.queuedLocked() {
		return
	}
	t.sdkTurn = true
	t.wakeSDK()
}

// sdkWants lets the SDK's reader read now: the SDK sent a request whose
// answer it waits for.
func (t *stdoutTurn) sdkWants() {
	t.raw.mu.Lock()
	defer t.raw.mu.Unlock()
	if t.sdkTurn {
		return
	}
	t.sdkTurn = true
	t.idle.Stop()
	if !t.held {
		t.wakeSDK()
	}
}

// kick interrupts the holder's blocked read (a read deadline in the past);
// the holder resets the deadline and looks at why it was woken.
func (t *stdoutTurn) kick() {
	_ = t.dl.SetReadDeadline(time.Unix(1, 0))
}

func (t *stdoutTurn) wakeSDK() { wakeUp(t.sdkWake) }

// wakeUp sends on a channel of capacity 1 without blocking.
func wakeUp(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func isDeadline(err error) bool {
	return err != nil && errors.Is(err, os.ErrDeadlineExceeded)
}
