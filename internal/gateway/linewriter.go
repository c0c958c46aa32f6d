package gateway

import (
	"io"
	"sync"
)

// A lineWriter writes the lines of one stdio upstream session to the
// child's stdin, one write at a time and in the order they were given.
// Lines given while a write is under way are written together in the next
// one (a group commit): with many calls in flight on one shared session
// (16 agents on one child) each call's line cost a write of its own, and
// the child a wake-up to read it (issue 13, docs/performance.md "One
// write for the lines of calls in flight").
//
// Whoever finds no write under way writes: its own line and then,
// until the queue is empty, what was queued meanwhile. A raw call queues
// its line and goes on to wait for its answer (queue); if the write fails,
// fail is called with the line's id and the error. Write (the SDK's lines,
// notifications/cancelled) returns once its line has been written.
type lineWriter struct {
	w io.Writer // the child's stdin

	mu      sync.Mutex
	lines   []queuedLine // guarded by mu: given, not yet taken by the writer
	spare   []queuedLine // guarded by mu: the writer's previous batch, for reuse
	writing bool         // guarded by mu: a goroutine is writing (and owns buf)
	buf     []byte       // the lines of a batch, joined; only the writer uses it
}

// A queuedLine is one line to write. Exactly one of fail and done is set
// (fail may be nil for a line whose failure nobody needs to hear of).
type queuedLine struct {
	b    []byte
	id   uint64
	fail func(id uint64, err error) // called when the write failed
	done chan error                 // cap 1: receives the write's error (nil: written)
}

// maxKeptBatch is the largest joined batch whose buffer is kept for the
// next one.
const maxKeptBatch = 64 << 10

// queue writes b after the lines given before it and returns without
// waiting for another goroutine's write: when a write is under way, b goes
// into the next one; otherwise the caller writes it (and whatever is
// queued meanwhile) itself. b must not be changed afterwards. When the
// write fails, fail (if not nil) is called with id and the error.
func (l *lineWriter) queue(b []byte, id uint64, fail func(uint64, error)) {
	l.mu.Lock()
	l.lines = append(l.lines, queuedLine{b: b, id: id, fail: fail})
	if l.writing {
		l.mu.Unlock()
		return
	}
	l.writing = true
	l.mu.Unlock()
	l.drain()
}

// Write writes b after the lines given before it and returns when it has
// been written (all of b, or an error and 0).
func (l *lineWriter) Write(b []byte) (int, error) {
	done := make(chan error, 1)
	l.mu.Lock()
	l.lines = append(l.lines, queuedLine{b: b, done: done})
	writer := !l.writing
	l.writing = true
	l.mu.Unlock()
	if writer {
		l.drain()
	}
	if err := <-done; err != nil {
		return 0, err
	}
	return len(b), nil
}

// drain writes batches until the queue is empty, then gives up the
// writer's role. Only the goroutine that set writing calls it.
func (l *lineWriter) drain() {
	for {
		l.mu.Lock()
		batch := l.lines
		if len(batch) == 0 {
			l.writing = false
			l.mu.Unlock()
			return
		}
		l.lines = l.spare[:0]
		l.spare = nil
		l.mu.Unlock()

		var err error
		if len(batch) == 1 {
			_, err = l.w.Write(batch[0].b)
		} else {
			l.buf = l.buf[:0]
			for _, q := range batch {
				l.buf = append(l.buf, q.b...)
			}
			_, err = l.w.Write(l.buf)
			if cap(l.buf) > maxKeptBatch {
				l.buf = nil
			}
		}
		for i, q := range batch {
			switch {
			case q.done != nil:
				q.done <- err
			case err != nil && q.fail != nil:
				q.fail(q.id, err)
			}
			batch[i] = queuedLine{}
		}
		l.mu.Lock()
		l.spare = batch[:0]
		l.mu.Unlock()
	}
}
