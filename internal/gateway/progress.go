package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keepAliveMessage is the message of the progress keep-alives sent while a
// call is held when the gate gives none.
const keepAliveMessage = "waiting for approval"

// relayQueue bounds the upstream progress notifications waiting to be
// forwarded for one call. Past it they are dropped (progress is advisory),
// counted, and the count is logged when the call ends.
const relayQueue = 256

// relayQueueBytes bounds the bytes (as read off the wire) of the upstream
// progress notifications waiting to be forwarded for one call: each may be
// up to limits.max_result_bytes, and relayQueue of those would be held for
// a caller that reads slowly (attack19). Past it they are dropped and
// counted as past relayQueue; one alone is always queued.
const relayQueueBytes = 1 << 20

// A queuedProgress is one notification waiting to be forwarded, with its
// size on the wire.
type queuedProgress struct {
	n    *mcp.ProgressNotificationParams
	size int
}

// A callProgress is the progress channel back to one caller that sent a
// progress token: keep-alives while the call is held, then the upstream's
// progress, all under the caller's own token with strictly increasing
// values (DESIGN, the path of one tools/call, steps 6 and 8).
type callProgress struct {
	ss    *mcp.ServerSession
	token any // the caller's progress token
	// ctx is the downstream handler's context. It is kept (a documented
	// exception to "no contexts in structs") because NotifyProgress must use
	// it: it routes the notification to the call's own stream; a detached
	// context sends it elsewhere or loses it (notes §4).
	ctx context.Context
	log *slog.Logger
	// write, when set (a lean call: leanprog.go), sends a notification in
	// place of ss.NotifyProgress: the SDK does not know the call.
	write func(value, total float64, msg string) error

	// upstreamToken is the gateway-unique token set on the upstream call;
	// empty until relay starts.
	upstreamToken string
	// scope is the upstream session the call was last sent on
	// (upstream.progressScope; bindTo); nil before. Progress read off
	// another session is not the call's (relayWire).
	scope atomic.Pointer[progressScope]
	// Made with the first notification queued (startForwarding), under
	// qmu; read by the forwarding goroutine and, after closed is set, by
	// finish.
	queue   chan queuedProgress
	drain   chan struct{} // closed by finish: forward what is queued, then stop
	stopped chan struct{} // closed when the forwarding goroutine has stopped

	// qmu guards the queueing side. It is never held while sending, so the
	// upstream's read loop, which queues, never waits for the caller.
	qmu        sync.Mutex
	queued     bool    // guarded by qmu: a notification was queued
	lastQueued float64 // guarded by qmu: the upstream value last queued
	dropped    int     // guarded by qmu: notifications dropped, the queue full
	bytes      int     // guarded by qmu: the wire size of those queued, not yet forwarded
	closed     bool    // guarded by qmu: finish ran; later ones are late
	forwarding bool    // guarded by qmu: the forwarding goroutine was started

	mu         sync.Mutex // held while sending, so values go out in order
	keepAlives int        // guarded by mu
	last       float64    // guarded by mu: the last value sent
	sent       bool       // guarded by mu: a value was sent
	base       float64    // guarded by mu: added to upstream values
	relaying   bool       // guarded by mu: the call was dispatched
	finished   bool       // guarded by mu: the call returned
}

// newRequestProgress returns the progress channel of req (a tools/call, or
// a prompts/get or resources/read that may be held), or nil when the
// caller sent no progress token (then nothing is ever sent).
func newRequestProgress(ctx context.Context, req mcp.Request, log *slog.Logger) *callProgress {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return nil
	}
	rp, ok := req.GetParams().(mcp.RequestParams)
	if !ok || rp == nil {
		return nil
	}
	tok := rp.GetProgressToken()
	if tok == nil {
		return nil
	}
	return &callProgress{ss: ss, token: tok, ctx: ctx, log: log}
}

// keepAlive sends one keep-alive: progress 1, 2, 3… with the gate's
// message (which names the approval), or keepAliveMessage. It is
// gate.Call.KeepAlive; its ctx argument is not used, the handler's is (see
// callProgress.ctx). Once the call is dispatched it does nothing.
func (p *callProgress) keepAlive(_ context.Context, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.relaying || p.finished {
		return
	}
	if msg == "" {
		msg = keepAliveMessage
	}
	p.keepAlives++
	p.send(float64(p.keepAlives), 0, msg)
}

// send notifies the caller. p.mu must be held.
func (p *callProgress) send(value, total float64, msg string) {
	p.last, p.sent = value, true
	var err error
	if p.write != nil {
		err = p.write(value, total, msg)
	} else {
		err = p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: value, Total: total, Message: msg})
	}
	if err != nil && p.ctx.Err() == nil {
		p.log.DebugContext(p.ctx, "progress not delivered", "err", err)
	}
}

