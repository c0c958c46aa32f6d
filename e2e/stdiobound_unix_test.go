//go:build unix

package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStdioShutdownWithAgentNotReading runs `toolgate serve --stdio` with
// its stdout a blocking pipe the test made (as an agent or a shell does)
// and that it never reads, sends requests until their answers fill the
// pipe, and stops the process with SIGTERM. At shutdown the blocked write's
// wait is cut to the shutdown grace (3 s), however long
// limits.stdio_write_timeout is (here 10m, and the default 30s), so the
// session closes, the log says the agent stopped reading, and the process
// stops the normal way with status 0 within its shutdown bound (15 s).
// After it the pipe's flags are what they were before it started:
// blocking. On 0c190c69 the blocked write held the session's close until
// the bound exited the process with status 1 (tail40; with the 10m limit
// always; with the default 30s only when SIGTERM comes within 15 s of the
// write blocking, which the test does not control; the bound's exit
// gives the pipe back blocking too: TestShutdownOverrunUndoesBeforeExit,
// and ends40's TestStdioPipeBlockingAfterShutdownBound, which this
// replaces, since this way no longer reaches the bound).
func TestStdioShutdownWithAgentNotReading(t *testing.T) {
	for _, tt := range []struct{ name, limits string }{
		{"stdio_write_timeout 10m", "limits:\n  stdio_write_timeout: 10m\n"},
		{"default stdio_write_timeout", ""},
	} {
		t.Run(tt.name, func(t *testing.T) { stdioShutdownNotReading(t, tt.limits) })
	}
}

// stdioShutdownNotReading is one case of
// TestStdioShutdownWithAgentNotReading, with limits the config's limits
// section ("" for the defaults).
func stdioShutdownNotReading(t *testing.T, limits string) {
	t.Helper()
	dir := t.TempDir()
	cfg := `
storage:
  driver: sqlite
  path: ` + q(filepath.Join(dir, "db.sqlite")) + `
` + limits + principalsYAML + upstreamServer(filepath.Join(dir, "record.log")) + `
policy:
  default: allow
`
	cmd, stderr, _ := gatewayCommand(t, cfg, nil, "--stdio")

	// The agent's pipe, blocking as an agent's is; the test holds both
	// ends and never reads.
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	unix.CloseOnExec(p[0])
	unix.CloseOnExec(p[1])
	r, w := os.NewFile(uintptr(p[0]), "agent-r"), os.NewFile(uintptr(p[1]), "agent-w")
	t.Cleanup(func() { _ = w.Close(); _ = r.Close() })
	before := fileFlags(t, w)
	if before&unix.O_NONBLOCK != 0 {
		t.Fatalf("the test's pipe is non-blocking before serve started (flags %#x)", before)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	child := startStdioChild(t, cmd, stderr, nil)
	// Far more answers than the pipe holds; the writes end with the
	// process (the cleanup's stop).
	go floodToolsList(stdin, 5000)
	waitPipeFull(t, p[1], child.exited)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-child.exited:
	case <-time.After(waitFor(t)):
		t.Fatalf("toolgate serve --stdio did not exit within %v of SIGTERM", waitFor(t))
	}
	if child.waitErr != nil {
		t.Errorf("toolgate serve --stdio exited with %v after SIGTERM with its agent not reading, want status 0\nstderr:\n%s", child.waitErr, stderr)
	}
	if strings.Contains(stderr.String(), "shutdown did not finish within its bound") {
		t.Errorf("the shutdown overran its bound\nstderr:\n%s", stderr)
	}
	if !strings.Contains(stderr.String(), "the agent stopped reading") {
		t.Errorf("the log does not say the agent stopped reading\nstderr:\n%s", stderr)
	}
	if after := fileFlags(t, w); after != before {
		t.Errorf("the agent's stdout pipe has flags %#x after toolgate exited, want %#x as before (O_NONBLOCK is %#x)", after, before, unix.O_NONBLOCK)
	}
}

// waitPipeFull waits until serve has made the pipe of write end fd
// non-blocking (it serves) and the pipe is full: a write of one byte (a
// newline, blank between the JSON lines nobody reads) fails with EAGAIN.
// serve then has a write blocked, with more answers behind it.
func waitPipeFull(t *testing.T, fd int, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		if fl&unix.O_NONBLOCK != 0 {
			if _, err := unix.Write(fd, []byte("\n")); errors.Is(err, unix.EAGAIN) {
				return
			} else if err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-exited:
			t.Fatal("toolgate serve --stdio exited before its stdout pipe filled")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stdout pipe of toolgate serve --stdio was not non-blocking and full after %v (flags %#x)", waitFor(t), fl)
		}
		time.Sleep(pollEvery)
	}
}

// fileFlags returns f's file status flags (F_GETFL): those of its open
// file description, which every process holding it shares.
func fileFlags(t *testing.T, f *os.File) int {
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
	return fl
}
