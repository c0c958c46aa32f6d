// Package gateway is the MCP side of toolgate: it is an MCP client of every
// configured upstream server and an MCP server to agents.
//
// The pieces, one file each:
//
//   - upstream.go: one shared [mcp.ClientSession] per upstream (stdio child
//     or Streamable HTTP), reconnected with backoff; per-call timeout; the
//     one retry after an HTTP 404 for a stale upstream session (case C03).
//   - process.go, stderr.go: the stdio child process and the draining of its
//     stderr into the log (case C08); stderrtail.go: its last stderr lines,
//     redacted, quoted by the error of a start that failed.
//   - rawcap.go: capture of the raw result bytes, so structuredContent and
//     _meta keep their exact number literals (notes §6).
//   - catalog.go: the tool catalog, exposed as "<server>__<tool>", with a
//     digest of each tool definition.
//   - middleware.go: the one receiving middleware that resolves a tools/call,
//     asks the [Gatekeeper], and dispatches admitted calls upstream.
//   - progress.go: keep-alive progress while a call is held and relay of
//     upstream progress to the caller's own token; leanprog.go: the same
//     for the lean front's calls with a progress token, written on the
//     call's own stream under the agent's token bytes.
//   - http.go, heartbeat.go: the agent-facing Streamable HTTP handler with
//     bearer authentication, the carrier watch that cancels a call whose
//     POST went away (notes §3), and SSE comment heartbeats (notes §4).
//   - health.go: the upstreams' states, a ping every health interval, and
//     Ready/Health for /readyz; callfail.go: what an agent gets when a call
//     cannot reach its upstream, and the dispatch outcome it records.
//   - jsonline.go, stdioguard.go, upstreamguard.go: newline-delimited
//     JSON-RPC read defensively, so one bad or oversized line fails at most
//     its own message: the agent side of --stdio and the stdout of stdio
//     upstreams. httplimit.go: the same limit on an HTTP upstream's
//     tools/call responses.
//   - mcpsessions.go: the bounds on agents' MCP sessions.
//   - items.go, exposure.go: the prompts, resources and resource templates
//     of every upstream, and their names for agents (prompts like tools;
//     clashing URIs in the namespaced form toolgate://<server>/<uri>).
//   - prompts.go, resources.go, lists.go: prompts/list and get,
//     resources/list, templates/list, read, subscribe and unsubscribe,
//     completion/complete, logging/setLevel, pagination; prompts/get and
//     resources/read pass the Gatekeeper like tools/call (issue 10).
//   - origin.go, relay.go, ssetee.go: the origin of each upstream request
//     (the agent request it serves), by which log messages and
//     server→client requests (sampling, elicitation, roots) reach that
//     agent only; the SSE tap that ties an HTTP upstream's messages to the
//     POST that carries them.
//   - agentconn.go: per-agent upstream sessions
//     (servers.<name>.sessions: per_agent, the stdio default), closed when
//     their agent session ends.
//
// Policy never sees the exposed alias: the gate gets the real (server, tool)
// pair (or real prompt name or resource URI), and the exact argument bytes
// the agent sent, which are also the bytes dispatched upstream.
package gateway
