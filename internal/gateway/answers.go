package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Answers owed at shutdown (branch shutdown37). Close cancels the calls in
// flight (ErrShutdown): the gate answers a held one "the gateway is
// shutting down", an upstream call "… shutting down; the call was
// cancelled". On the SDK path the SDK writes that answer after the
// handler returns, and a session closed before it does drops it (the
// jsonrpc2 connection refuses every write once its Close began): the agent
// saw "request terminated without response", or nothing on stdio. So Close
// waits, up to Options.ShutdownGrace, until the answers owed are written,
// then closes the sessions:
//   - an SDK-path POST that carries a call owes one until its handler
//     returns (the SDK's streamable handler returns once every answer of
//     the POST is delivered, the client is gone, or its session closed):
//     carrier.owe, carrier.end;
//   - a stdio session owes one for each request it read until the SDK
//     wrote that request's response (owingConn), and ServeStdio's own end
//     waits for them the same way.
//
// The lean front's calls are not counted: it writes their answers itself,
// not through the session's connection (parked ones are in the gateway's
// WaitGroup). A client that does not read cannot keep Close past the grace.

// answers counts answers owed; the zero value is ready. An answers with a
// parent counts each of its own in the parent too.
type answers struct {
	parent *answers
	mu     sync.Mutex
	n      int           // guarded by mu
	zero   chan struct{} // guarded by mu; closed when n drops to 0
}

// add counts one more answer owed.
func (a *answers) add() {
	a.mu.Lock()
	if a.n == 0 {
		a.zero = make(chan struct{})
	}
	a.n++
	a.mu.Unlock()
	if a.parent != nil {
		a.parent.add()
	}
}

// done counts one answer owed as written (or as never to be written).
func (a *answers) done() {
	a.mu.Lock()
	a.n--
	if a.n == 0 {
		close(a.zero)
	}
	a.mu.Unlock()
	if a.parent != nil {
		a.parent.done()
	}
}

// settled returns a channel closed once no answer is owed (already closed
// when none is). Answers owed after the call are not waited for.
func (a *answers) settled() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return a.zero
}

// wait waits until no answer is owed or grace passes, and reports
// whether no answer was owed any more.
func (a *answers) wait(grace time.Duration) bool {
	settled := a.settled()
	select {
	case <-settled:
		return true
	default:
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-settled:
		return true
	case <-t.C:
		return false
	}
}

// waitAnswers waits up to Options.ShutdownGrace for the answers a owes
// before what (the sessions about to close) closes, logged when the grace
// ran out first.
func (g *Gateway) waitAnswers(a *answers, what string) {
	if !a.wait(g.opts.ShutdownGrace) {
		g.log.Warn("closing "+what+" with answers of cancelled calls not yet written", "grace", g.opts.ShutdownGrace)
	}
}

// owe counts the answer of the POST's call as owed until end; once end
// ran (the POST's handler returned before the call was bound), nothing.
func (c *carrier) owe(a *answers) {
	c.owedMu.Lock()
	defer c.owedMu.Unlock()
	if c.ended || c.owed != nil {
		return
	}
	c.owed = a
	a.add()
}

// end marks the POST's handler as returned: its answers are written or
// will not be.
func (c *carrier) end() {
	c.owedMu.Lock()
	defer c.owedMu.Unlock()
	c.ended = true
	if c.owed != nil {
		c.owed.done()
	}
}

// owingTransport is a stdio agent's transport with owingConn around its
// connection.
type owingTransport struct {
	mcp.Transport
	owed *answers
}

func (t owingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &owingConn{Connection: c, owed: t.owed, ids: map[jsonrpc.ID]int{}}, nil
}

// owingConn counts the requests read from an agent as answers owed until
// a response with the request's id is written (whether or not the write
// succeeds) or the connection is closed.
type owingConn struct {
	mcp.Connection
	owed   *answers
	mu     sync.Mutex
	ids    map[jsonrpc.ID]int // guarded by mu: requests read, not yet answered
	closed bool               // guarded by mu
}

func (c *owingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && err == nil && r.IsCall() {
		c.mu.Lock()
		if !c.closed {
			c.ids[r.ID]++
			c.owed.add()
		}
		c.mu.Unlock()
	}
	return m, err
}

func (c *owingConn) Write(ctx context.Context, m jsonrpc.Message) error {
	err := c.Connection.Write(ctx, m)
	if r, ok := m.(*jsonrpc.Response); ok {
		c.mu.Lock()
		if n := c.ids[r.ID]; n > 0 {
			if n == 1 {
				delete(c.ids, r.ID)
			} else {
				c.ids[r.ID] = n - 1
			}
			c.owed.done()
		}
		c.mu.Unlock()
	}
	return err
}

func (c *owingConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		for _, n := range c.ids {
			for range n {
				c.owed.done()
			}
		}
		clear(c.ids)
	}
	c.mu.Unlock()
	return c.Connection.Close()
}
