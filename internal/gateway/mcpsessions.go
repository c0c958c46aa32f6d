package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// The agents' MCP sessions (Streamable HTTP, Mcp-Session-Id) cost memory
// until they are deleted or expire; without a bound, a client that only
// sends initialize grows the gateway without limit (issue 9, item 15:
// 50,000 initialize calls added 707 MB). The HTTP front admits a new
// session only within HTTPOptions.MaxSessionsPerPrincipal and MaxSessions;
// the SDK closes sessions idle for HTTPOptions.SessionTimeout.

// CodeTooManySessions is the JSON-RPC error code of an initialize refused
// because a session limit is reached (HTTP 429 for the principal's limit,
// 503 for the total).
const CodeTooManySessions = -32010

// reconcileEvery is how many admitted sessions pass between two sweeps of
// the sessions that ended (deleted, expired), besides the sweep made when a
// limit is reached.
const reconcileEvery = 64

// A sessionLimiter counts the MCP sessions of one Handler per principal.
// Its methods are safe for concurrent use.
type sessionLimiter struct {
	maxTotal, maxPer int
	idle             time.Duration // for messages only
	live             func() map[*mcp.ServerSession]bool

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]string // guarded by mu: admitted session → principal
	per      map[string]int                // guarded by mu: sessions and reservations per principal
	total    int                           // guarded by mu
	admitted int                           // guarded by mu: admissions since the last sweep
}

// A sessionSlot is a place reserved for the session an initialize POST is
// creating; it is bound to that session, or released.
type sessionSlot struct {
	l         *sessionLimiter
	principal string
	mu        sync.Mutex
	done      bool // guarded by mu: bound or released
}

func newSessionLimiter(maxTotal, maxPer int, idle time.Duration, live func() map[*mcp.ServerSession]bool) *sessionLimiter {
	return &sessionLimiter{maxTotal: maxTotal, maxPer: maxPer, idle: idle, live: live,
		sessions: map[*mcp.ServerSession]string{}, per: map[string]int{}}
}

// reserve takes a place for a new session of principal, or returns the HTTP
// status and message of the refusal.
func (l *sessionLimiter) reserve(principal string) (*sessionSlot, int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.per[principal] >= l.maxPer || l.total >= l.maxTotal || l.admitted >= reconcileEvery {
		l.sweepLocked()
	}
	expire := "let idle ones expire"
	if l.idle > 0 {
		expire = fmt.Sprintf("let idle ones expire (after %s)", l.idle)
	}
	switch {
	case l.per[principal] >= l.maxPer:
		return nil, http.StatusTooManyRequests, fmt.Sprintf("too many MCP sessions: %q has %d open (limits.max_mcp_sessions_per_principal); end unused sessions with HTTP DELETE or %s", principal, l.per[principal], expire)
	case l.total >= l.maxTotal:
		return nil, http.StatusServiceUnavailable, fmt.Sprintf("too many MCP sessions: the gateway has %d open (limits.max_mcp_sessions); try again later", l.total)
	}
	l.per[principal]++
	l.total++
	return &sessionSlot{l: l, principal: principal}, 0, ""
}

// bind makes ss the session of slot s; it counts until it ends.
func (s *sessionSlot) bind(ss *mcp.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.l.sessions[ss] = s.principal
	s.l.admitted++
}

// release frees slot s unless it was bound to a session.
func (s *sessionSlot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.l.dropLocked(s.principal)
}

func (l *sessionLimiter) dropLocked(principal string) {
	l.total--
	if l.per[principal]--; l.per[principal] <= 0 {
		delete(l.per, principal)
	}
}

// sweepLocked forgets the admitted sessions that ended. Callers hold l.mu.
func (l *sessionLimiter) sweepLocked() {
	l.admitted = 0
	live := l.live()
	for ss, p := range l.sessions {
		if !live[ss] {
			delete(l.sessions, ss)
			l.dropLocked(p)
		}
	}
}

// refuseInitialize answers an initialize POST that a session limit refused:
// HTTP status, and a JSON-RPC error response to its id.
func refuseInitialize(w http.ResponseWriter, body []byte, status int, msg string) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &req)
	id := answerID(req.ID)
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": CodeTooManySessions, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// liveSessionSet returns the MCP sessions the downstream server has open.
func (g *Gateway) liveSessionSet() map[*mcp.ServerSession]bool {
	live := map[*mcp.ServerSession]bool{}
	for ss := range g.server.Sessions() {
		live[ss] = true
	}
	return live
}

