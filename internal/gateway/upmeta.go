package gateway

import (
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
// protocolMetaKeys, nil when nothing is left; m is not changed. A 2025
// upstream (a stateful go-sdk handler) answers a request that names
// protocol version 2026-07-28 with -32022, so the agent's keys must not
// reach it; a 2026-07-28 upstream gets those of toolgate's session from
// the SDK (and the agent's client capabilities on a relayed round,
// relayRound.meta), as tools/call sends them. Everything else (the
// progress token, vendor keys) is kept.
func upstreamMeta(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if slices.Contains(protocolMetaKeys, k) {
			continue
		}
		if out == nil {
			out = make(mcp.Meta, len(m))
		}
		out[k] = v
	}
	return out
}
