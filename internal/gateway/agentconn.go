package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// Values of ServerConfig.Sessions (config servers.<name>.sessions).
const (
	// SessionsShared: one upstream session for every agent (the default
	// for HTTP servers). Server→client requests and log messages are tied
	// to the agent request whose POST stream carries them; over stdio
	// nothing can be tied, so such requests are refused.
	SessionsShared = "shared"
	// SessionsPerAgent: one upstream session per agent session (the
	// default for stdio servers: one process each), opened on the agent's
	// first request and closed when the agent session ends. Everything the
	// upstream sends on it belongs to that agent.
	SessionsPerAgent = "per_agent"
)

// perAgent reports whether agents get their own upstream sessions.
func (c ServerConfig) perAgent() bool {
	switch c.Sessions {
	case SessionsPerAgent:
		return true
	case SessionsShared:
		return false
	}
	return c.Command != ""
}

// An agentConn is the upstream session of one agent session on a
// per-agent server. Its methods are safe for concurrent use.
type agentConn struct {
	u         *upstream
	ss        *mcp.ServerSession // the agent session it belongs to
	principal approval.Principal
	client    *mcp.Client // its own, so roots list_changed reaches only it

	mu       sync.Mutex
	conn     *upConn       // guarded by mu; nil until connected and after it ended
	dialing  chan struct{} // guarded by mu; closed when the connect attempt ends
	closed   bool          // guarded by mu
	inflight []*origin     // guarded by mu: the agent's requests on it now
	rootsOn  bool          // guarded by mu: the placeholder root is set

	// logs sends log messages of no request to the agent session.
	logs orderedSender
}

// agentConn returns the per-agent session holder of o's agent session on
// u, creating it; nil when u is shared or o has no agent session.
func (u *upstream) agentConnFor(o *origin) (*agentConn, error) {
	if !u.cfg.perAgent() || o == nil || o.modern {
		// A 2026-07-28 request's MCP session lasts one request: it uses the
		// upstream session for such agents (forward, modernconn.go; it
		// cannot be asked anything back).
		return nil, nil
	}
	if o.ss == nil {
		return nil, errors.New("no agent session to open a per-agent upstream session for")
	}
	u.agentsMu.Lock()
	defer u.agentsMu.Unlock()
	if u.agentsClosed {
		return nil, ErrShutdown
	}
	if ac := u.agents[o.ss]; ac != nil {
		return ac, nil
	}
	if !u.g.watchSession(o.ss) {
		if u.g.root.Err() == nil {
			return nil, errAgentSessionEnded
		}
		return nil, ErrShutdown
	}
	ac := &agentConn{u: u, ss: o.ss, principal: o.principal}
	ac.client = u.newClient(ac)
	u.agents[o.ss] = ac
	return ac, nil
}

// agentConnOf returns the agentConn whose session is cs, or nil.
func (u *upstream) agentConnOf(cs *mcp.ClientSession) *agentConn {
	if cs == nil {
		return nil
	}
	v, ok := u.byClient.Load(cs)
	if !ok {
		return nil
	}
	return v.(*agentConn)
}

