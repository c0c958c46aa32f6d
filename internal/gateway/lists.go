package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// DefaultListPageSize is the default of Options.ListPageSize.
const DefaultListPageSize = 100

// CodeRefused is the JSON-RPC error code of a prompts/get, resources/read
// or resources/subscribe that the gate refused: denied by policy or by the
// session's policy, denied by an approver, timed out, cancelled, or
// waiting for approval in retry mode (then data carries
// {"toolgate/approval": {...}}). MCP has no isError result for these
// methods, so, unlike tools/call, the refusal is a JSON-RPC error. It lies
// in the implementation-defined server error range of JSON-RPC 2.0.
const CodeRefused = -32010

// refusalError turns a gate refusal into the JSON-RPC error of a
// non-tool request.
func refusalError(adm gate.Admission) error {
	e := &jsonrpc.Error{Code: CodeRefused, Message: adm.Message}
	if len(adm.Meta) > 0 {
		if b, err := json.Marshal(adm.Meta); err == nil {
			e.Data = b
		}
	}
	return e
}

// errInvalidParams is a JSON-RPC invalid-params error with msg.
func errInvalidParams(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// page returns the page of items after cursor (the key of the last item
// of the previous page, base64url-encoded; "" for the first page), at
// most size long, and the cursor of the next page ("" at the end). items
// must be sorted by key. A cursor that does not decode is invalid params.
func page[T any](items []T, key func(T) string, cursor string, size int) ([]T, string, error) {
	start := 0
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil {
			return nil, "", errInvalidParams("invalid cursor")
		}
		after := string(b)
		start, _ = slices.BinarySearchFunc(items, after, func(t T, k string) int {
			switch {
			case key(t) < k:
				return -1
			case key(t) > k:
				return 1
			}
			return 0
		})
		if start < len(items) && key(items[start]) == after {
			start++
		}
	}
	end := min(start+size, len(items))
	out := items[start:end]
	if end < len(items) && end > start {
		return out, base64.RawURLEncoding.EncodeToString([]byte(key(items[end-1]))), nil
	}
	return out, "", nil
}

// usable returns the list filter of the caller of req (see gate.Usable):
// nothing for an unauthenticated caller or when the session cannot be
// read (fail closed).
func (g *Gateway) usable(ctx context.Context, req mcp.Request) (approval.Principal, func(kind, server, name string) bool) {
	none := func(string, string, string) bool { return false }
	p, ok := g.principalOf(ctx, req)
	if !ok {
		return p, none
	}
	if g.opts.Sessions == nil {
		return p, func(string, string, string) bool { return true }
	}
	use, err := g.opts.Sessions.Usable(ctx, p)
	if err != nil {
		g.log.ErrorContext(ctx, "cannot read the session policy; listing nothing", "principal", p.ID, "err", err)
		return p, none
	}
	return p, use
}

// levelRank orders MCP logging levels (RFC 5424 severities, least severe
// first); unknown levels rank as info.
func levelRank(l mcp.LoggingLevel) int {
	switch l {
	case "debug":
		return 0
	case "info":
		return 1
	case "notice":
		return 2
	case "warning":
		return 3
	case "error":
		return 4
	case "critical":
		return 5
	case "alert":
		return 6
	case "emergency":
		return 7
	}
	return 1
}

// baseLogLevel is the level toolgate asks of shared upstream sessions
// until an agent asks for more: enough for toolgate's own log.
const baseLogLevel mcp.LoggingLevel = "info"

// levels remembers each agent session's logging/setLevel. Shared upstream
// sessions are asked for the lowest level any agent asked for (never above
// baseLogLevel), so each agent still gets what it asked for; the agent
// session's own level then filters (ServerSession.Log). Per-agent upstream
// sessions are asked for their agent's level. Methods are safe for
// concurrent use.
type levels struct {
	mu    sync.Mutex
	m     map[*mcp.ServerSession]mcp.LoggingLevel // guarded by mu
	floor mcp.LoggingLevel                        // guarded by mu
}

func newLevels() *levels {
	return &levels{m: map[*mcp.ServerSession]mcp.LoggingLevel{}, floor: baseLogLevel}
}

// set records ss's level and reports whether the shared floor went down.
func (l *levels) set(ss *mcp.ServerSession, lvl mcp.LoggingLevel) (lowered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[ss] = lvl
	if levelRank(lvl) < levelRank(l.floor) {
		l.floor = lvl
		return true
	}
	return false
}

// explicit returns the level ss asked for with logging/setLevel; ok is
// false when it asked for none (then the SDK sends it no log message).
func (l *levels) explicit(ss *mcp.ServerSession) (lvl mcp.LoggingLevel, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lvl, ok = l.m[ss]
	return lvl, ok
}

