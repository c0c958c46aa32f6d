package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envGatedCat, in the test binary's environment, makes it a child that
// writes "ready\n", reads nothing from its stdin until it gets SIGUSR1,
// then copies its stdin to its stdout.
const envGatedCat = "TOOLGATE_GATEWAY_TEST_GATEDCAT"

func init() {
	if os.Getenv(envGatedCat) == "" {
		return
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		os.Exit(1)
	}
	<-usr1
	_, _ = io.Copy(os.Stdout, os.Stdin)
	os.Exit(0)
}

// startGatedCat starts the gated child (envGatedCat) and returns it with
// a reader of its stdout, past its "ready" line.
func startGatedCat(t *testing.T) (*process, *bufio.Reader) {
	t.Helper()
	sc := ServerConfig{Name: "gatedcat", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{envGatedCat: "1"}}
	p, err := startProcess(sc, io.Discard, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if p.dl == nil {
		t.Skip("the child's stdin is not a pollable pipe here: no write deadline")
	}
	out := bufio.NewReaderSize(p.out, 1<<20)
	if l, err := out.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("the child's first line %q (%v), want ready", l, err)
	}
	return p, out
}

// hangGuard waits for ch; it is a guard against a hang, not a timing.
func hangGuard(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: still writing to a child that does not read, 20 s after its context was cancelled", what)
		return nil
	}
}

// TestCancelledWriteReturnsAtOnce (fixes30): a write to a stdio child
// that stopped reading, with no bound (no call_timeout, no deadline on the
// context), waited for as long as the child did not read even after its
// caller's context was cancelled: WriteBounded watched the context only
// while it waited for the write lock. Now the cancellation ends the write
// at once (errLinePartlySent here, the pipe having taken part of the
// line), and the rest of the line is still written whole by the process
// once the child reads again, before the next line.
func TestCancelledWriteReturnsAtOnce(t *testing.T) {
	p, out := startGatedCat(t)
	big := append(bytes.Repeat([]byte("x"), 512<<10), '\n') // > the pipe's 64 KiB
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.WriteBounded(big, time.Time{}, ctx.Done(), nil) }()
	cancel()
	err := hangGuard(t, "the cancelled write", done)
	if !errors.Is(err, errLinePartlySent) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the cancelled write: %v, want %v (%v)", err, errLinePartlySent, os.ErrDeadlineExceeded)
	}

	// The next line waits for the rest of the first (no bound here), and
	// both arrive whole once the child reads (its copies read as they
	// come, or the child would stop on its full stdout).
	lines := make(chan []byte, 3)
	go func() {
		for {
			l, err := out.ReadBytes('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	line := func() []byte {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("the child copied no line in 20 s")
			return nil
		}
	}
	next := make(chan error, 1)
	go func() { next <- p.WriteBounded([]byte("{}\n"), time.Time{}, nil, nil) }()
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := hangGuard(t, "the line after it", next); err != nil {
		t.Fatalf("the line after it: %v", err)
	}
	if first := line(); !bytes.Equal(first, big) {
		t.Fatalf("the child read a first line of %d bytes, want the cancelled line whole (%d)", len(first), len(big))
	}
	if second := line(); string(second) != "{}\n" {
		t.Fatalf("the child read %q next, want {}", second)
	}

	// A line the pipe takes whole is written as before, cancelled or not.
	ctx2, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if err := p.WriteBounded([]byte("{\"a\":1}\n"), time.Time{}, ctx2.Done(), nil); err != nil {
		t.Fatalf("a small line: %v", err)
	}
	if l := line(); string(l) != "{\"a\":1}\n" {
		t.Fatalf("the child read %q, want the small line", l)
	}
}

// TestCancelledSDKWriteReturnsAtOnce (fixes30): the same through the SDK
// path's writer (sdkWriter.write, which passes the message's context on
// to WriteBounded): a message whose line the child does not take, with
// no bound, ends when its context is cancelled, with a
// *boundedWriteError (a rejected message, the session kept).
func TestCancelledSDKWriteReturnsAtOnce(t *testing.T) {
	p, _ := startGatedCat(t)
	w := newSDKWriter(p)
	big := append(bytes.Repeat([]byte("x"), 512<<10), '\n')
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- w.write(ctx, 0, func() error { _, err := w.Write(big); return err })
	}()
	cancel()
	err := hangGuard(t, "the cancelled SDK message", done)
	var bwe *boundedWriteError
	if !errors.As(err, &bwe) || !errors.Is(err, errLinePartlySent) {
		t.Fatalf("the cancelled SDK message: %v, want a *boundedWriteError, %v", err, errLinePartlySent)
	}
}

// TestCancelledRawCallReturnsAtOnce (fixes30): a raw call whose line the
// child took only part of when its caller's context was cancelled
// returned after rawCalls.cancel had waited up to 500 ms (cancelBound)
// for the write lock that the rest of the line holds, which it never got
// while the child did not read: the child never heard of the
// cancellation, and the caller got the write's error, not its context's.
// Now the call returns its context's cause at once, and the cancellation
// is queued right after the rest (WriteAfterRest): the child reads the
// call's line whole, then notifications/cancelled for it.
func TestCancelledRawCallReturnsAtOnce(t *testing.T) {
	p, out := startGatedCat(t)
	r := newRawCalls(p, 1<<20, slog.New(slog.DiscardHandler))
	pad := strings.Repeat("x", 512<<10) // > the pipe's 64 KiB
	mk := func(n uint64) []byte {
		return []byte(`{"jsonrpc":"2.0","id":"` + rawIDPrefix + strconv.FormatUint(n, 10) + `","method":"tools/call","params":{"name":"t","arguments":{"pad":"` + pad + `"}}}` + "\n")
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	why := errors.New("the agent went away")
	done := make(chan error, 1)
	go func() {
		// Cancelled once the call is under way (its line being made),
		// before the line is written: whenever the cancellation comes
		// during the write, the outcome is the same.
		_, err := r.sendBounded(ctx, rawBounds{}, func(n uint64) []byte { cancel(why); return mk(n) }, nil, false)
		done <- err
	}()
	if err := hangGuard(t, "the cancelled raw call", done); !errors.Is(err, why) {
		t.Fatalf("the cancelled raw call: %v, want its context's cause %q", err, why)
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	lines := make(chan []byte, 2)
	go func() {
		for range 2 {
			l, err := out.ReadBytes('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	line := func() []byte {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("the child copied no line in 20 s")
			return nil
		}
	}
	if first := line(); !bytes.Equal(first, mk(1)) {
		t.Fatalf("the child read a first line of %d bytes, want the call's line whole (%d)", len(first), len(mk(1)))
	}
	var note struct {
		Method string
		Params struct {
			RequestID string
			Reason    string
		}
	}
	second := line()
	if err := json.Unmarshal(second, &note); err != nil || note.Method != "notifications/cancelled" || note.Params.RequestID != rawIDPrefix+"1" || note.Params.Reason != why.Error() {
		t.Fatalf("the child read %q (%v) after the call, want its notifications/cancelled with the reason", second, err)
	}
}