// session returns ac's live upstream session, connecting it first (once,
// however many requests wait for it). A session that ended is replaced on
// the next request.
func (ac *agentConn) session(ctx context.Context) (*upConn, error) {
	for {
		ac.mu.Lock()
		switch {
		case ac.closed:
			ac.mu.Unlock()
			return nil, &jsonrpc.Error{Code: CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %q: the agent session ended", ac.u.name)}
		case ac.conn != nil:
			c := ac.conn
			ac.mu.Unlock()
			return c, nil
		case ac.dialing != nil:
			ch := ac.dialing
			ac.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		if ac.u.g.root.Err() != nil {
			// Close began: no new session.
			ac.mu.Unlock()
			return nil, ErrShutdown
		}
		ch := make(chan struct{})
		ac.dialing = ch
		ac.mu.Unlock()

		// Not the request's context: the session outlives it. Not cut at
		// once by Close either (dialContext): an initialize the upstream
		// served is answered, so the session is closed below.
		cctx, cancel := ac.u.g.dialContext(ctx, ac.u.connectTimeout())
		c, err := ac.u.connectWith(cctx, ac.client, ac)
		cancel()

		ac.mu.Lock()
		ac.dialing = nil
		if ac.closed {
			ac.mu.Unlock()
			// Ended (for stdio, its process stopped) before close, waiting
			// on ch, returns.
			if err == nil {
				c.close()
			}
			close(ch)
			continue
		}
		close(ch)
		if err != nil {
			ac.mu.Unlock()
			ac.u.log.WarnContext(ctx, "per-agent upstream session not connected", "principal", ac.principal.ID, "err", ac.u.errText(err))
			return nil, ac.u.unreachableError(err)
		}
		ac.conn = c
		ac.mu.Unlock()
		ac.u.byClient.Store(c.cs, ac)
		ac.u.log.InfoContext(ctx, "per-agent upstream session connected", "principal", ac.principal.ID)
		ac.u.g.wg.Go(func() { ac.watch(c) })
		ac.u.setLoggingLevel(ctx, c, func() mcp.LoggingLevel { return ac.u.g.levels.of(ac.ss) })
		ac.u.g.subs.resubscribe(ctx, ac.u, ac, c)
		return c, nil
	}
}

// call sends tools/call on ac's session (see upstream.call). A session
// that expired upstream (HTTP 404) is dropped and the call retried once
// on a new one.
func (ac *agentConn) call(ctx context.Context, tool string, args json.RawMessage, prog *callProgress) (*mcp.CallToolResult, error) {
	if o := originFrom(ctx); o != nil {
		defer ac.track(o)()
	}
	for attempt := 0; ; attempt++ {
		c, err := ac.session(ctx)
		if err != nil {
			// Nothing was sent: the agent gets an isError result naming
			// the upstream (callfail.go).
			return nil, ac.u.unopened(ctx, tool, "its session for this agent could not be opened; nothing was sent to it", err)
		}
		res, retry, err := ac.u.callOnce(ctx, c, tool, args, prog)
		if !retry {
			return res, err
		}
		if attempt > 0 {
			return nil, ac.u.unavailable(ctx, tool, "its new session ended too before the call was sent; nothing was run", approval.OutcomeTransportError, err)
		}
		ac.u.log.InfoContext(ctx, "per-agent upstream session expired (HTTP 404); reconnecting and retrying the call once", "tool", tool)
		ac.drop(c)
	}
}

// drop forgets c (it expired upstream) so the next request connects anew.
func (ac *agentConn) drop(c *upConn) {
	ac.mu.Lock()
	if ac.conn == c {
		ac.conn = nil
	}
	ac.mu.Unlock()
	go c.close()
}

// watch forgets c once its session ended (the process exited, the
// connection broke, or ac was closed).
func (ac *agentConn) watch(c *upConn) {
	_ = c.cs.Wait()
	ac.mu.Lock()
	if ac.conn == c {
		ac.conn = nil
	}
	ac.mu.Unlock()
	ac.u.byClient.Delete(c.cs)
	c.close()
}

// track records o as in flight on ac until the returned func is called.
func (ac *agentConn) track(o *origin) func() {
	ac.mu.Lock()
	ac.inflight = append(ac.inflight, o)
	ac.mu.Unlock()
	return func() {
		ac.mu.Lock()
		defer ac.mu.Unlock()
		if i := slices.Index(ac.inflight, o); i >= 0 {
			ac.inflight = slices.Delete(ac.inflight, i, i+1)
		}
	}
}

// route returns where a server→client request on ac's session goes when
// nothing ties it to one request: to the agent session, on the stream of
// the agent's latest request in flight when there is one. The request may
// not belong to that request (a server asks for roots on its own, for
// example right after it started), so it is not cancelled when that
// request ends: the origin is borrowed. When that request is answered
// before the question is written, the question goes on the session's
// standalone stream instead (origin.viaSDK).
func (ac *agentConn) route() *origin {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	ctx := ac.u.g.root
	var lean *leanLog // a lean call's stream, which the SDK does not know (leanask.go)
	if n := len(ac.inflight); n > 0 && ac.inflight[n-1].ctx.Err() == nil {
		ctx, lean = ac.inflight[n-1].ctx, ac.inflight[n-1].lean
	}
	return &origin{ss: ac.ss, principal: ac.principal, ctx: ctx, standalone: ac.u.g.root, borrowed: true, reg: ac.u.g.origins, log: ac.u.log, server: ac.u.name, lean: lean}
}

// sendLog forwards a log message of no request, of size bytes on the
// wire, to the agent session, without blocking; false once ac is closed.
func (ac *agentConn) sendLog(p *mcp.LoggingMessageParams, size int) bool {
	return ac.logs.push(func() {
		if err := ac.ss.Log(ac.u.g.root, p); err != nil {
			ac.u.log.Debug("upstream log message not delivered to the agent", "err", err)
		}
	}, size)
}

// rootsChanged tells ac's upstream session that the agent's roots changed
// (notifications/roots/list_changed). roots/list itself is always
// forwarded to the agent, so a placeholder root is toggled only to make
// the SDK send the notification on this session alone.
func (ac *agentConn) rootsChanged() {
	ac.mu.Lock()
	if ac.conn == nil || ac.closed {
		ac.mu.Unlock()
		return
	}
	on := !ac.rootsOn
	ac.rootsOn = on
	ac.mu.Unlock()
	const placeholder = "toolgate://roots-changed"
	if on {
		//lint:ignore SA1019 roots are deprecated only from 2026-07-28; upstream sessions speak 2025-11-25.
		ac.client.AddRoots(&mcp.Root{URI: placeholder})
	} else {
		//lint:ignore SA1019 see above.
		ac.client.RemoveRoots(placeholder)
	}
}

// close ends ac's upstream session (for stdio, its process) and refuses
// later requests.
//
// A session being opened is ended too before it returns: its connect runs
// to its end (at most Options.ShutdownGrace once Close began: dialContext)
// and closes what it opened.
func (ac *agentConn) close() {
	ac.mu.Lock()
	ac.closed = true
	c := ac.conn
	ac.conn = nil
	dialing := ac.dialing
	ac.mu.Unlock()
	if c != nil {
		c.close()
	}
	if dialing != nil {
		<-dialing
	}
	ac.logs.close()
}

// closeAgent ends the per-agent session of ss on u, if any.
func (u *upstream) closeAgent(ss *mcp.ServerSession) {
	u.agentsMu.Lock()
	ac := u.agents[ss]
	delete(u.agents, ss)
	u.agentsMu.Unlock()
	if ac != nil {
		ac.close()
		u.log.Info("per-agent upstream session closed: the agent session ended", "principal", ac.principal.ID)
	}
}

// closeAgents ends every per-agent session of u and refuses new ones.
func (u *upstream) closeAgents() {
	u.agentsMu.Lock()
	u.agentsClosed = true
	acs := make([]*agentConn, 0, len(u.agents))
	for _, ac := range u.agents {
		acs = append(acs, ac)
	}
	clear(u.agents)
	u.agentsMu.Unlock()
	for _, ac := range acs {
		ac.close()
	}
}

// agentConnsOf returns the per-agent sessions of ss on every upstream.
func (g *Gateway) agentConnsOf(ss *mcp.ServerSession) []*agentConn {
	var out []*agentConn
	for _, name := range g.serverNames() {
		u := g.ups[name]
		u.agentsMu.Lock()
		if ac := u.agents[ss]; ac != nil {
			out = append(out, ac)
		}
		u.agentsMu.Unlock()
	}
	return out
}

// errAgentSessionEnded is why no per-agent upstream session is opened for
// an agent session that ended.
var errAgentSessionEnded = errors.New("the agent session ended")

// watchSession arranges for the end of agent session ss to close what the
// gateway holds for it (per-agent upstream sessions, subscriptions, its
// logging level). It reports false once the gateway is closing, or while
// ss ended and is being released (watch says which).
func (g *Gateway) watchSession(ss *mcp.ServerSession) bool {
	return g.watch(ss) == nil
}

// watch is watchSession that says why it refused: ErrShutdown once the
// gateway is closing, errSessionReleasing while ss ended and what the
// gateway held for it is being released (sessionEnded).
func (g *Gateway) watch(ss *mcp.ServerSession) error {
	g.watchMu.Lock()
	defer g.watchMu.Unlock()
	if g.watchClosed {
		return ErrShutdown
	}
	if live, ok := g.watched[ss]; ok {
		if !live {
			return errSessionReleasing
		}
		return nil
	}
	g.watched[ss] = true
	g.wg.Go(func() {
		_ = ss.Wait()
		g.sessionEnded(ss)
	})
	return nil
}

// errSessionReleasing is why a request on an agent session that ended,
// and whose per-agent state is being released, is refused: the session
// is being closed; the agent starts a new one. The gateway itself goes on.
var errSessionReleasing = errors.New("this MCP session has ended and is being closed; start a new session (initialize without an Mcp-Session-Id)")

// sessionEnded releases what the gateway held for agent session ss.
func (g *Gateway) sessionEnded(ss *mcp.ServerSession) {
	// Ending: watchSession refuses it until it is released, so nothing
	// opens a per-agent upstream session for it meanwhile that nothing
	// would close.
	g.watchMu.Lock()
	if _, ok := g.watched[ss]; ok {
		g.watched[ss] = false
	}
	g.watchMu.Unlock()
	for _, name := range g.serverNames() {
		g.ups[name].closeAgent(ss)
	}
	g.subs.forget(ss)
	g.elicitations.forget(ss)
	g.levels.forget(ss)
	g.forgetLean(ss)
	g.watchMu.Lock()
	delete(g.watched, ss)
	g.watchMu.Unlock()
}

// closeWatched closes the agent sessions being watched (the gateway is
// closing), so their watchers end.
func (g *Gateway) closeWatched() {
	g.watchMu.Lock()
	g.watchClosed = true
	sessions := make([]*mcp.ServerSession, 0, len(g.watched))
	for ss := range g.watched {
		sessions = append(sessions, ss)
	}
	g.watchMu.Unlock()
	for _, ss := range sessions {
		_ = ss.Close()
	}
}
