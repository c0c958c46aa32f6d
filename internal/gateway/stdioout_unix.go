//go:build unix

package gateway

import (
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// StdioOutput returns the writer for ServeStdio's out when f is serve's
// stdout, and done, to call once ServeStdio returned (it does not close
// f). When f is a pipe or a socket, the writer is a duplicate of f that the
// runtime poller watches (O_NONBLOCK set), so that each write to the agent
// is bounded by a write deadline in the caller's goroutine (lockedWriter;
// branch shut39), and done closes the duplicate and clears O_NONBLOCK
// again if it set it. O_NONBLOCK is a flag of the open file description,
// which whoever else holds it shares; that is why a terminal or a regular
// file (a shell's, say) is never changed: for them, and wherever any step
// fails, the writer is f itself (never closed) and done does nothing; their
// writes run in a goroutine each, bounded the same way. So is a pipe that
// one of others (the process's stderr, the log's writer) is as well
// (`2>&1`): made non-blocking under the log, a line logged while the agent
// is slow to read would fail with EAGAIN and be lost. done runs once
// however often it is called, from any goroutine, also while a write is
// in flight (that write then fails), and does not block: a process must
// call it on every way out, the shutdown bound's os.Exit included (serve
// does, ends40), or the pipe stays non-blocking after it and the next
// program writing to it (the agent's, a shell's) sees EAGAIN.
func StdioOutput(f *os.File, others ...*os.File) (w io.WriteCloser, done func()) {
	plain := func() (io.WriteCloser, func()) { return keepOpen{f}, func() {} }
	rc, err := f.SyscallConn()
	if err != nil {
		return plain()
	}
	var (
		dup    = -1
		setNB  bool
		origFD int
	)
	ctlErr := rc.Control(func(fd uintptr) {
		origFD = int(fd)
		var st unix.Stat_t
		if unix.Fstat(origFD, &st) != nil {
			return
		}
		if m := st.Mode & unix.S_IFMT; m != unix.S_IFIFO && m != unix.S_IFSOCK {
			return
		}
		if sameFileAsAny(&st, others) {
			return
		}
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			return
		}
		nb := fl&unix.O_NONBLOCK != 0
		d, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return
		}
		if !nb {
			if unix.SetNonblock(d, true) != nil {
				_ = unix.Close(d)
				return
			}
			setNB = true
		}
		dup = d
	})
	if ctlErr != nil || dup < 0 {
		return plain()
	}
	restore := func() {
		if setNB {
			_ = unix.SetNonblock(origFD, false)
		}
	}
	// os.NewFile finds the descriptor non-blocking and hands it to the
	// poller: its SetWriteDeadline then bounds a write.
	nf := os.NewFile(uintptr(dup), f.Name())
	if nf == nil || nf.SetWriteDeadline(time.Time{}) != nil {
		if nf != nil {
			_ = nf.Close()
		} else {
			_ = unix.Close(dup)
		}
		restore()
		return plain()
	}
	var once sync.Once
	return keepOpen{nf}, func() {
		once.Do(func() {
			_ = nf.Close()
			restore()
		})
	}
}

// sameFileAsAny reports whether one of others is the file st describes
// (the same device and inode), or whether that cannot be told.
func sameFileAsAny(st *unix.Stat_t, others []*os.File) bool {
	for _, o := range others {
		if o == nil {
			continue
		}
		var ost unix.Stat_t
		if fstat(o, &ost) != nil || (ost.Dev == st.Dev && ost.Ino == st.Ino) {
			return true
		}
	}
	return false
}

// fstat is unix.Fstat on f's descriptor.
func fstat(f *os.File, st *unix.Stat_t) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), st) }); err != nil {
		return err
	}
	return serr
}
