//go:build unix

package gateway

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl int
	var ferr error
	if err := rc.Control(func(fd uintptr) { fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil {
		t.Fatal(err, ferr)
	}
	return fl&unix.O_NONBLOCK != 0
}

// TestStdioOutputOfABlockingPipe (shut39): serve's stdout, a blocking pipe
// the agent made, becomes a writer that takes a write deadline (so a
// write to the agent runs in the caller's goroutine, bounded), and done
// gives the pipe back blocking and open.
func TestStdioOutputOfABlockingPipe(t *testing.T) {
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	unix.CloseOnExec(p[0])
	unix.CloseOnExec(p[1])
	r := os.NewFile(uintptr(p[0]), "r")
	w := os.NewFile(uintptr(p[1]), "w") // blocking: no poller, no deadline
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	if err := w.SetWriteDeadline(time.Time{}); !errors.Is(err, os.ErrNoDeadline) {
		t.Fatalf("a blocking pipe's deadline: %v, want %v", err, os.ErrNoDeadline)
	}
	out, done := StdioOutput(w)
	lw := newLockedWriter(out, time.Minute)
	if lw.dl == nil {
		t.Fatal("the pipe's writer takes no write deadline")
	}
	if !nonblocking(t, w) {
		t.Error("the pipe is not non-blocking while served")
	}
	if _, err := lw.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	done()
	if nonblocking(t, w) {
		t.Error("the pipe is still non-blocking after done")
	}
	if _, err := w.WriteString("two\n"); err != nil {
		t.Fatalf("stdout after done: %v", err)
	}
	_ = w.Close()
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "one\ntwo\n" {
		t.Errorf("read %q (%v), want both lines", b, err)
	}
}

// TestStdioOutputLeavesAFileAlone: a regular file (or a terminal) is never
// made non-blocking, whoever else shares it: its writer is the file
// itself, with no deadline.
func TestStdioOutputLeavesAFileAlone(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	out, done := StdioOutput(f)
	defer done()
	if newLockedWriter(out, time.Minute).dl != nil {
		t.Error("a regular file's writer takes a write deadline")
	}
	if nonblocking(t, f) {
		t.Error("the file was made non-blocking")
	}
}

// TestStdioOutputLeavesAPipeSharedWithTheLog: when serve's stderr is the
// same pipe as its stdout (`2>&1`), the pipe stays blocking: made
// non-blocking under the log, a line logged while the agent is slow to
// read would fail with EAGAIN and be lost. A dup of the pipe is the same
// file, as the shell's 2>&1 makes it.
func TestStdioOutputLeavesAPipeSharedWithTheLog(t *testing.T) {
	_, w := blockingPipe(t)
	d, err := unix.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	logs := os.NewFile(uintptr(d), "stderr")
	t.Cleanup(func() { _ = logs.Close() })
	out, done := StdioOutput(w, logs)
	defer done()
	if newLockedWriter(out, time.Minute).dl != nil {
		t.Error("a pipe shared with the log takes a write deadline")
	}
	if nonblocking(t, logs) {
		t.Error("the log's pipe was made non-blocking")
	}
	// Another pipe as the log leaves stdout's pipe to StdioOutput.
	_, other := blockingPipe(t)
	out2, done2 := StdioOutput(w, other)
	defer done2()
	if newLockedWriter(out2, time.Minute).dl == nil {
		t.Error("a pipe not shared with the log takes no write deadline")
	}
}

// blockingPipe is a pipe whose ends are blocking files (no poller), as a
// process's inherited stdout is.
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	unix.CloseOnExec(p[0])
	unix.CloseOnExec(p[1])
	r, w = os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	return r, w
}
