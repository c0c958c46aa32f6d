package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// ErrClientGone is the cancellation cause of a call whose HTTP client went
// away: its POST ended before the call did (after a grace period), or the
// client deleted its session. An explicit notifications/cancelled gives
// context.Canceled instead, and a dropped stdio client io.EOF (notes §3).
var ErrClientGone = errors.New("client connection dropped")

// An Authenticator maps a bearer token to the principal it authenticates;
// ok is false for an unknown token. It must be safe for concurrent use and
// should compare tokens in constant time.
type Authenticator func(token string) (p approval.Principal, ok bool)

// HTTPOptions configures [Gateway.Handler]. A nil *HTTPOptions or zero
// fields give the documented defaults.
type HTTPOptions struct {
	// InsecureNoAuth serves every request as the principal
	// {ID: "anonymous", Kind: "agent"} without a token. It is refused unless
	// ListenAddr is a loopback address, and requests that did not arrive on
	// a loopback address are then answered 403.
	InsecureNoAuth bool
	// ListenAddr is the address the handler is served on (host:port); it is
	// only checked for InsecureNoAuth.
	ListenAddr string
	// HeartbeatFirst is the silence after which a held call's SSE response
	// gets its first ": hb" comment; Heartbeat the silence between later
	// ones. Defaults 1s and 10s (notes §4).
	HeartbeatFirst, Heartbeat time.Duration
	// DropGrace is how long after its POST ended a call is cancelled with
	// ErrClientGone. Default 250ms.
	DropGrace time.Duration
	// MaxBody bounds a request body, in bytes (limits.max_request_bytes);
	// a larger one gets 413. Default 8 MiB.
	MaxBody int64
	// SessionTimeout closes an agent's MCP session after this long without
	// requests (limits.mcp_session_idle_timeout; a held call keeps its
	// session busy). Default 10m; negative means never.
	SessionTimeout time.Duration
	// MaxSessionsPerPrincipal and MaxSessions bound the open MCP sessions
	// of one principal and of all together (limits.max_mcp_sessions_per_principal,
	// limits.max_mcp_sessions). Past a bound, initialize is answered with
	// HTTP 429 (the principal's) or 503 (the total) and a JSON-RPC error
	// CodeTooManySessions, and no session is made. Defaults 100 and 10000.
	MaxSessionsPerPrincipal, MaxSessions int
	// DisableLeanCalls makes the SDK serve every request, plain allowed
	// tools/call requests too (leanfront.go). By
	// default the HTTP front answers those itself, decoding each once.
	DisableLeanCalls bool
}

func (o *HTTPOptions) withDefaults() HTTPOptions {
	var r HTTPOptions
	if o != nil {
		r = *o
	}
	if r.HeartbeatFirst <= 0 {
		r.HeartbeatFirst = time.Second
	}
	if r.Heartbeat <= 0 {
		r.Heartbeat = 10 * time.Second
	}
	if r.DropGrace <= 0 {
		r.DropGrace = 250 * time.Millisecond
	}
	if r.MaxBody <= 0 {
		r.MaxBody = 8 << 20
	}
	switch {
	case r.SessionTimeout == 0:
		r.SessionTimeout = 10 * time.Minute
	case r.SessionTimeout < 0:
		r.SessionTimeout = 0
	}
	if r.MaxSessionsPerPrincipal <= 0 {
		r.MaxSessionsPerPrincipal = 100
	}
	if r.MaxSessions <= 0 {
		r.MaxSessions = 10000
	}
	return r
}

// Handler returns the agent-facing HTTP handler: MCP Streamable HTTP at
// /mcp (stateful, SSE responses, no event store). Every request needs
// "Authorization: Bearer <token>" that auth accepts, else 401 with
// WWW-Authenticate; an agent session is bound to the principal that opened
// it. Unknown session ids get 404 (case C04). Serve it from an http.Server
// without WriteTimeout: held calls keep their response open.
//
// It returns an error when auth is nil without InsecureNoAuth, or when
// InsecureNoAuth is set and ListenAddr is not a loopback address.
func (g *Gateway) Handler(authn Authenticator, opts *HTTPOptions) (http.Handler, error) {
	o := opts.withDefaults()
	if o.InsecureNoAuth {
		if !isLoopbackAddr(o.ListenAddr) {
			return nil, fmt.Errorf("gateway: InsecureNoAuth needs a loopback listen address, got %q", o.ListenAddr)
		}
	} else if authn == nil {
		return nil, errors.New("gateway: nil Authenticator")
	}
	var lean *leanSessions
	sdkTimeout := o.SessionTimeout
	if !o.DisableLeanCalls {
		// The SDK's idle timer would not see the calls the front answers:
		// the front keeps every session's timer instead (leansessions.go).
		lean, sdkTimeout = newLeanSessions(o.SessionTimeout), 0
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
		Logger:              g.log,
		SessionTimeout:      sdkTimeout,
		MaxRequestBodyBytes: o.MaxBody,
	})
	// 2026-07-28 requests (no protocol session) are served by the SDK's
	// stateless handler over the same server, middleware and gate; the
	// front picks the handler per request (docs/protocol.md). The SDK
	// checks the SEP-2243 headers against the body there (-32020) before
	// any handler runs.
	modern := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
		Logger:                       g.log,
		Stateless:                    true,
		MaxRequestBodyBytes:          o.MaxBody,
		PropagateRequestCancellation: true,
	})
	var next, nextModern http.Handler = sdk, modern
	if !o.InsecureNoAuth {
		// The SDK binds each session to TokenInfo.UserID and refuses another
		// principal's requests on it (403).
		requireToken := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
			p, ok := ctx.Value(httpPrincipalKey{}).(approval.Principal)
			if !ok {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: p.ID}, nil
		}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
		next, nextModern = requireToken(next), requireToken(nextModern)
	}
	front := &httpFront{g: g, authn: authn, opts: o, next: next, modern: nextModern, lean: lean, hook: g.leanHook, park: g.parkHook, noPark: g.noPark,
		limits: newSessionLimiter(o.MaxSessions, o.MaxSessionsPerPrincipal, o.SessionTimeout, g.liveSessionSet)}
	mux := http.NewServeMux()
	mux.Handle("/mcp", front)
	return mux, nil
}