// enqueue queues an upstream progress notification, of size bytes on the
// wire, for forwarding without blocking. A value that does not increase is
// not queued. A full queue (relayQueue, relayQueueBytes) drops it
// (counted); after finish it is late and dropped quietly.
func (p *callProgress) enqueue(n *mcp.ProgressNotificationParams, size int) {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if p.closed || (p.queued && n.Progress <= p.lastQueued) {
		return
	}
	p.queued, p.lastQueued = true, n.Progress
	if !p.forwarding {
		p.startForwarding()
	}
	if p.bytes > 0 && p.bytes+size > relayQueueBytes {
		p.dropped++
		return
	}
	// Its _meta is never forwarded (forward): decoded into Go values it
	// would hold many times the bytes counted here while it waits.
	n.Meta = nil
	select {
	case p.queue <- queuedProgress{n, size}:
		p.bytes += size
	default:
		p.dropped++
	}
}

// forwardQueued forwards q and frees its bytes of the queue's bound.
func (p *callProgress) forwardQueued(q queuedProgress) {
	p.forward(q.n)
	p.qmu.Lock()
	p.bytes -= q.size
	p.qmu.Unlock()
}

// forward sends one upstream progress notification to the caller, its value
// offset past the keep-alives. A value that would not increase is dropped.
func (p *callProgress) forward(n *mcp.ProgressNotificationParams) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	v := p.base + n.Progress
	if p.sent && v <= p.last {
		return
	}
	var total float64
	if n.Total > 0 {
		total = p.base + n.Total
	}
	p.send(v, total, n.Message)
}

// progressRoutes maps the gateway's upstream progress tokens to callers. Its
// methods are safe for concurrent use.
type progressRoutes struct {
	linger time.Duration
	log    *slog.Logger

	// foreign counts the notifications dropped because they named a
	// call's token from another upstream session or another call's POST
	// stream than the call's own (relayWire, relayPost).
	foreign atomic.Uint64

	mu     sync.Mutex
	next   uint64                   // guarded by mu
	routes map[string]*callProgress // guarded by mu
	timers map[string]*time.Timer   // guarded by mu: pending removals
	closed bool                     // guarded by mu
}

func newProgressRoutes(linger time.Duration, log *slog.Logger) *progressRoutes {
	return &progressRoutes{linger: linger, log: log, routes: map[string]*callProgress{}, timers: map[string]*time.Timer{}}
}

// start begins relaying upstream progress for p: it assigns p a fresh
// upstream token. The goroutine that forwards, in queue order, starts with
// the first notification queued (enqueue): a call whose upstream sends no
// progress costs none. finish ends it.
func (r *progressRoutes) start(p *callProgress) {
	p.mu.Lock()
	p.relaying = true
	if p.keepAlives > 0 {
		p.base = float64(p.keepAlives) + 1
	}
	p.mu.Unlock()

	r.mu.Lock()
	r.next++
	// The counter keeps tokens unique; the random part keeps an upstream
	// from naming another call's from its own (the routes are every
	// upstream's, and relayWire routes by the token alone: review18).
	p.upstreamToken = "toolgate-" + strconv.FormatUint(r.next, 10) + "-" + rand.Text()
	if !r.closed {
		r.routes[p.upstreamToken] = p
	}
	r.mu.Unlock()
}

// startForwarding starts the goroutine that forwards p's queue. p.qmu
// must be held.
func (p *callProgress) startForwarding() {
	p.queue = make(chan queuedProgress, relayQueue)
	p.drain = make(chan struct{})
	p.stopped = make(chan struct{})
	p.forwarding = true
	go func() {
		defer close(p.stopped)
		for {
			select {
			case q := <-p.queue:
				p.forwardQueued(q)
			case <-p.drain:
				for {
					select {
					case q := <-p.queue:
						p.forwardQueued(q)
					default:
						return
					}
				}
			}
		}
	}()
}

// finish stops relaying for p once the upstream call returned. Everything
// queued by then is forwarded first, in order: it is all the upstream sent
// before its result, since relayWire queues each notification before the
// SDK can see the response behind it. finish therefore returns only after
// those sends, before the handler returns the result. The route stays known
// for the linger time, so progress that arrives after the result is dropped
// quietly.
func (r *progressRoutes) finish(p *callProgress) {
	p.qmu.Lock()
	p.closed = true
	dropped, forwarding := p.dropped, p.forwarding
	p.qmu.Unlock()
	if forwarding {
		close(p.drain)
		<-p.stopped
	}
	p.mu.Lock()
	p.finished = true
	p.mu.Unlock()
	if dropped > 0 {
		p.log.WarnContext(p.ctx, "upstream progress dropped: relay queue full", "dropped", dropped, "queue", relayQueue, "queue_bytes", relayQueueBytes)
	}

	tok := p.upstreamToken
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		delete(r.routes, tok)
		return
	}
	r.timers[tok] = time.AfterFunc(r.linger, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.routes, tok)
		delete(r.timers, tok)
	})
}

