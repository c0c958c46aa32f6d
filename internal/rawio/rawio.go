// Package rawio reads and writes non-blocking descriptors (the agents'
// TCP connections, the pipes to a stdio upstream) through their
// syscall.RawConn, with system calls the Go scheduler is not told about
// (syscall.RawSyscall): a read or write of a non-blocking descriptor never
// blocks, so the scheduler's system-call bookkeeping buys nothing for it.
//
// What it saves (docs/performance.md, "cpu25"): the first system call a
// Go process makes after all its Ps were idle wakes the runtime's sysmon
// thread from its deep sleep (entersyscall: a futex wake on the caller's
// path), which then polls every 20 µs until the process is idle again. At
// one call in flight toolgate goes idle twice per call (waiting for the
// agent, waiting for the child), so sysmon was woken twice per call and
// cost ≈ 15 % of toolgate's CPU. Reads and writes made here do not wake
// it; every other system call still does.
//
// Waiting is the runtime poller's, as for net.Conn and os.File: a read or
// write that would block waits for readiness, deadlines and Close end the
// wait, with the errors net.Conn and os.File give.
package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// A Conn is a net.Conn whose Read and Write go through its descriptor
// (see the package doc); everything else is the wrapped connection's.
type Conn struct {
	net.Conn
	rc syscall.RawConn
	r  op // guarded by r.mu
	w  op // guarded by w.mu
}

// WrapConn returns c with Read and Write made here when c is a connection
// with a non-blocking descriptor (a *net.TCPConn or *net.UnixConn), else c
// itself.
func WrapConn(c net.Conn) net.Conn {
	rc, ok := rawConnOf(c)
	if !ok {
		return c
	}
	rw := &Conn{Conn: c, rc: rc}
	rw.r.init()
	rw.w.init()
	return rw
}

// SyscallConn is the wrapped connection's.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

// Read reads into p as net.Conn's Read does: at most len(p) bytes, io.EOF
// at the end of the stream, a *net.OpError (Op "read") otherwise.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.r.read(c.rc, p)
	if err != nil && err != io.EOF { //nolint:errorlint // io.EOF is returned as itself, as net.Conn's Read does
		err = &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: connCause("read", err)}
	}
	return n, err
}

// Write writes all of p, as net.Conn's Write does, or returns a
// *net.OpError (Op "write") with the bytes written before it.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.w.write(c.rc, p)
	if err != nil {
		err = &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: connCause("write", err)}
	}
	return n, err
}

// connCause is what net.Conn's Read or Write (syscall) puts in its
// OpError for err: the cause inside a RawConn's OpError ("raw-read",
// "raw-write": a deadline, a closed connection), a system call's error as
// an *os.SyscallError.
func connCause(name string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return os.NewSyscallError(name, err)
	}
	return err
}

// A File reads or writes a file (a pipe's end) as Conn does a connection.
// Closing stays the file's own.
type File struct {
	f  SyscallFile
	rc syscall.RawConn
	r  op
	w  op
}

// A SyscallFile is an *os.File, or what wraps one and passes its methods
// on (os/exec's StdinPipe).
type SyscallFile interface {
	SyscallConn() (syscall.RawConn, error)
	Name() string
}

// WrapFile returns f wrapped when its descriptor is non-blocking and
// pollable (os.Pipe's ends in this process), else nil: a blocking
// descriptor must be read and written the scheduler's way.
func WrapFile(f SyscallFile) *File {
	rc, err := f.SyscallConn()
	if err != nil || !nonblocking(rc) {
		return nil
	}
	rf := &File{f: f, rc: rc}
	rf.r.init()
	rf.w.init()
	return rf
}

// Read reads into p as (*os.File).Read does: io.EOF at the end, else an
// *os.PathError (Op "read").
func (f *File) Read(p []byte) (int, error) {
	n, err := f.r.read(f.rc, p)
	if err != nil && err != io.EOF { //nolint:errorlint // io.EOF is returned as itself, as os.File's Read does
		err = &os.PathError{Op: "read", Path: f.f.Name(), Err: unwrapFile(err)}
	}
	return n, err
}

// Write writes all of p as (*os.File).Write does, or returns an
// *os.PathError (Op "write") with the bytes written before it.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.w.write(f.rc, p)
	if err != nil {
		err = &os.PathError{Op: "write", Path: f.f.Name(), Err: unwrapFile(err)}
	}
	return n, err
}

