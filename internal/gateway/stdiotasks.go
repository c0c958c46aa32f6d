package gateway

import (
	"bytes"
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"toolgate/internal/mcpwire"
)

// The Tasks front over stdio (branch tasks42): the SDK has no Tasks and
// refuses tasks/get, tasks/cancel and tasks/update before any middleware
// (go-sdk, checkRequest), so a 2026-07-28 stdio agent's Tasks lines are
// taken in the stdin guard, as the stdio lean front takes plain calls
// (stdiolean.go), and answered by the Tasks front the HTTP front uses
// (taskTaken, taskRPC in tasks.go): a tools/call of an agent declaring
// io.modelcontextprotocol/tasks is answered with a task once it is held
// for approval, tasks/* from the store, for the session's principal only;
// a tool that runs only as a task is refused (-32021) to an agent that does
// not declare it. A taken line is answered on a goroutine of its own
// (its store lookups and the call's admission do not stall the reader)
// with one Write of the session's lockedWriter. Lines are picked by their
// method as the SDK reads it (checkMethod: "tasks\/get" is tasks/get), and
// a session's revision is the one the SDK takes from its lines
// (revisionModern), so a request of a 2026-07-28 session without _meta is
// the front's as one with it is (branch stdio43).

// task takes line, a message with method (checkMethod), when the Tasks
// front answers it (taskTaken): the answer is written later, by a
// goroutine of its own. modern is the session's revision
// (revisionModern). It reports false, having done nothing, for any other
// line. line is valid only during the call.
func (l *stdioLean) task(line, method []byte, modern bool) bool {
	g := l.g
	if g.opts.Tasks == nil || g.root.Err() != nil {
		return false
	}
	switch string(method) {
	case "tasks/get", "tasks/cancel", "tasks/update":
	case "tools/call":
		// Only a 2026-07-28 request is the front's: a cheap look before
		// the decode keeps it off a 2025 session's calls.
		if !modern && !bytes.Contains(line, []byte(modernVersion)) {
			return false
		}
	default:
		return false
	}
	req, meta, refused, ok := g.taskTaken(bytes.Clone(line), nil, modern)
	if !ok {
		return false
	}
	if refused != nil {
		b, _ := encodeRPC(req.ID, nil, refused)
		_, _ = l.out.Write(appendLine(b))
		return true
	}
	ctx, done, ok := l.track(req.ID)
	if !ok {
		return true
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer l.owed.done() // after the write below
		res, e := l.taskAnswer(ctx, req, meta)
		b, _ := encodeRPC(req.ID, res, e)
		done()
		_, _ = l.out.Write(appendLine(b)) // a failure is the session's (lockedWriter)
	}()
	return true
}

// taskAnswer is taskRPC's answer to req for the session's principal; a
// panic of it is answered as an internal error (the runner goroutines it
// starts recover their own).
func (l *stdioLean) taskAnswer(ctx context.Context, req mcpwire.Request, meta mcpwire.Meta) (res any, e *mcpwire.Error) {
	defer func() {
		if v := recover(); v != nil {
			l.g.log.Error("the stdio Tasks front panicked", "method", req.Method, "panic", v)
			res, e = nil, mcpwire.Errorf(mcpwire.CodeInternalError, "toolgate failed to answer the request")
		}
	}()
	return l.g.taskRPC(ctx, req, meta, l.p, nil)
}

// track registers the request with id as one of the front's in flight,
// as bindRequest tracks the SDK path's: Close, shutdown, the end of the
// agent's input and a notifications/cancelled naming it cancel ctx. done
// frees the id (before the answer is written: an agent may send it again
// as soon as it has the answer). ok is false when the id is in flight
// already: that is answered with an error here, as the SDK answers it.
// The caller owes the answer (owed.add) once ok.
func (l *stdioLean) track(id []byte) (ctx context.Context, done func(), ok bool) {
	key := canonicalID(id)
	ctx, cancel := context.WithCancelCause(l.ctx)
	l.mu.Lock()
	if _, dup := l.calls[key]; dup {
		l.mu.Unlock()
		cancel(nil)
		_, _ = l.out.Write(appendLine(leanResponse(id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "duplicate in-flight request ID " + string(bytes.TrimSpace(id))})))
		return nil, nil, false
	}
	l.calls[key] = cancel
	ended := l.ended
	l.mu.Unlock()
	if ended != nil {
		cancel(ended)
	}
	untrack := l.g.calls.add(l.sid, l.p.ID, cancel)
	if l.g.root.Err() != nil {
		cancel(ErrShutdown)
	}
	l.owed.add()
	return ctx, func() {
		untrack()
		l.mu.Lock()
		delete(l.calls, key)
		l.mu.Unlock()
		cancel(nil)
	}, true
}
