package gateway

import (
	"context"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolMetaKeys are the _meta keys of a 2026-07-28 request that describe
// the sender's own connection (SEP-2575: protocol version, client info and
// capabilities, log level; a subscription id; the server info of an
// answer). On a relayed request they are the agent's connection to
// toolgate, not toolgate's to the upstream.
var protocolMetaKeys = []string{
	mcp.MetaKeyProtocolVersion,
	mcp.MetaKeyClientInfo,
	mcp.MetaKeyClientCapabilities,
	mcp.MetaKeyLogLevel,
	mcp.MetaKeySubscriptionID,
	mcp.MetaKeyServerInfo,
}

// upstreamMeta is the _meta an agent's request m carries on to an upstream
// (prompts/get, resources/read, completion/complete): a copy of m without
// protocolMetaKeys, the agent's progress token and toolgate's own
// "toolgate/approval" key, nil when nothing is left; m is not changed.
//
// A 2025 upstream (a stateful go-sdk handler) answers a request that names
// protocol version 2026-07-28 with -32022, so the agent's protocol keys
// must not reach it; a 2026-07-28 upstream gets those of toolgate's session
// from the SDK (and the agent's client capabilities on a relayed round,
// relayRound.meta), as tools/call sends them. The agent's progress token
// is the agent's, not toolgate's: the upstream's progress under it
// matched no route and never reached the agent, so the relay sends a
// token of toolgate's instead (relayProgress). "toolgate/approval" names
// an approval of toolgate's (a re-send's resume): it means nothing to an
// upstream, and tools/call never sent it either. Everything else (vendor
// keys) is kept.
func upstreamMeta(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if slices.Contains(protocolMetaKeys, k) || k == progressTokenKey || k == approvalMetaKey {
			continue
		}
		if out == nil {
			out = make(mcp.Meta, len(m))
		}
		out[k] = v
	}
	return out
}

// relayProgress starts relaying the upstream's progress of a relayed
// request (prompts/get, resources/read; the SDK gives completion/complete
// no progress token) to prog's caller under its own token, as a tool
// call's is relayed (progress.go):
// the request goes upstream with prog's gateway token (sendRelayProgress),
// and the upstream's notifications under it reach the caller before the
// answer. done ends it; with prog nil (the caller sent no token) nothing
// is relayed.
func (g *Gateway) relayProgress(prog *callProgress) (done func()) {
	if prog == nil {
		return func() {}
	}
	g.routes.start(prog)
	return func() { g.routes.finish(prog) }
}

// sendRelayProgress binds prog (nil: none) to the upstream session c the
// request is about to go on and returns ctx for it and the _meta to send,
// m with prog's gateway token (m is not changed).
func (u *upstream) sendRelayProgress(ctx context.Context, c *upConn, prog *callProgress, m mcp.Meta) (context.Context, mcp.Meta) {
	if prog == nil {
		return ctx, m
	}
	out := make(mcp.Meta, len(m)+1)
	maps.Copy(out, m)
	out[progressTokenKey] = prog.upstreamToken
	return u.sendingProgress(ctx, c, prog), out
}