// of returns ss's level, or baseLogLevel when it set none.
func (l *levels) of(ss *mcp.ServerSession) mcp.LoggingLevel {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lvl, ok := l.m[ss]; ok {
		return lvl
	}
	return baseLogLevel
}

func (l *levels) shared() mcp.LoggingLevel {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.floor
}

func (l *levels) forget(ss *mcp.ServerSession) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, ss)
}

// setLevel handles an agent's logging/setLevel: the SDK records the level
// on the agent session (it filters what the agent gets), and the upstream
// sessions are asked for enough.
func (g *Gateway) setLevel(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	res, err := next(ctx, method, req)
	if err != nil {
		return res, err
	}
	sreq, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams])
	if !ok || sreq.Params == nil || sreq.Session == nil {
		return res, nil
	}
	lvl := sreq.Params.Level
	if !g.watchSession(sreq.Session) {
		return res, nil
	}
	lowered := g.levels.set(sreq.Session, lvl)
	for _, ac := range g.agentConnsOf(sreq.Session) {
		ac.mu.Lock()
		c := ac.conn
		ac.mu.Unlock()
		if c != nil {
			ac.u.setLoggingLevel(ctx, c, func() mcp.LoggingLevel { return g.levels.of(sreq.Session) })
		}
	}
	if lowered {
		for _, name := range g.serverNames() {
			u := g.ups[name]
			if c, err := u.session(); err == nil {
				u.setLoggingLevel(ctx, c, g.levels.shared)
			}
		}
	}
	return res, nil
}

// setLoggingLevel asks c for log messages at level() and above, if the
// upstream offers logging; an error is only logged. The level is read and
// sent under c's logging lock, one request at a time: two callers that
// read the level at different moments (a reconnect and an agent's
// setLevel) could otherwise reach the upstream in the other order and
// leave it at the older level.
func (u *upstream) setLoggingLevel(ctx context.Context, c *upConn, level func() mcp.LoggingLevel) {
	res := c.cs.InitializeResult()
	if res == nil || res.Capabilities == nil || res.Capabilities.Logging == nil {
		return
	}
	c.logMu.Lock()
	defer c.logMu.Unlock()
	lvl := level()
	lctx, cancel := context.WithTimeout(ctx, u.connectTimeout())
	defer cancel()
	//lint:ignore SA1019 logging is deprecated only from 2026-07-28; sessions are pinned to 2025-11-25.
	if err := c.cs.SetLoggingLevel(withAnswerCheck(lctx, "logging/setLevel"), &mcp.SetLoggingLevelParams{Level: lvl}); err != nil {
		u.log.DebugContext(ctx, "upstream logging/setLevel", "level", lvl, "err", err)
	}
}

// forward runs f on the upstream session of u that serves o's agent (its
// own on a per-agent server, the one for 2026-07-28 agents for a
// 2026-07-28 request, the shared one otherwise), with o in f's
// context, and delivers o's log messages before it returns. Transport
// failures are JSON-RPC errors with CodeUpstreamUnavailable; JSON-RPC
// errors of the upstream pass through.
func (g *Gateway) forward(ctx context.Context, u *upstream, o *origin, f func(ctx context.Context, c *upConn, ac *agentConn) error) error {
	defer o.finish()
	ac, err := u.agentConnFor(o)
	if err != nil {
		return u.unreachableError(err)
	}
	var c *upConn
	if ac != nil {
		if c, err = ac.session(ctx); err != nil {
			return err
		}
		defer ac.track(o)()
	} else if o != nil && o.modern {
		// A 2026-07-28 request goes to the upstream session of such
		// agents, where its tool calls go (modernconn.go): one agent's
		// requests meet one upstream state (branch stdio43).
		if c, err = u.modernSession(ctx); err != nil {
			return &jsonrpc.Error{Code: CodeUpstreamUnavailable, Message: u.errText(err)}
		}
	} else if c, err = u.session(); err != nil {
		return &jsonrpc.Error{Code: CodeUpstreamUnavailable, Message: u.errText(err)}
	}
	err = f(withOrigin(ctx, o), c, ac)
	if err == nil {
		return nil
	}
	var wire *jsonrpc.Error
	switch {
	case errors.Is(err, errLineNotSent), errors.Is(err, errLinePartlySent):
		// A stdio child that did not read its stdin by the request's
		// bound (sdkwrite.go): toolgate's error, not the upstream's.
		return u.unreachableError(err)
	case errors.As(err, &wire):
		return wire
	case ctx.Err() != nil:
		return fmt.Errorf("request cancelled: %w", context.Cause(ctx))
	}
	return u.unreachableError(err)
}
