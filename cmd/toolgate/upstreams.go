package main

import (
	"toolgate/internal/api"
	"toolgate/internal/config"
	"toolgate/internal/gateway"
)

// agentHTTPOptions are the options of the agent listener's MCP handler:
// the request and session limits of config's limits section.
func agentHTTPOptions(l config.Limits, insecureNoAuth bool, addr string) *gateway.HTTPOptions {
	return &gateway.HTTPOptions{
		InsecureNoAuth:          insecureNoAuth,
		ListenAddr:              addr,
		MaxBody:                 int64(l.MaxRequestBytes),
		SessionTimeout:          l.MCPSessionIdleTimeout,
		MaxSessions:             l.MaxMCPSessions,
		MaxSessionsPerPrincipal: l.MaxMCPSessionsPerPrincipal,
	}
}

// upstreamStates reports the gateway's upstreams to /readyz (api and
// gateway never import each other).
func upstreamStates(gw *gateway.Gateway) func() map[string]api.UpstreamState {
	return func() map[string]api.UpstreamState {
		out := map[string]api.UpstreamState{}
		for _, h := range gw.Health() {
			out[h.Name] = api.UpstreamState{State: h.State, Required: h.Required, Since: h.Since.UTC(), LastError: h.LastError}
		}
		return out
	}
}
