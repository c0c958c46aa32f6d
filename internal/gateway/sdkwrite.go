package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The go-sdk's stdio transport (mcp.IOTransport) writes each message to
// the child's stdin with one Write and no bound, under its own lock. A
// child that stops reading its stdin so held every message the SDK sends
// it (calls of 2026-07-28 sessions, resources, prompts, completion and
// other pass-through requests, notifications, answers to the child's own
// requests) past its caller's bound, and every later one behind it
// (fixes29; the raw path's writes were bounded by wbound28). An sdkWriter
// is that transport's writer instead of the process: captureConn.Write
// hands it the message's bound, and it writes the line with
// process.WriteBounded, which never cuts a line (boundedwrite.go).

// An sdkWriter writes the lines of one SDK session to a stdio child, each
// by the bound captureConn.Write gave it (sdkWriter.write).
type sdkWriter struct {
	p *process
	// sem is held from captureConn.Write until its message's line is
	// written: it passes the message's bound on to Write, and queues the
	// session's writers (the SDK's own lock, under it, is then never
	// waited for), each only as long as its bound.
	sem chan struct{}
	// The bound of the line being written; guarded by sem.
	deadline time.Time
	stop     <-chan struct{}
	timeout  <-chan time.Time
}

func newSDKWriter(p *process) *sdkWriter {
	return &sdkWriter{p: p, sem: make(chan struct{}, 1)}
}

// Write writes b, one line, by the bound of the write in progress.
func (w *sdkWriter) Write(b []byte) (int, error) {
	if err := w.p.WriteBounded(b, w.deadline, w.stop, w.timeout); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Close ends the process (process.Close).
func (w *sdkWriter) Close() error { return w.p.Close() }

// A boundedWriteError is an SDK message whose line the child did not
// take by the message's bound: its cause is errLineNotSent or
// errLinePartlySent. It also wraps the go-sdk's "rejected by transport"
// (its code, -32005, is what that error matches on), which tells the
// SDK's connection that this one message failed: any other error of a
// write whose context has not ended makes it take the writer for broken
// and close the session, and the child with it.
type boundedWriteError struct{ err error }

func (e *boundedWriteError) Error() string   { return e.err.Error() }
func (e *boundedWriteError) Unwrap() []error { return []error{e.err, errSDKRejected} }

// errSDKRejected matches the go-sdk's jsonrpc2.ErrRejected (errors.Is
// compares the code).
var errSDKRejected = &jsonrpc.Error{Code: codeRejected, Message: rejectedMessage}

// write runs send, the SDK connection's Write of one message (which
// writes at most one line, through w.Write), within the message's bound:
// ctx's deadline, or bound (the server's call_timeout; 0: none) from now
// when ctx has none or a later one. It waits for the session's earlier
// writes at most until then or until ctx is done. When the bound passes
// it returns a *boundedWriteError; when that bound was ctx's, only once
// ctx is done, so that the SDK reports the call's own deadline.
func (w *sdkWriter) write(ctx context.Context, bound time.Duration, send func() error) error {
	var deadline time.Time
	if bound > 0 {
		deadline = time.Now().Add(bound)
	}
	d, fromCtx := ctx.Deadline()
	if fromCtx && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	} else {
		fromCtx = false
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case w.sem <- struct{}{}:
	default:
		select {
		case w.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return w.failed(ctx, fromCtx, fmt.Errorf("%w (%w)", errLineNotSent, os.ErrDeadlineExceeded))
		}
	}
	w.deadline, w.stop, w.timeout = deadline, ctx.Done(), timeout
	err := send()
	w.deadline, w.stop, w.timeout = time.Time{}, nil, nil
	<-w.sem
	if err != nil && (errors.Is(err, errLineNotSent) || errors.Is(err, errLinePartlySent)) {
		return w.failed(ctx, fromCtx, err)
	}
	return err
}

// failed is write's error for a message whose bound passed (err says
// how); when the bound was ctx's deadline it waits for ctx to be done,
// which happens at that deadline (a context whose Done is nil, as the
// SDK's for its answers, is not waited for).
func (w *sdkWriter) failed(ctx context.Context, fromCtx bool, err error) error {
	if done := ctx.Done(); fromCtx && done != nil {
		<-done
	}
	return &boundedWriteError{err: err}
}
