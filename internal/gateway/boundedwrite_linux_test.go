package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestRawCallWriteEndsAtItsBound (attack28): a stdio child that stops
// reading its stdin (here `sleep`, which never reads it) fills the pipe.
// A raw call whose line does not fit must end at its call_timeout with
// the line partly sent (never cut: the rest follows when the child reads),
// and a later call must not wait past its own bound for the write lock
// the rest of that line holds: it ends with nothing sent. Before
// WriteBounded both waited for as long as the child did not read.
func TestRawCallWriteEndsAtItsBound(t *testing.T) {
	p, err := startProcess(ServerConfig{Name: "sleep", Command: "sleep", Args: []string{"60"}}, io.Discard, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if p.dl == nil {
		t.Skip("the child's stdin is not a pollable pipe here: no write deadline")
	}
	r := newRawCalls(p, 1<<20, slog.New(slog.DiscardHandler))
	bounds := rawBounds{timeout: 200 * time.Millisecond}
	big := func(n uint64) []byte { return append(bytes.Repeat([]byte("x"), 512<<10), '\n') } // > the pipe's 64 KiB
	small := func(n uint64) []byte { return []byte("{}\n") }

	type result struct{ err error }
	send := func(mk func(uint64) []byte) <-chan result {
		ch := make(chan result, 1)
		go func() {
			_, err := r.sendBounded(t.Context(), bounds, mk, nil, false)
			ch <- result{err}
		}()
		return ch
	}
	// A hang guard, not a timing: each call's bound is 200 ms; on the base
	// the calls never return while the child sleeps.
	wait := func(what string, ch <-chan result) error {
		t.Helper()
		select {
		case res := <-ch:
			return res.err
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still writing to a child that does not read, 20 s after its 200 ms call_timeout", what)
			return nil
		}
	}
	if err := wait("the call whose line fills the pipe", send(big)); !errors.Is(err, errLinePartlySent) {
		t.Fatalf("the call whose line fills the pipe: %v, want %v", err, errLinePartlySent)
	}
	if err := wait("the call after it", send(small)); !errors.Is(err, errLineNotSent) {
		t.Fatalf("the call after it: %v, want %v", err, errLineNotSent)
	}
	// Without call_timeout the caller's context bounds the wait for the
	// lock.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := r.sendBounded(ctx, rawBounds{}, small, nil, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call whose context ends: %v, want context.DeadlineExceeded", err)
	}
}