// httpFront authenticates, registers each POST as a carrier, cancels a
// session's calls on DELETE, and hands over to the SDK.
type httpFront struct {
	g     *Gateway
	authn Authenticator
	opts  HTTPOptions
	next  http.Handler // the stateful SDK handler: 2025-era sessions
	// modern is the stateless SDK handler: 2026-07-28 requests, which
	// carry no Mcp-Session-Id (each request stands alone; any instance
	// serves it).
	modern http.Handler
	// limits bounds the 2025-era sessions (an initialize reserves a slot;
	// 2026-07-28 requests open no session and take none).
	limits *sessionLimiter
	// lean is the registry of the 2025-era sessions the lean front serves
	// calls of (leanfront.go); nil when HTTPOptions.DisableLeanCalls.
	lean *leanSessions
	hook leanHook // tests only; nil otherwise
	park parkHook // tests only; nil otherwise
	// noPark (tests only) keeps every held call on its connection's
	// goroutine (leanHold.park).
	noPark bool
}

func (f *httpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	stepMark(0)
	held := f.serveCounted(w, r)
	if held != nil {
		// A call the lean front holds is parked off net/http's connection
		// when it can be (leanpark.go); else it waits here, after serve's
		// frames are gone: the connection's goroutine parks in a few small
		// frames (leanhold.go).
		if held.park(w, r) {
			return
		}
		defer held.end()
		held.wait()
		held.answer()
	}
}

// serveCounted is serve counted in flight in Options.Load, for
// procs.Follow, until it returns or panics (net/http recovers a panic by
// dropping the connection: the POST was counted in flight for good, and
// Follow saw two calls at every single one after it; branch attack14).
// POSTs only: a GET is a stream that stays open while the session lasts,
// not work in flight.
//
//go:noinline // its frame is gone before a held call waits
func (f *httpFront) serveCounted(w http.ResponseWriter, r *http.Request) (held *leanHold) {
	load := f.g.opts.Load
	if r.Method != http.MethodPost {
		load = nil
	}
	load.Begin()
	defer load.End()
	return f.serve(w, r)
}