// finishOnce is r.finish(p) the first time it is called for p (a lean
// call finishes before its answer and, should the dispatch panic, in a
// deferred call); later calls do nothing.
func (p *callProgress) finishOnce(r *progressRoutes) {
	p.mu.Lock()
	done := p.finished
	p.mu.Unlock()
	if !done {
		r.finish(p)
	}
}

// route returns the caller of upstream progress token tok, or nil.
func (r *progressRoutes) route(tok any) *callProgress {
	s, ok := tok.(string)
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.routes[s]
}

// A progressScope names one upstream session, the one a call was sent on
// (upstream.progressScope): its stdio connection, or its HTTP session id.
// The upstream's progress for the call is taken only from that session
// (attack19): the routes are every upstream's and every agent's, and an
// upstream that saw a call's token (a server behind per-agent sessions
// sees every agent's) must not reach another session's caller with it.
type progressScope struct {
	raw *rawCalls // a stdio session's
	up  *upstream // with sid: an HTTP session
	sid string
}

// bindTo records that p's upstream token goes out on the session of scope
// (nil: one toolgate cannot name, whose progress is then dropped), before
// it is sent; a retry on a new session binds again.
func (p *callProgress) bindTo(scope *progressScope) {
	p.scope.Store(scope)
}

// progressScope is the session c of u, as its calls' progress is bound
// to it: a stdio session's connection, an HTTP session's id; nil for an
// HTTP session without an id (then only the POST streams carry progress,
// relayPost).
func (u *upstream) progressScope(c *upConn) *progressScope {
	switch {
	case c.raw != nil:
		return &progressScope{raw: c.raw}
	case c.hc != nil:
		if sid := c.cs.ID(); sid != "" {
			return &progressScope{up: u, sid: sid}
		}
	}
	return nil
}

// sendingProgress binds p, when not nil, to the session c it is about to
// be sent on and returns ctx carrying it for the HTTP POST that sends it
// (captureRoundTripper: progress on that POST's stream is p's alone).
func (u *upstream) sendingProgress(ctx context.Context, c *upConn, p *callProgress) context.Context {
	if p == nil {
		return ctx
	}
	p.bindTo(u.progressScope(c))
	return context.WithValue(ctx, progressCallKey{}, p)
}

type progressCallKey struct{}

// progressCallFrom returns the call whose progress ctx's request carries
// (sendingProgress), or nil.
func progressCallFrom(ctx context.Context) *callProgress {
	p, _ := ctx.Value(progressCallKey{}).(*callProgress)
	return p
}

// sameScope reports whether a and b name the same upstream session;
// nil names none.
func sameScope(a, b *progressScope) bool {
	return a != nil && b != nil && *a == *b
}

// relayWire queues the params of a notifications/progress message as read
// off the upstream session scope (a stdio connection, or an HTTP session's
// standalone stream), in wire order, before the SDK sees it or any message
// after it. It never blocks. Progress whose token names a call sent on
// another session is dropped and counted (another agent's, or another
// tenant's, call); params it cannot decode and unknown tokens are dropped.
// The SDK's client handler does not route progress: it cannot tell where
// a notification arrived, and everything it sees passed here first.
func (r *progressRoutes) relayWire(scope *progressScope, params json.RawMessage) {
	var n mcp.ProgressNotificationParams
	if json.Unmarshal(params, &n) != nil {
		return
	}
	p := r.route(n.ProgressToken)
	if p == nil {
		return
	}
	if !sameScope(p.scope.Load(), scope) {
		r.dropForeign("upstream progress for a call sent on another upstream session dropped")
		return
	}
	p.enqueue(&n, len(params))
}

// relayPost queues the params of a notifications/progress message read off
// the event stream of an HTTP POST that carried the call of p (nil: a POST
// of anything else). Such a stream belongs to its request: progress on it
// under any other token than p's is dropped and counted, however the
// token routes.
func (r *progressRoutes) relayPost(p *callProgress, params json.RawMessage) {
	var n mcp.ProgressNotificationParams
	if json.Unmarshal(params, &n) != nil {
		return
	}
	if tok, ok := n.ProgressToken.(string); !ok || p == nil || tok != p.upstreamToken {
		if r.route(n.ProgressToken) != nil {
			r.dropForeign("upstream progress for a call on another request's event stream dropped")
		}
		return
	}
	p.enqueue(&n, len(params))
}

// dropForeign counts and logs (debug) one notification dropped as another
// call's.
func (r *progressRoutes) dropForeign(msg string) {
	r.foreign.Add(1)
	r.log.Debug(msg)
}

// close forgets every route and stops the pending removals.
func (r *progressRoutes) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for tok, t := range r.timers {
		t.Stop()
		delete(r.timers, tok)
	}
	clear(r.routes)
}