// WriteNow writes what of p the descriptor takes now, without waiting
// for it to take more: the bytes written (fewer than len(p), or none,
// when the pipe is full), or an *os.PathError (Op "write") as Write's.
// A deadline that has passed fails it before any byte is written.
func (f *File) WriteNow(p []byte) (int, error) {
	n, err := f.w.writeNow(f.rc, p)
	if err != nil {
		err = &os.PathError{Op: "write", Path: f.f.Name(), Err: unwrapFile(err)}
	}
	return n, err
}

// unwrapFile is what (*os.File).Read or Write puts in its PathError for
// err: a system call's error or a deadline as it is, os.ErrClosed for the
// poller's "use of closed file" (the only other error of a RawConn's Read
// and Write on a file).
func unwrapFile(err error) error {
	var en syscall.Errno
	if errors.As(err, &en) || errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	return os.ErrClosed
}

// rawConnOf is c's RawConn when c is a TCP or Unix connection (whose
// descriptors the net package keeps non-blocking).
func rawConnOf(c net.Conn) (syscall.RawConn, bool) {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil, false
	}
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil || !nonblocking(rc) {
		return nil, false
	}
	return rc, true
}

// nonblocking reports whether rc's descriptor is in non-blocking mode
// (and the system calls here are this system's: Linux).
func nonblocking(rc syscall.RawConn) bool {
	if !enabled {
		return false
	}
	nb := false
	err := rc.Control(func(fd uintptr) { nb = isNonblock(fd) })
	return err == nil && nb
}

// Write is one write(2) of p on fd, a non-blocking descriptor, the
// scheduler not told (see the package doc): for a syscall.RawConn's Read
// or Write function. It returns the bytes written, or 0 and the error
// (EAGAIN: the descriptor takes no more now). ENOSYS elsewhere than Linux.
func Write(fd uintptr, p []byte) (int, syscall.Errno) { return sysWrite(fd, p) }

// Peek is one recv(2) of fd, a non-blocking socket, into p with
// MSG_PEEK|MSG_DONTWAIT, as Write: the bytes waiting (0 at the stream's
// end), nothing consumed; EAGAIN when none are waiting.
func Peek(fd uintptr, p []byte) (int, syscall.Errno) { return sysPeek(fd, p) }

// An op is one direction's state: the buffer and outcome of the Read or
// Write in progress, with the function the RawConn calls bound once (no
// closure per call).
type op struct {
	mu  sync.Mutex
	p   []byte
	n   int
	err error
	rfn func(fd uintptr) bool
	wfn func(fd uintptr) bool
	nfn func(fd uintptr) bool // writeNowFD
}

func (o *op) init() {
	o.rfn = o.readFD
	o.wfn = o.writeFD
	o.nfn = o.writeNowFD
}

func (o *op) read(rc syscall.RawConn, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.p, o.n, o.err = p, 0, nil
	err := rc.Read(o.rfn)
	n, rerr := o.n, o.err
	o.p, o.err = nil, nil
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readFD is one read of fd into o.p: done (true) unless it would block.
func (o *op) readFD(fd uintptr) bool {
	for {
		r, e := sysRead(fd, o.p)
		switch e {
		case 0:
			o.n = r
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			o.err = e
			return true
		}
	}
}

func (o *op) write(rc syscall.RawConn, p []byte) (int, error) {
	return o.writeWith(rc, o.wfn, p)
}

// writeNow is write that gives up, with the bytes written, as soon as
// the descriptor takes no more (writeNowFD).
func (o *op) writeNow(rc syscall.RawConn, p []byte) (int, error) {
	return o.writeWith(rc, o.nfn, p)
}

// writeWith writes p with rc.Write(fn), fn one of o's bound write
// functions (wfn, nfn), and returns the bytes written and the first error.
func (o *op) writeWith(rc syscall.RawConn, fn func(uintptr) bool, p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.p, o.n, o.err = p, 0, nil
	err := rc.Write(fn)
	n, werr := o.n, o.err
	o.p, o.err = nil, nil
	if err == nil {
		err = werr
	}
	return n, err
}

// writeNowFD is writeFD, done (true) also when the descriptor takes no
// more: the RawConn never waits for it.
func (o *op) writeNowFD(fd uintptr) bool {
	o.writeFD(fd)
	return true
}

// writeFD writes the rest of o.p on fd: done (true) once all of it went or
// on an error, not done while the descriptor takes no more.
func (o *op) writeFD(fd uintptr) bool {
	for o.n < len(o.p) {
		r, e := sysWrite(fd, o.p[o.n:])
		switch e {
		case 0:
			o.n += r
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			o.err = e
			return true
		}
	}
	return true
}
