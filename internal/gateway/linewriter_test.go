package gateway

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatedWriter records each Write; the first one signals entered and waits
// for release, and then fails with firstErr; writes from the second on fail
// with err.
type gatedWriter struct {
	entered  chan struct{} // cap 1
	release  chan struct{}
	firstErr error
	err      error

	mu     sync.Mutex
	writes []string // guarded by mu
}

func newGatedWriter() *gatedWriter {
	return &gatedWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (g *gatedWriter) Write(b []byte) (int, error) {
	g.mu.Lock()
	g.writes = append(g.writes, string(b))
	first := len(g.writes) == 1
	g.mu.Unlock()
	if first {
		g.entered <- struct{}{}
		<-g.release
		if g.firstErr != nil {
			return 0, g.firstErr
		}
		return len(b), nil
	}
	if g.err != nil {
		return 0, g.err
	}
	return len(b), nil
}

func (g *gatedWriter) all() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.writes)
}

// startBlockedWrite queues line a on l from another goroutine and returns
// once its write has started (and blocks in g), with a channel closed when
// that goroutine's queue call returned (it wrote everything queued meanwhile).
func startBlockedWrite(t *testing.T, l *lineWriter, g *gatedWriter, fail func(uint64, error)) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.queue([]byte("a\n"), 1, fail)
	}()
	select {
	case <-g.entered:
	case <-time.After(testWait):
		t.Fatal("the first write did not start")
	}
	return done
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testWait):
		t.Fatalf("%s did not happen", what)
	}
}

// Lines queued while a write is under way do not wait for it and go out
// together in the next write, in the order they were given; the SDK's
// Write returns once its line is written.
func TestLineWriterJoinsLinesQueuedDuringAWrite(t *testing.T) {
	g := newGatedWriter()
	l := &lineWriter{w: g}
	done := startBlockedWrite(t, l, g, nil)
	// These return at once although a write is under way.
	l.queue([]byte("b\n"), 2, nil)
	l.queue([]byte("c\n"), 3, nil)
	l.queue([]byte("d\n"), 4, nil)
	close(g.release)
	waitClosed(t, done, "the writer's return")
	if n, err := l.Write([]byte("e\n")); n != 2 || err != nil {
		t.Fatalf("Write = %d, %v; want 2, nil", n, err)
	}
	want := []string{"a\n", "b\nc\nd\n", "e\n"}
	if got := g.all(); !slices.Equal(got, want) {
		t.Fatalf("writes %q, want %q (one write for the three lines queued meanwhile)", got, want)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writing || len(l.lines) != 0 {
		t.Fatalf("after the writes: writing %v, %d lines queued", l.writing, len(l.lines))
	}
}

// A failed write fails every line of it: queued lines through fail (with
// their ids), a Write with its error; lines of an earlier write that
// succeeded are not failed.
func TestLineWriterFailsTheLinesOfAFailedWrite(t *testing.T) {
	g := newGatedWriter()
	g.err = errors.New("broken pipe")
	l := &lineWriter{w: g}
	var (
		mu     sync.Mutex
		failed = map[uint64]error{}
	)
	fail := func(id uint64, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed[id] = err
	}
	done := startBlockedWrite(t, l, g, fail)
	l.queue([]byte("b\n"), 2, fail)
	l.queue([]byte("c\n"), 3, fail)
	close(g.release)
	waitClosed(t, done, "the writer's return")
	if n, err := l.Write([]byte("d\n")); n != 0 || !errors.Is(err, g.err) {
		t.Fatalf("Write = %d, %v; want 0 and the write's error", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 2 || !errors.Is(failed[2], g.err) || !errors.Is(failed[3], g.err) {
		t.Fatalf("failed %v, want ids 2 and 3 with the write's error (id 1 was written)", failed)
	}
}

// failingWriter fails every write with err.
type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

// A raw call whose line could not be written fails with the write's error,
// as it did when it wrote its line itself, and is no longer waited for.
func TestRawCallFailsWhenItsLineIsNotWritten(t *testing.T) {
	broken := errors.New("broken pipe")
	p := &process{}
	p.lines.w = failingWriter{broken}
	r := newRawCalls(p, 1<<20, slog.New(slog.DiscardHandler))
	_, err := r.call(t.Context(), "echo", []byte(`{}`), "", nil)
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "write tools/call to the upstream") {
		t.Fatalf("call: %v, want the write's error", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.waiting) != 0 {
		t.Fatalf("%d calls still waited for", len(r.waiting))
	}
}
