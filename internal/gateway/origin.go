package gateway

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// An origin is the agent request an upstream request is made for: a
// tools/call, prompts/get, resources/read, completion/complete or
// resources/subscribe of one agent session. Whatever the upstream sends
// while serving that request (log messages, sampling, elicitation and
// roots requests) belongs to it and goes back to that agent session only.
//
// The origin rides in the context of the upstream request (withOrigin);
// the wire taps read it there: the stdio Connection wrapper records it per
// JSON-RPC id, the HTTP RoundTripper sees it on the POST whose event stream
// carries the upstream's messages. This routing is kept apart from
// tools/call so that the 2026 era's multi round-trip relay can reuse it.
type origin struct {
	ss        *mcp.ServerSession // the agent session
	principal approval.Principal
	server    string // the upstream the request goes to
	// ctx is the downstream handler's context. It is kept (a documented
	// exception to "no contexts in structs") because messages to the agent
	// must be sent with it: it routes them to the request's own stream
	// (notes §4).
	ctx context.Context
	// borrowed marks an origin that stands for the agent session rather
	// than for one of its requests (agentConn.route): ctx only picks the
	// stream, and its end does not withdraw a question put through it.
	borrowed bool
	// standalone, for a borrowed origin, is a context of no request: a
	// question sent with it goes on the agent session's standalone stream.
	standalone context.Context
	// modern marks a 2026-07-28 request's origin: its agent session lasts
	// the request, so it is served by the upstream session for such
	// agents (forward, modernconn.go), never a per-agent one.
	modern bool
	reg    *origins
	log    *slog.Logger

	tokenOnce sync.Once
	token     string // set by tokenOnce

	// logs forwards the upstream's log messages in wire order; finish
	// drains it before the request's result goes back.
	logs orderedSender
	// lean, for a call the lean front serves (leanfront.go), writes log
	// messages on the call's own event stream, which the SDK does not know.
	lean *leanLog
	// watch, for a lean call (leansent.go), arms the call's watches once
	// its line is sent; nil otherwise.
	watch *leanWatch
}

type originKey struct{}

func withOrigin(ctx context.Context, o *origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

func originFrom(ctx context.Context) *origin {
	o, _ := ctx.Value(originKey{}).(*origin)
	return o
}

// newOrigin returns the origin of a request of principal p on agent
// session ss to upstream server, handled with ctx. Call finish when the
// upstream answered.
func (g *Gateway) newOrigin(ctx context.Context, ss *mcp.ServerSession, p approval.Principal, server string) *origin {
	o := new(origin)
	g.initOrigin(o, ctx, ss, p, server)
	return o
}

// initOrigin sets the zero origin o as newOrigin makes one (the lean
// front keeps it with the call's other parts: leanCallParts).
func (g *Gateway) initOrigin(o *origin, ctx context.Context, ss *mcp.ServerSession, p approval.Principal, server string) {
	*o = origin{ss: ss, principal: p, server: server, ctx: ctx, reg: g.origins, log: g.log, modern: isModernRequest(ctx)}
}

// routeToken returns the token under which o can be found again from a
// message an upstream stamped with it (see stampRoute); it is registered
// on first use and forgotten by finish. The token is random and never sent
// to an upstream, so an upstream cannot name another agent's request.
func (o *origin) routeToken() string {
	o.tokenOnce.Do(func() {
		o.token = "o-" + rand.Text()
		o.reg.put(o.token, o)
	})
	return o.token
}

// sendLog forwards an upstream log message, of size bytes on the wire, to
// the agent, in order, before the request's result. It reports false when
// the request already finished (the message belongs to no request any
// more).
func (o *origin) sendLog(p *mcp.LoggingMessageParams, size int) bool {
	if o.ss == nil {
		return false
	}
	if o.lean != nil {
		return o.logs.push(func() { o.lean.send(p) }, size)
	}
	return o.logs.push(func() {
		// Log applies the agent session's own logging/setLevel.
		if err := o.ss.Log(o.ctx, p); err != nil && o.ctx.Err() == nil {
			o.log.DebugContext(o.ctx, "upstream log message not delivered to the agent", "err", err)
		}
	}, size)
}

// finish ends o: queued log messages are sent first, later ones are
// refused, and its route token is forgotten.
func (o *origin) finish() {
	if dropped := o.logs.close(); dropped > 0 {
		o.log.WarnContext(o.ctx, "upstream log messages dropped: relay queue full", "dropped", dropped, "queue", relayQueue, "queue_bytes", relayQueueBytes)
	}
	o.tokenOnce.Do(func() {}) // no token can be made after this
	if o.token != "" {
		o.reg.delete(o.token)
	}
}

// origins maps route tokens to the origins in flight. Its methods are
// safe for concurrent use.
type origins = registry[origin]

// An orderedSender runs pushed functions one at a time, in push order, on
// a goroutine it starts only when there is work, so pushing never blocks
// the upstream's reader. close waits for what was pushed and refuses the
// rest. At most relayQueue functions, of at most relayQueueBytes (the
// sizes their pushers give), wait; more are dropped and counted. One alone
// is always queued.
type orderedSender struct {
	mu      sync.Mutex
	q       []sized // guarded by mu
	bytes   int     // guarded by mu: the sizes of q and of the one running
	running bool    // guarded by mu: the goroutine runs
	closed  bool    // guarded by mu
	dropped int     // guarded by mu
	wg      sync.WaitGroup
}

// A sized is a function waiting in an orderedSender, with the size of
// what it sends.
type sized struct {
	f    func()
	size int
}

// push queues f, which sends size bytes, and reports whether it was
// accepted (false after close; a full queue drops it, and that counts as
// accepted).
func (s *orderedSender) push(f func(), size int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if len(s.q) >= relayQueue || (s.bytes > 0 && s.bytes+size > relayQueueBytes) {
		s.dropped++
		return true // dropped, but it was this request's: not for anyone else
	}
	s.q = append(s.q, sized{f, size})
	s.bytes += size
	if !s.running {
		s.running = true
		s.wg.Add(1)
		go s.run()
	}
	return true
}

func (s *orderedSender) run() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(s.q) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		next := s.q[0]
		s.q = s.q[1:]
		s.mu.Unlock()
		next.f()
		s.mu.Lock()
		s.bytes -= next.size
		s.mu.Unlock()
	}
}

// close refuses later pushes, waits until everything pushed ran, and
// returns how many were dropped because the queue was full.
func (s *orderedSender) close() int {
	s.mu.Lock()
	s.closed = true
	dropped := s.dropped
	s.mu.Unlock()
	s.wg.Wait()
	return dropped
}
