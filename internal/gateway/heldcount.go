package gateway

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/procs"
)

// postCount is the part Options.Load has of one POST on the SDK path
// (its carrier's): the HTTP front counts the POST in flight while it is
// served (serveCounted), and a call it carries that the gate holds for a
// human leaves the count while it waits and comes back when the wait is
// over (admitCounted). A held call is not work in flight: counted for
// its whole hold, one held SDK-path call (a progress token, a relayed
// round, a 2026-07-28 session) kept procs.Follow from ever going to one
// P, and two kept the default for good, while the lean front's held
// calls leave the count once held (docs/performance.md, "tidy15").
// Its methods are safe for concurrent use; with no load (nil) they do
// nothing.
type postCount struct {
	load *procs.Load
	mu   sync.Mutex
	held int  // calls of the POST held now (a batch may carry several)
	over bool // the POST was served: the count is serveCounted's again
}

// leave takes the POST out of the count while a call it carries is held:
// the first held call of the POST ends its count.
func (n *postCount) leave() { n.shift(1) }

// enter puts the POST back in the count when a held call's wait is over
// (it is about to be consumed and dispatched, or answered): the last
// held call of the POST begins its count again. After close, nothing.
func (n *postCount) enter() { n.shift(-1) }

// shift changes the calls of the POST held now by d (1: one more held,
// -1: one less), ending the POST's count when the first is held and
// beginning it again when the last is not. After close, nothing.
func (n *postCount) shift(d int) {
	if n.load == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.over {
		return
	}
	was := n.held
	n.held += d
	switch {
	case was == 0 && n.held == 1:
		n.load.End()
	case was == 1 && n.held == 0:
		n.load.Begin()
	}
}

// close ends the POST's part, before serveCounted counts it out: a POST
// that ends while a call it carries is still held (the client went away;
// the call waits out the drop grace) is counted back in first, so that
// serveCounted's End leaves the count as it was before the POST, and the
// held call's enter then changes nothing.
func (n *postCount) close() {
	if n.load == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.held > 0 && !n.over {
		n.load.Begin()
	}
	n.over = true
}

// countOf is the count of the POST carrying req (nil for stdio, or a
// request that came with no POST). It comes from the gateway's own
// carrier registry, never from the client.
func (g *Gateway) countOf(req mcp.Request) *postCount {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		if post := g.carriers.get(ex.Header.Get(carrierHeader)); post != nil && post.count.load != nil {
			return &post.count
		}
	}
	return nil
}

// admitCounted is admitCall for a request of the SDK path (req: the
// tools/call, prompts/get or resources/read): when the gate holds the
// call, the POST carrying it leaves Options.Load for the wait
// (postCount). Without a count (stdio, no Options.Load) or a Gatekeeper
// that admits in two steps, it is admitCall.
//
//go:noinline // its frame is small: a held call waits below it
func (g *Gateway) admitCounted(ctx context.Context, req mcp.Request, call *gate.Call) *gate.Admission {
	n := g.countOf(req)
	sp, ok := g.gk.(admitterSplit)
	if n == nil || !ok {
		return g.admitCall(ctx, call)
	}
	adm := new(gate.Admission)
	hctx, held := g.admitOrHold(ctx, sp, call, adm)
	if !held {
		return adm
	}
	return waitUncounted(hctx, sp, adm.TakeHold(), n)
}

// waitUncounted waits for the decision on hold (sp.WaitHold) with its
// POST out of the count (n), and puts it back whatever ends the wait (a
// decision, the request's expiry, the caller's cancellation, a panic).
//
//go:noinline // a held call is parked below this small frame
func waitUncounted(hctx context.Context, sp admitterSplit, hold gate.HeldCall, n *postCount) *gate.Admission {
	n.leave()
	defer n.enter()
	return sp.WaitHold(hctx, hold)
}
