//go:build unix

package gateway

import (
	"fmt"
	"os"
	"syscall"
)

// childStdio makes the child's stdin and stdout: for each, an AF_UNIX
// stream socket pair. It returns toolgate's ends (non-blocking, so that
// they are read and written through the runtime poller and rawio) and the
// child's (blocking, as a pipe's end would be), which the caller passes as
// the child's fds 0 and 1 and closes once it started.
func childStdio() (stdin, stdout, childIn, childOut *os.File, err error) {
	stdin, childIn, err = socketPair("stdin", "|1")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	stdout, childOut, err = socketPair("stdout", "|0")
	if err != nil {
		_ = stdin.Close()
		_ = childIn.Close()
		return nil, nil, nil, nil, err
	}
	return stdin, stdout, childIn, childOut, nil
}

// socketPair returns a connected AF_UNIX stream pair: ours non-blocking
// and named file (as os.Pipe names its ends: errors carry it), the
// child's blocking; both close-on-exec (exec.Cmd dups the child's onto its
// fd).
func socketPair(name, file string) (ours, child *os.File, err error) {
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("%s socket pair: %w", name, os.NewSyscallError("socketpair", err))
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		_ = syscall.Close(fds[0])
		_ = syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("%s socket pair: %w", name, os.NewSyscallError("setnonblock", err))
	}
	return os.NewFile(uintptr(fds[0]), file), os.NewFile(uintptr(fds[1]), name), nil
}
