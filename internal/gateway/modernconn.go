package gateway

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// The upstream session of 2026-07-28 agents' requests: tool calls, and
// since branch stdio43 prompts/get, resources/read and completion/complete
// too (forward), so one such agent's requests meet one upstream state.
//
// A 2026-07-28 request declares its client capabilities itself
// (_meta["io.modelcontextprotocol/clientCapabilities"]). The shared session
// declares sampling, elicitation and roots for the 2025-era agents it serves
// (and so that the catalog lists every tool a capable client would see), so
// an upstream that checks its client's capabilities would take a 2026 agent
// to have them. Tool calls of 2026-07-28 agents therefore go through a
// second session per upstream, opened on first use, that declares no client
// capabilities of its own, at the newest revision the upstream speaks:
//
//   - 2026-07-28 (the upstream answers server/discover): each call carries
//     the agent's own client capabilities, inputResponses and (unwrapped)
//     requestState, and the upstream's input_required answers are relayed
//     to the agent (relay2026.go). An upstream that needs a capability the
//     agent lacks answers MissingRequiredClientCapability (-32021, SEP-2575).
//   - 2025-11-25 (no server/discover): the session declares no capabilities,
//     so an upstream that needs one answers -32021, which reaches the agent
//     as it is (with HTTP 400 from the stateless handler); its server→client
//     requests cannot reach a 2026 agent (not relayed as input_required).
//
// It costs nothing until a 2026 agent sends the upstream a request; for a
// stdio server it is one more process, whose in-memory state is its own (as
// a per-agent session's is), and whose list changes the catalog, listed from
// the shared session, does not follow.
type modernConn struct {
	mu      sync.Mutex
	client  *mcp.Client   // guarded by mu; made on first use
	conn    *upConn       // guarded by mu; nil until connected and after it ended
	dialing chan struct{} // guarded by mu; closed when the connect attempt ends
	closed  bool          // guarded by mu: the upstream stopped
}

// modernSession returns u's live 2026 session, connecting it first (once,
// however many calls wait for it). A session that ended is replaced on the
// next call.
func (u *upstream) modernSession(ctx context.Context) (*upConn, error) {
	m := &u.modern
	for {
		m.mu.Lock()
		switch {
		case m.closed || u.g.root.Err() != nil:
			// Close began: no new session (closeModern ends the one
			// being opened).
			m.mu.Unlock()
			return nil, ErrShutdown
		case m.conn != nil:
			c := m.conn
			m.mu.Unlock()
			return c, nil
		case m.dialing != nil:
			ch := m.dialing
			m.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		if m.client == nil {
			// No capabilities: see modernConn.
			m.client = u.newClientWith(&mcp.ClientCapabilities{}, nil)
		}
		client := m.client
		ch := make(chan struct{})
		m.dialing = ch
		m.mu.Unlock()

		// Not ctx: its values belong to the agent's 2026-07-28 request (the
		// SDK would take its protocol version for this session's). Not cut
		// at once by Close either (dialContext): an initialize the upstream
		// served must be answered for its session to be closed below.
		cctx, cancel := u.g.dialContext(u.g.root, u.connectTimeout())
		c, err := u.connectAt(cctx, client, nil, false, modernVersion) //nolint:contextcheck // the session outlives the call that opened it: the gateway's root, not the request's values
		cancel()

		m.mu.Lock()
		m.dialing = nil
		if m.closed {
			m.mu.Unlock()
			// Ended (DELETE sent) before closeModern, waiting on ch,
			// returns.
			if err == nil {
				c.close()
			}
			close(ch)
			return nil, ErrShutdown
		}
		close(ch)
		if err != nil {
			m.mu.Unlock()
			u.log.WarnContext(ctx, "upstream session for 2026-07-28 agents not connected", "err", err)
			return nil, err
		}
		m.conn = c
		m.mu.Unlock()
		u.log.InfoContext(ctx, "upstream session for 2026-07-28 agents connected (no client capabilities of its own)", "speaks_2026_07_28", c.modernEra())
		u.g.wg.Go(func() { u.watchModern(c) })
		return c, nil
	}
}

// modernCall sends tools/call on u's 2026 session (see upstream.call). A
// session that expired upstream (HTTP 404) is dropped and the call retried
// once on a new one: the 404 means the upstream never processed it.
func (u *upstream) modernCall(ctx context.Context, tool string, args json.RawMessage, prog *callProgress) (*mcp.CallToolResult, error) {
	for attempt := 0; ; attempt++ {
		c, err := u.modernSession(ctx)
		if err != nil {
			return nil, u.unopened(ctx, tool, "its session for 2026-07-28 agents could not be opened; nothing was sent to it", err)
		}
		res, retry, err := u.callOnce(ctx, c, tool, args, prog)
		if !retry {
			return res, err
		}
		if attempt > 0 {
			return nil, u.unavailable(ctx, tool, "its new session ended too before the call was sent; nothing was run", approval.OutcomeTransportError, err)
		}
		u.log.InfoContext(ctx, "upstream session for 2026-07-28 agents expired (HTTP 404); reconnecting and retrying the call once", "tool", tool)
		u.dropModern(c)
	}
}

// dropModern forgets c (it expired upstream) so the next call connects anew.
func (u *upstream) dropModern(c *upConn) {
	u.modern.mu.Lock()
	if u.modern.conn == c {
		u.modern.conn = nil
	}
	u.modern.mu.Unlock()
	c.close()
}

// watchModern forgets c once its session ended (the process exited, the
// connection broke, or the upstream stopped).
func (u *upstream) watchModern(c *upConn) {
	_ = c.cs.Wait()
	u.dropModern(c)
}

// closeModern ends u's 2026 session, for good. A session being opened is
// ended too before it returns: its connect runs to its end (at most
// Options.ShutdownGrace once Close began: dialContext) and closes what it
// opened.
func (u *upstream) closeModern() {
	u.modern.mu.Lock()
	u.modern.closed = true
	c := u.modern.conn
	u.modern.conn = nil
	dialing := u.modern.dialing
	u.modern.mu.Unlock()
	if c != nil {
		c.close()
	}
	if dialing != nil {
		<-dialing
	}
}
