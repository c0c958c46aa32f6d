package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// drainedPipe returns the write end of an os.Pipe (a pipe the runtime
// poller watches) whose read end a goroutine reads to its end.
func drainedPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(done)
	}()
	t.Cleanup(func() {
		_ = w.Close()
		<-done
		_ = r.Close()
	})
	return w
}

// TestStdioWriteToAPollablePipeCostsNothing (shut39): a bounded write to a
// stdio agent's stdout that takes a write deadline (a pipe the poller
// watches: StdioOutput makes serve's stdout one) runs in the caller's
// goroutine and allocates nothing. Before, every write copied the line and
// ran in a goroutine of its own, with a timer and a channel.
func TestStdioWriteToAPollablePipeCostsNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	lw := newLockedWriter(keepOpen{drainedPipe(t)}, time.Minute)
	line := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := lw.Write(line); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a write to a pollable pipe allocates %.1f times, want 0", allocs)
	}
}

// TestStdioWriteDeadlineEndsTheBlockedWrite (shut39): a write to a pipe
// that is never drained fails with errAgentNotReading once the bound
// passed, marks the writer stuck, and the blocked write itself has
// returned (the write lock is free): nothing is left writing, so the
// SDK's own write lock is released and its session can close. Before, the
// write went on blocking in a goroutine of its own, holding the lock, for
// as long as the process lived. Real time (the poller's deadline on a real
// pipe, which a synctest bubble cannot advance); the 20 s is a hang guard.
func TestStdioWriteDeadlineEndsTheBlockedWrite(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	lw := newLockedWriter(keepOpen{w}, 100*time.Millisecond)
	big := append(bytes.Repeat([]byte("x"), 1<<20), '\n') // > the pipe's 64 KiB
	done := make(chan error, 1)
	go func() {
		_, err := lw.Write(big)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errAgentNotReading) {
			t.Fatalf("the write to a pipe nobody reads: %v, want %v", err, errAgentNotReading)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the write to a pipe nobody reads did not end 20 s after a bound of 100ms")
	}
	select {
	case <-lw.stuck:
	default:
		t.Fatal("the writer is not marked stuck")
	}
	select {
	case lw.sem <- struct{}{}:
		<-lw.sem
	default:
		t.Fatal("the write lock is still held: the blocked write did not return")
	}
	if _, err := lw.Write([]byte("{}\n")); !errors.Is(err, errAgentNotReading) {
		t.Errorf("a write after the writer got stuck: %v, want %v at once", err, errAgentNotReading)
	}
}

// TestStdioWriteWithoutDeadlineStillBounded: a writer with no write
// deadline (an in-process pipe here; a blocking pipe, a terminal or a file
// for serve) still fails a write that does not complete within the bound,
// in a goroutine of its own, and every write after it at once. In a
// synctest bubble: the bound passes on the bubble's clock.
func TestStdioWriteWithoutDeadlineStillBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, w := io.Pipe()
		defer func() { _ = r.Close() }()
		lw := newLockedWriter(w, 30*time.Second)
		if lw.dl != nil {
			t.Fatal("an io.Pipe took a write deadline")
		}
		start := time.Now()
		if _, err := lw.Write([]byte("{}\n")); !errors.Is(err, errAgentNotReading) {
			t.Fatalf("the write nobody reads: %v, want %v", err, errAgentNotReading)
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Errorf("the write failed after %v, want the bound, 30s", d)
		}
		if _, err := lw.Write([]byte("{}\n")); !errors.Is(err, errAgentNotReading) {
			t.Errorf("the next write: %v, want %v at once", err, errAgentNotReading)
		}
	})
}

