package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// A call of a tool the catalog does not know is "unknown tool" (invalid
// params), except when the name is "<server>__<tool>" of a configured
// upstream that is down, or up but whose last tools/list failed: its tools
// are not known, so the name may well be right, and the agent is told the
// upstream is unavailable, as for a call of a listed tool whose upstream
// went down (callfail.go). Nothing is sent. The policy view decides whether
// the agent may learn that: the same one tools/list uses (visibleTools).

// refusalRecorder is a Gatekeeper that records a call the gateway refused
// before asking it ([gate.Gate.RecordRefused]).
type refusalRecorder interface {
	RecordRefused(ctx context.Context, c gate.Call, reason string)
}

// downTool answers principal p's tools/call of name, which the catalog
// does not know, with args (the agent's argument bytes), when name is
// "<server>__<tool>" of a configured upstream (not unprefixed) that has no
// session now (connecting, reconnecting, or closed), or whose last
// tools/list failed, and p's view, as
// tools/list computes it, would show that tool: an isError result naming
// the upstream as unavailable, recorded in the audit trail as a refusal.
// ok is false otherwise, and on any error reading p's view (fail closed):
// the caller answers "unknown tool", which reveals nothing.
func (g *Gateway) downTool(ctx context.Context, p approval.Principal, name string, args json.RawMessage) (res *mcp.CallToolResult, ok bool) {
	server, tool, found := strings.Cut(name, nameSeparator)
	if !found || tool == "" {
		return nil, false
	}
	u := g.ups[server]
	if u == nil || u.cfg.Unprefixed {
		return nil, false
	}
	why, down := u.downSince()
	what := fmt.Sprintf("%s; its tools are not known until it is connected, so the call was not sent and nothing was run; toolgate tries to connect again at least every %s",
		why, u.healthInterval())
	if !down {
		listErr := u.lastListErr()
		if listErr == "" {
			return nil, false // it is up and listed its tools: name is not one
		}
		why = "tools/list failed: " + listErr
		what = fmt.Sprintf("%s; its tools are not known until a tools/list succeeds (at the next reconnect or tools/list_changed), so the call was not sent and nothing was run", why)
	}
	if g.opts.Sessions != nil {
		use, err := g.opts.Sessions.Usable(ctx, p)
		if err != nil {
			g.log.ErrorContext(ctx, "cannot read the session policy; answering unknown tool", "principal", p.ID, "err", err)
			return nil, false
		}
		if !use(approval.KindToolCall, server, tool) {
			return nil, false // hidden from p: as if the server had no such tool
		}
	}
	f := u.unavailable(ctx, tool, what, approval.OutcomeTransportError, errors.New(why))
	if rec, ok := g.gk.(refusalRecorder); ok {
		rec.RecordRefused(ctx, gate.Call{Principal: p, Server: server, Tool: tool, Arguments: args}, f.msg)
	}
	return errorResult(f.msg), true
}

// downSince reports whether u has no session now and, if so, since when
// and why ("reconnecting since <RFC 3339 time>: <error>", with the
// configured URL's credentials removed, clipped as a tools/list error: the
// error may quote the upstream's answer to initialize).
func (u *upstream) downSince() (why string, down bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn != nil {
		return "", false
	}
	err := "no session"
	if u.downErr != nil {
		err = u.downErr.Error()
	}
	return clipText(u.redact(fmt.Sprintf("%s since %s: %s", u.state, u.since.UTC().Format(time.RFC3339), err)), maxListErrBytes), true
}

// maxListErrBytes is how much of a failed tools/list's error text
// setListErr keeps (and of why an upstream is down, downSince): the
// upstream chooses that text, and every call of one of its names would
// hand all of it to the agent and the audit trail.
const maxListErrBytes = 1024

// setListErr records the outcome of a tools/list of u: err when it failed
// (kept with the configured URL's credentials removed, control characters
// replaced by spaces, cut to maxListErrBytes), nil when it succeeded.
func (u *upstream) setListErr(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil && u.listErr == nil {
		return
	}
	u.listErr = nil
	if err != nil {
		u.listErr = errors.New(clipText(u.redact(err.Error()), maxListErrBytes))
	}
	u.notifyLocked()
}

// lastListErr is why u's last tools/list failed, redacted; "" if it
// succeeded or none was tried.
func (u *upstream) lastListErr() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.listErr == nil {
		return ""
	}
	return u.listErr.Error()
}

// errText is err's text as it may reach an agent, the audit trail or the
// log: the configured URL's credentials removed, escaped and cut to
// maxListErrBytes by clipText ("<nil>" for nil). A connect or transport
// error quotes what the upstream or its process said (an answer to
// initialize, an HTTP body): that text is the upstream's to choose.
func (u *upstream) errText(err error) string {
	return clipText(u.redact(fmt.Sprint(err)), maxListErrBytes)
}

// unreachableError is the JSON-RPC error (CodeUpstreamUnavailable) an
// agent gets for a request u could not take, err saying why (errText).
func (u *upstream) unreachableError(err error) *jsonrpc.Error {
	return &jsonrpc.Error{Code: CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %q: %s", u.name, u.errText(err))}
}

// clipText returns s with the characters a reviewer's surfaces show escaped
// ([api.IsShownEscaped]: controls such as newlines and terminal escapes,
// bidi overrides and isolates, zero-width characters, look-alike spaces)
// replaced by spaces, so an upstream's text cannot reorder or hide what an
// agent or the audit reads, and, if longer than n bytes, cut at a UTF-8 boundary
// to at most n bytes followed by " [cut by toolgate]".
func clipText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if api.IsShownEscaped(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	return runePrefix(s, n) + " [cut by toolgate]"
}