// serve serves r (see httpFront), except that a plain call the lean front
// holds is returned, to be held and answered by ServeHTTP.
//
//go:noinline // its frame (over 1 KB) is gone before a held call waits
func (f *httpFront) serve(w http.ResponseWriter, r *http.Request) (held *leanHold) {
	r.Header.Del(carrierHeader)
	if o := r.Header.Get("Origin"); o != "" && !allowedOrigin(o, r.Host) {
		// MCP: servers must validate Origin (DNS rebinding). A browser page
		// from another origin never reaches the gateway.
		http.Error(w, "Forbidden: Origin "+o+" is not allowed", http.StatusForbidden)
		return
	}
	p, ok := f.authenticate(w, r)
	if !ok {
		return
	}
	stepMark(1)
	if r.ContentLength > f.opts.MaxBody {
		http.Error(w, fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, f.opts.MaxBody), http.StatusRequestEntityTooLarge)
		return
	}
	stepMark(2)
	// The principal goes into the context the SDK path reads it from
	// (requireToken): for a POST after the lean front, which takes p as
	// it is and answers most calls without it (a request's copy and a
	// context fewer per lean call).
	if r.Method != http.MethodPost {
		r = withPrincipal(r, p)
	}
	switch r.Method {
	case http.MethodDelete:
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			f.g.calls.cancel(sid, p.ID, fmt.Errorf("%w: the client deleted its session", ErrClientGone))
			if ls := f.lean.get(sid); ls != nil && ls.principal == p.ID {
				w = &deleteWriter{ResponseWriter: w, lean: f.lean, ss: ls.ss}
			}
		}
	case http.MethodGet:
		// The standalone stream: keep idle intermediaries from closing it.
		hb := newHeartbeatWriter(w, f.opts.HeartbeatFirst, f.opts.Heartbeat)
		hb.armOnWrite = true
		defer hb.stop()
		w = hb
	case http.MethodPost:
		next := f.next
		modern := false
		var body []byte
		var slot *sessionSlot
		var prior *gate.HandOff
		var hb *heartbeatWriter
		sid := r.Header.Get("Mcp-Session-Id")
		var lb *leanBody // a session's POST body, read once
		if sid != "" {
			lb = &leanBody{w: w, r: r, max: f.opts.MaxBody}
		}
		if ls := f.lean.get(sid); ls != nil && sid != "" {
			// A held call's POST is not over when serve returns: its
			// cleanups then run after the answer (leanCleanups.settle).
			var later leanCleanups
			defer func() { later.settle(held) }()
			if ls.principal == p.ID {
				later.end = ls.start(f.opts.SessionTimeout)
			}
			stepMark(3)
			if f.cancelLean(w, lb, p, ls) || f.replyLean(w, lb, p, ls) {
				return
			}
			hb = newHeartbeatWriter(w, f.opts.HeartbeatFirst, f.opts.Heartbeat)
			later.hb = hb
			stepMark(4)
			var served bool
			if served, prior, held = f.serveLean(hb, r, lb, p, ls); served {
				return
			}
			lb.restore() // for the SDK path
			if lb.read && lb.err == nil && refuseUnfaithful(hb, lb.body) {
				return
			}
		}
		if lb != nil && !lb.read {
			// Not read by the lean front (no lean session, or not a call
			// it serves): the SDK would answer a body that is no message
			// with a text quoting it, and one it does not serve faithfully
			// (an id it answers under another) as it does on a lean session.
			out := w
			if hb != nil {
				out = hb
			}
			body, err := lb.get()
			if err != nil {
				answerBodyError(out, err)
				return
			}
			if refuseUnfaithful(out, body) {
				return
			}
			lb.restore()
		}
		if lb != nil && lb.err == nil {
			out := w
			if hb != nil {
				out = hb
			}
			if refuseUnknownMethod(out, lb.body, r.Header.Get("Mcp-Protocol-Version"), false, false) {
				return
			}
		}
		r = withPrincipal(r, p)
		if sid == "" {
			// Only initialize may open a session; a 2026-07-28 request needs
			// none. The SDK would open (and at once drop) a session for any
			// other POST and answer 200 with an error; MCP says 400 (case C04).
			var err error
			body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, f.opts.MaxBody))
			if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
				// A body without a length (chunked) that runs past it.
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			if err != nil {
				http.Error(w, "cannot read the request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			if refuseNotMessage(w, body) {
				return
			}
			switch {
			case isModern(r.Header, body):
				// Before initialize: a 2026-07-28 initialize is a removed
				// method, which the stateless handler answers (-32601).
				next, modern = f.modern, true
				if f.lean != nil {
					// A plain tools/call is answered (or held) by the
					// lean front (lean2026.go).
					var served bool
					if served, prior, held = f.serveLeanModern(w, r, body, p); served {
						return
					}
				}
			case isInitialize(body):
				if f.g.root.Err() != nil {
					// Close began: its sweep of the sessions would miss
					// this one, which the SDK would keep (branch flake50).
					http.Error(w, "the gateway is shutting down", http.StatusServiceUnavailable)
					return
				}
				var status int
				var msg string
				if slot, status, msg = f.limits.reserve(p.ID); slot == nil {
					refuseInitialize(w, body, status, msg)
					return
				}
				// Bound to the new session by the middleware; freed otherwise.
				defer slot.release()
			default:
				http.Error(w, "Bad Request: missing Mcp-Session-Id header (only initialize, or a 2026-07-28 request, may be sent without one)", http.StatusBadRequest)
				return
			}
			if refuseUnfaithful(w, body) || refuseUnknownMethod(w, body, r.Header.Get("Mcp-Protocol-Version"), modern, modern && f.g.opts.Tasks != nil) {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		id := rand.Text()
		r.Header.Set(carrierHeader, id)
		switch {
		case hb != nil:
			w = hb
		case !modern:
			// 2026-07-28 POSTs are answered as a whole; SSE comments would
			// make every answer a stream.
			hb = newHeartbeatWriter(w, f.opts.HeartbeatFirst, f.opts.Heartbeat)
			defer hb.stop()
			w = hb
		}
		if modern && f.g.taskRequest(w, r, body, p) {
			return
		}
		post := &carrier{ctx: r.Context(), principal: p, grace: f.opts.DropGrace, hb: hb, modern: modern, slot: slot, lean: f.lean, prior: prior}
		post.count.load = f.g.opts.Load // the POST is counted (serveCounted)
		f.g.carriers.put(id, post)
		defer f.g.carriers.delete(id)
		defer post.end()         // its answers are written, or never will be
		defer post.count.close() // before serveCounted's End
		next.ServeHTTP(w, r)
		return
	}
	f.next.ServeHTTP(w, r)
	return nil
}