// initialize serves an initialize request and, on HTTP, binds the place
// its POST reserved among the session limits to the session it opened.
//
// An HTTP agent session is watched (watchSession) before its initialize is
// served, so that Close's sweep (closeWatched) closes it, with or without
// the lean front. Once Close began the initialize is refused (ErrShutdown)
// without being served: the SDK closes a session whose initialize left no
// parameters when its POST ends. An initialize re-sent on a session that
// ended and is being released is refused too, saying so
// (errSessionReleasing: start a new session); the gateway goes on. The HTTP front refuses an initialize that
// arrives after Close began too (503), but one that passed that check just
// before is decided here, under the lock Close's sweep takes: on a2628f8c
// it opened a session nobody closed (branch flake51).
func (g *Gateway) initialize(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	var post *carrier
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		post = g.carriers.get(ex.Header.Get(carrierHeader))
	}
	if post != nil && ss != nil {
		if g.initHook != nil {
			g.initHook()
		}
		if err := g.watch(ss); err != nil {
			// ErrShutdown, or the session ended and is being
			// released (errSessionReleasing): the gateway goes on.
			return nil, err
		}
	}
	res, err := next(ctx, method, req)
	if err == nil {
		g.logStarted(ctx, req, res)
	}
	if post != nil && ss != nil {
		if post.slot != nil && err == nil {
			post.slot.bind(ss)
		}
		// A session whose initialize failed but that the SDK keeps (it
		// closes only those without initialize parameters) is registered
		// too, without a version: the lean front never serves it, but
		// its idle timer, which replaces the SDK's, closes it.
		if post.lean != nil && (err == nil || ss.InitializeParams() != nil) {
			version := ""
			if ir, _ := res.(*mcp.InitializeResult); err == nil && ir != nil {
				version = ir.ProtocolVersion
			}
			post.lean.add(ss, post.principal.ID, version)
			g.leanRegs.Store(post.lean, true)
		}
	}
	return res, err
}

// logStarted logs the one INFO line of an agent session's start (the
// go-sdk's own lines are DEBUG: sdkLogger): its session id, principal,
// negotiated protocol version and the client's name and version as the
// client gave them (cut to maxClientInfo bytes each). Nothing of the
// token.
func (g *Gateway) logStarted(ctx context.Context, req mcp.Request, res mcp.Result) {
	var (
		p   approval.Principal
		sid string
	)
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		if post := g.carriers.get(ex.Header.Get(carrierHeader)); post != nil {
			p = post.principal
		}
		sid = sessionID(req)
	} else {
		p, _ = ctx.Value(principalKey{}).(approval.Principal)
		sid, _ = ctx.Value(stdioSessionKey{}).(string)
	}
	attrs := []any{"session_id", sid, "principal", p.ID}
	if ir, ok := res.(*mcp.InitializeResult); ok && ir != nil {
		attrs = append(attrs, "protocol_version", ir.ProtocolVersion)
	}
	if ip, ok := req.GetParams().(*mcp.InitializeParams); ok && ip != nil && ip.ClientInfo != nil {
		attrs = append(attrs, "client", clientText(ip.ClientInfo.Name), "client_version", clientText(ip.ClientInfo.Version))
	}
	g.log.InfoContext(ctx, "agent session started", attrs...)
}

// maxClientInfo bounds the client name and version logStarted logs.
const maxClientInfo = 64

// clientText is s, a client's own words, as valid UTF-8 of at most
// maxClientInfo bytes.
func clientText(s string) string {
	if len(s) > maxClientInfo {
		s = s[:maxClientInfo]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// initialized tells the lean front that session ss finished its
// initialization (notifications/initialized, which the SDK serves without
// the middleware): its calls may now be served.
func (g *Gateway) initialized(ss *mcp.ServerSession) {
	if ss == nil {
		return
	}
	g.leanRegs.Range(func(k, _ any) bool {
		if s := k.(*leanSessions).get(ss.ID()); s != nil && s.ss == ss {
			s.markInitialized()
		}
		return true
	})
}

// forgetLean drops ended agent session ss from the lean fronts' registries.
func (g *Gateway) forgetLean(ss *mcp.ServerSession) {
	g.leanRegs.Range(func(k, _ any) bool {
		k.(*leanSessions).forget(ss)
		return true
	})
}