// TestStdioWritesStaySerialised: with a write deadline, lines written at
// once by many goroutines (the SDK and the stdin guard's error lines)
// arrive whole, never interleaved.
func TestStdioWritesStaySerialised(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	lw := newLockedWriter(keepOpen{w}, time.Minute)
	const writers, lines = 8, 50
	errs := make(chan error, writers)
	for _, c := range []byte("abcdefgh")[:writers] {
		go func() {
			line := append(bytes.Repeat([]byte{c}, 100<<10), '\n') // > the pipe's buffer
			for range lines {
				if _, err := lw.Write(line); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() {
		for range writers {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		_ = w.Close()
	}()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l := range bytes.Lines(data) {
		if len(l) != 100<<10+1 || bytes.Count(l, l[:1]) != 100<<10 {
			t.Fatalf("line %d is not one writer's whole line (%d bytes)", n, len(l))
		}
		n++
	}
	if n != writers*lines {
		t.Errorf("%d lines, want %d", n, writers*lines)
	}
}

// TestServeStdioEndsWhenTheAgentStopsReadingAPipe: ServeStdio over a real
// pipe (the write deadline's path) whose agent sends requests and never
// reads their answers ends with errAgentNotReading once the pipe is full
// and the bound passed: the SDK's writers blocked behind the stuck write
// fail at once and its session closes. The 20 s is a hang guard.
func TestServeStdioEndsWhenTheAgentStopsReadingAPipe(t *testing.T) {
	g, err := New(t.Context(), nil, allowAll(), &Options{StdioWriteTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	if err := g.applyTools("up", upstreamTools{defs: []*mcp.Tool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, true); err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	t.Cleanup(func() { _ = inW.Close(); _ = outR.Close() })
	done := make(chan error, 1)
	go func() { done <- g.ServeStdio(t.Context(), inR, outW, approval.Principal{ID: "desktop", Kind: "agent"}) }()
	go func() {
		if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n"+
			`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`+"\n"); err != nil {
			return
		}
		for i := 1; ; i++ {
			// Each answer is about 150 bytes: a few hundred fill the pipe.
			if _, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i); err != nil {
				return
			}
		}
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errAgentNotReading) {
			t.Fatalf("ServeStdio: %v, want %v", err, errAgentNotReading)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ServeStdio did not end 20 s after a bound of 100ms with an agent that does not read")
	}
}

// TestCloseStepNamesClosesProgress: CloseStep, which serve's log line of
// a shutdown that overran its bound carries, is empty before Close and
// "closed" once it returned.
func TestCloseStepNamesClosesProgress(t *testing.T) {
	g, err := New(t.Context(), nil, allowAll(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := g.CloseStep(); s != "" {
		t.Errorf("CloseStep before Close: %q, want empty", s)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if s := g.CloseStep(); s != "closed" {
		t.Errorf("CloseStep after Close: %q, want closed", s)
	}
}

// TestStdioWriteShortenedAtShutdown (tail40): shorten, which ServeStdio
// calls when its ctx ends, caps the wait of a write already blocked on an
// agent that stopped reading at the grace from then, however long the
// bound (30 s here, limits.stdio_write_timeout's default, longer than
// serve's 15 s shutdown bound). In a synctest bubble, with no write
// deadline (a write in a goroutine).
func TestStdioWriteShortenedAtShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, w := io.Pipe()
		defer func() { _ = r.Close() }()
		lw := newLockedWriter(w, 30*time.Second)
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := lw.Write([]byte("{}\n"))
			done <- err
		}()
		synctest.Wait() // the write is blocked
		lw.shorten(3 * time.Second)
		if err := <-done; !errors.Is(err, errAgentNotReading) {
			t.Fatalf("the write nobody reads: %v, want %v", err, errAgentNotReading)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("the write failed %v after it began, want the grace, 3s, not the bound, 30s", d)
		}
		if !lw.failed() {
			t.Error("the writer is not marked stuck")
		}
	})
}

// TestStdioWriteDeadlineShortenedAtShutdown (tail40): the same with a
// write deadline (a real pipe the poller watches, as serve's stdout is):
// shorten moves the deadline of the write in flight. Before, it stayed
// blocked until the bound, 10m here. Real time; the 20 s is a hang guard.
func TestStdioWriteDeadlineShortenedAtShutdown(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	lw := newLockedWriter(keepOpen{w}, 10*time.Minute)
	if lw.dl == nil {
		t.Fatal("an os.Pipe took no write deadline")
	}
	big := append(bytes.Repeat([]byte("x"), 1<<20), '\n') // > the pipe's 64 KiB
	done := make(chan error, 1)
	go func() {
		_, err := lw.Write(big)
		done <- err
	}()
	lw.shorten(100 * time.Millisecond) // before the write or during it: either way it ends at the cap
	select {
	case err := <-done:
		if !errors.Is(err, errAgentNotReading) {
			t.Fatalf("the write to a pipe nobody reads: %v, want %v", err, errAgentNotReading)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the write to a pipe nobody reads did not end 20 s after it was shortened to 100ms")
	}
	if !lw.failed() {
		t.Error("the writer is not marked stuck")
	}
}
