package gateway

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"toolgate/internal/rawio"
)

// A process is one running stdio upstream. Its stdout is the protocol's read
// side; Write and Close are the write side (Close ends the process).
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	// in and out write stdin and read stdout without the scheduler's
	// system-call bookkeeping (rawio), when their descriptors allow it;
	// else stdin and stdout themselves.
	in    io.Writer
	inNow nowWriter // in, when it can write what the pipe takes at once (rawio)
	out   io.Reader
	grace time.Duration

	// writeSem is the write lock (a channel, so that WriteBounded can
	// give up waiting for it): one line at a time on stdin.
	writeSem chan struct{}
	// dl is stdin's write deadline (nil when it has none); deadlineSet,
	// guarded by writeSem, says one may be set (boundedwrite.go).
	dl          deadliner
	deadlineSet bool
	// finishing counts the goroutines writing the rest of a line whose
	// bound passed (WriteBounded); Close waits for them.
	finishing sync.WaitGroup
	// finisher says such a goroutine runs, and queued holds the lines it
	// writes after the rest (WriteAfterRest); both guarded by qmu.
	qmu      sync.Mutex
	finisher bool
	queued   [][]byte

	tail *stderrTail // the last lines of its stderr (stderrtail.go)

	exited  chan struct{} // closed when the process has been waited for
	exitErr error         // set before exited is closed

	closeOnce sync.Once
}

// rawPipe returns pipe (one end of a child's stdin or stdout) read and
// written through rawio, or nil when its descriptor does not allow it
// (not an *os.File, or a blocking one): then the pipe itself is used.
func rawPipe(pipe any) *rawio.File {
	if f, ok := pipe.(rawio.SyscallFile); ok {
		return rawio.WrapFile(f)
	}
	return nil
}

// startProcess starts the command of cfg. stderr receives the child's
// stderr; it must not block for long. grace is the TerminateGrace.
func startProcess(cfg ServerConfig, stderr io.Writer, grace time.Duration) (*process, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Dir
	// cfg.Env is the child's complete environment: nothing of the
	// gateway's own is inherited (a non-nil empty slice gives none).
	env := make([]string, 0, len(cfg.Env))
	for k, v := range cfg.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	cmd.Env = env
	tail := newStderrTail(cfg.Env)
	cmd.Stderr = io.MultiWriter(stderr, tail)
	// Wait would otherwise wait for a grandchild that keeps stderr open.
	cmd.WaitDelay = grace
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.Command, err)
	}
	p := &process{cmd: cmd, stdin: stdin, stdout: stdout, in: stdin, out: stdout, grace: grace, tail: tail, exited: make(chan struct{}), writeSem: make(chan struct{}, 1)}
	if rf := rawPipe(stdin); rf != nil {
		p.in, p.inNow = rf, rf
	}
	p.dl = writeDeadline(stdin)
	if rf := rawPipe(stdout); rf != nil {
		p.out = rf
	}
	go func() {
		// Wait closes stdout once the process has exited, which ends the
		// session's read loop and fails calls in flight at once (case C08).
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// writeDeadline is stdin's write deadline when it honours one: a pipe the
// runtime poller watches, whether rawio writes it (Linux) or stdin itself
// (elsewhere, where WrapFile declines every file). A blocking file, which
// would report a deadline and block anyway, answers SetWriteDeadline with
// os.ErrNoDeadline: nil.
func writeDeadline(stdin any) deadliner {
	if d, ok := stdin.(deadliner); ok && d.SetWriteDeadline(time.Time{}) == nil {
		return d
	}
	return nil
}

// Write writes b to the child's stdin in one piece: the SDK writes each
// message as one Write of its line, and so do raw calls (rawcall.go), so
// lines from both never interleave on the pipe.
func (p *process) Write(b []byte) (int, error) {
	p.lock(nil, nil)
	defer p.unlock()
	p.setDeadline(time.Time{})
	return p.in.Write(b)
}

// Close ends the process as the MCP stdio transport says: close its stdin,
// wait up to grace, send SIGTERM, wait up to grace again, then kill it.
// It returns once the process has been waited for.
func (p *process) Close() error {
	p.closeOnce.Do(func() {
		_ = p.stdin.Close() // also ends a rest of a line still being written (WriteBounded)
		defer p.finishing.Wait()
		if p.waitExit(p.grace) {
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if p.waitExit(p.grace) {
			return
		}
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return nil
}

func (p *process) waitExit(d time.Duration) bool {
	select {
	case <-p.exited:
		return true // also for d 0: the select below may pick the timer
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// startError returns why the process failed its start, once it has been
// closed: how it ended (exitError) and the last lines of its stderr, or nil
// if neither is known. Only a start's failure quotes stderr: the lines
// of a child that ran calls may hold their data, and were logged as they
// came.
func (p *process) startError() error {
	xe := p.exitError(0)
	tail := p.tail.text()
	switch {
	case tail == "":
		return xe
	case xe == nil:
		return fmt.Errorf("its stderr ended with: %s", tail)
	default:
		return fmt.Errorf("%w; its stderr ended with: %s", xe, tail)
	}
}

// exitError returns why the process ended, waiting up to d for it to be
// reaped. It returns nil if the process is still running after d.
func (p *process) exitError(d time.Duration) error {
	if !p.waitExit(d) {
		return nil
	}
	if p.exitErr == nil {
		return errors.New("process exited with status 0")
	}
	return fmt.Errorf("process exited: %w", p.exitErr)
}
