package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
)

// Multi round-trip requests (SEP-2322) relayed from an upstream to a
// 2026-07-28 agent.
//
// A 2026-07-28 agent's tool call goes to the upstream's session for such
// agents (modernconn.go). When that session speaks 2026-07-28 too, toolgate
// forwards what a round carries besides the name and arguments: the
// agent's declared client capabilities (so the upstream asks only for what
// the agent can answer), its inputResponses, and the upstream's
// requestState of the previous round. An upstream that needs input answers
// input_required: its inputRequests reach the agent unchanged (keys and
// all), its requestState never does as it is: toolgate wraps it in a state
// it signs, bound to the caller and the call, single-use and valid for
// gate.RelayStateTTL (gate.Gate.RelayState). Each round is a new call that
// the gate admits like any other: the state says which round it continues,
// never that it may run. Nothing about the round is kept on the instance,
// so the next round may reach any instance.
//
// To a 2025-era agent, an input_required answer of a 2026-07-28 upstream
// (one that speaks only 2026-07-28, so its shared session does too) is put
// as classic server→client requests (elicitation/create,
// sampling/createMessage, roots/list) by the SDK's own server middleware,
// which then calls the tool handler again with the agent's answers and the
// upstream's requestState; the handler sends them upstream. The state never
// leaves toolgate. The SDK does this once per call: an upstream that asks
// again in a second round gets its input_required to the 2025 agent as it
// is. A 2025 upstream needs none of this: its SDK sends the classic
// requests itself, and toolgate relays them (relay.go).

// relayRound is what a 2026-07-28 round sends upstream besides the tool's
// name and arguments.
type relayRound struct {
	caps      any                  // _meta["io.modelcontextprotocol/clientCapabilities"] as the agent sent it: its bytes (json.RawMessage) or decoded
	responses mcp.InputResponseMap // the agent's inputResponses (nil on a first round without any)
	state     string               // the upstream's requestState the agent's state wrapped ("" none)
}

type relayKey struct{}

func withRelayRound(ctx context.Context, r *relayRound) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, relayKey{}, r)
}

func relayRoundFrom(ctx context.Context) *relayRound {
	r, _ := ctx.Value(relayKey{}).(*relayRound)
	return r
}

// errRequestState is the JSON-RPC error of a round whose requestState is
// refused: invalid params (SEP-2322: a state that fails verification is
// rejected); nothing runs.
func errRequestState(err error) error {
	return errInvalidParams("requestState refused: " + err.Error() + "; nothing was run. Send the call again without it to start over")
}

// roundParams are the fields of a request's params a round reads.
type roundParams struct {
	meta      mcp.Meta
	responses mcp.InputResponseMap
	state     string
}

// relayRoundFor is the relayed round of a 2026-07-28 request c (tools/call,
// prompts/get) whose params are p. When p carries a requestState toolgate issued for a
// relayed round, it is verified and used up (opened reports true); a state
// of another kind is left for the approval rounds (opened false), and a
// state that is a relayed round's but does not verify is an error.
func (g *Gateway) relayRoundFor(ctx context.Context, p roundParams, c gate.Call) (r *relayRound, opened bool, err error) {
	r = &relayRound{caps: p.meta[mcp.MetaKeyClientCapabilities], responses: p.responses}
	if p.state == "" {
		return r, false, nil
	}
	if g.opts.MRTR == nil {
		return nil, false, errRequestState(errors.New("this gateway issues no requestState"))
	}
	up, err := g.opts.MRTR.OpenRelayState(ctx, p.state, c)
	switch {
	case err == nil:
		r.state = up
		return r, true, nil
	case errors.Is(err, gate.ErrNotRelayState):
		return r, false, nil
	case errors.Is(err, gate.ErrBadRequestState):
		return nil, false, errRequestState(err)
	}
	return nil, false, fmt.Errorf("requestState not checked: %w; nothing was run", err)
}

// relayResult is res, an upstream's answer to a 2026-07-28 round of c,
// ready for the agent: an answer carrying a requestState (an
// input_required round, or an upstream that sends one without
// inputRequests) gets toolgate's wrapped requestState in place of the
// upstream's. Without a key to sign it the round fails (the upstream's
// state is never handed out as it is).
func (g *Gateway) relayResult(c gate.Call, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	if res == nil || (res.InputRequests == nil && res.RequestState == "") {
		return res, nil
	}
	st, err := g.wrapState(c, res.RequestState)
	if err != nil {
		return nil, err
	}
	out := *res
	out.RequestState = st
	return &out, nil
}

// relayPrompt is relayResult for a prompts/get round.
func (g *Gateway) relayPrompt(c gate.Call, res *mcp.GetPromptResult) (*mcp.GetPromptResult, error) {
	if res == nil || (res.InputRequests == nil && res.RequestState == "") {
		return res, nil
	}
	st, err := g.wrapState(c, res.RequestState)
	if err != nil {
		return nil, err
	}
	out := *res
	out.RequestState = st
	return &out, nil
}

func (g *Gateway) wrapState(c gate.Call, upstream string) (string, error) {
	if g.opts.MRTR == nil {
		return "", errors.New("the upstream asked for input (input_required), and this gateway cannot sign a requestState to relay it")
	}
	st, err := g.opts.MRTR.RelayState(c, upstream)
	if err != nil {
		return "", fmt.Errorf("the upstream asked for input (input_required), and its requestState could not be wrapped: %w", err)
	}
	return st, nil
}

// modernEra reports whether c speaks 2026-07-28 (it was connected through
// server/discover), so that a round's inputResponses, requestState and
// client capabilities mean to it what they mean to the agent.
func (c *upConn) modernEra() bool {
	ir := c.cs.InitializeResult()
	return ir != nil && ir.ProtocolVersion >= modernVersion
}

// apply puts the round into params, a tools/call to a 2026-07-28 upstream.
// The agent's client capabilities replace those of toolgate's session
// (which declares none): an upstream asks only for input the agent can
// give, and answers -32021 for a capability the agent lacks.
func (r *relayRound) apply(params *mcp.CallToolParams) {
	params.InputResponses = r.responses
	params.RequestState = r.state
	params.Meta = r.meta(params.Meta)
}

// applyPrompt is apply for prompts/get.
func (r *relayRound) applyPrompt(params *mcp.GetPromptParams) {
	params.InputResponses = r.responses
	params.RequestState = r.state
	params.Meta = r.meta(params.Meta)
}

// meta is m with the agent's client capabilities.
func (r *relayRound) meta(m mcp.Meta) mcp.Meta {
	if r.caps == nil {
		return m
	}
	if m == nil {
		m = mcp.Meta{}
	}
	m[mcp.MetaKeyClientCapabilities] = r.caps
	return m
}
