package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/config"
	"toolgate/internal/gateway"
	"toolgate/internal/httpserve"
	"toolgate/internal/telemetry"
)

// agentKeepAlive is the base of the agent listener's TCP keep-alive (Go's
// default period): each connection's idle time before its first probe is
// drawn from [agentKeepAlive, 2·agentKeepAlive).
const agentKeepAlive = 15 * time.Second

// listener is one open HTTP listener with, once attached, its handler.
type listener struct {
	name string // "mcp" or "admin"
	url  string // what the ready file says
	ln   net.Listener
	h    http.Handler
	opts httpserve.Options
}

// listeners are the open listeners of serve.
type listeners struct{ list []listener }

// close closes every listener (serving closes them too; closing twice is
// harmless).
func (l *listeners) close() {
	for _, x := range l.list {
		_ = x.ln.Close()
	}
}

// ready returns the ready file's content: listener name → URL.
func (l *listeners) ready() map[string]string {
	out := map[string]string{}
	for _, x := range l.list {
		out[x.name] = x.url
	}
	return out
}

// addrInUse says what to do about a listen address in use; most often it
// is a serve of the same config still running.
const addrInUse = "another process listens there, often a toolgate serve still running: stop it, or give this one other listen addresses (port 0 picks a free one)"

// bindListeners opens the agent and admin listeners that are on, first of
// all, so that an address in use fails the start before the store opens
// or an upstream starts. Connections wait in the backlog until serving
// starts. On error it closes what it opened.
func bindListeners(ctx context.Context, p plan, log *slog.Logger) (_ *listeners, err error) {
	lns := &listeners{}
	defer func() {
		if err != nil {
			lns.close()
		}
	}()
	if p.mcpAddr != "" {
		// Keep-alive is set per connection, out of step (held calls'
		// connections are silent for minutes: httpserve.SpreadKeepAlive).
		// A connection is accepted once its first bytes arrived
		// (deferAccept): until then net/http keeps no goroutine for it.
		nlc := net.ListenConfig{KeepAlive: -1, Control: deferAccept}
		ln, err := nlc.Listen(ctx, "tcp", p.mcpAddr)
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen.mcp: %w (%s)", err, addrInUse)
		}
		if err != nil {
			return nil, fmt.Errorf("listen.mcp: %w", err)
		}
		ln = httpserve.SpreadKeepAlive(ln, agentKeepAlive)
		lns.list = append(lns.list, listener{name: "mcp", url: "http://" + ln.Addr().String() + "/mcp", ln: ln})
	}
	if p.adminAddr != "" {
		lc := &api.ListenConfig{Logger: log}
		ln, err := lc.Listen(ctx, p.adminAddr)
		switch {
		case errors.Is(err, api.ErrUnsafeSocketDir):
			return nil, fmt.Errorf("%w: listen.admin: %w", errConfig, err)
		case errors.Is(err, syscall.EADDRINUSE) && p.mcpAddr == "":
			// Only --stdio has no agent listener. Its admin listener is on
			// because the config sets listen.admin, most often the config
			// of the serve already listening there.
			return nil, fmt.Errorf("listen.admin: %w (--stdio opens the admin listener only because listen.admin is set: "+
				"leave it out of this config (serve still listens on %s by default) and decide its calls through the serve sharing its store)",
				err, config.Default().Listen.Admin)
		case errors.Is(err, syscall.EADDRINUSE):
			return nil, fmt.Errorf("listen.admin: %w (%s)", err, addrInUse)
		case err != nil:
			return nil, fmt.Errorf("listen.admin: %w", err)
		}
		url := p.adminAddr
		if ln.Addr().Network() == "tcp" {
			url = "http://" + ln.Addr().String()
		}
		lns.list = append(lns.list, listener{name: "admin", url: url, ln: ln})
	}
	return lns, nil
}

// attach builds each listener's handler and serving options over the core.
func (l *listeners) attach(ctx context.Context, cfg config.Config, f serveFlags, p plan, c *core, log *slog.Logger) error {
	base := httpserve.Options{
		Logger:            log,
		ReadHeaderTimeout: cfg.Listen.ReadHeaderTimeout,
		IdleTimeout:       cfg.Listen.IdleTimeout,
		BeforeShutdown:    c.gate.Stop, // end held calls first, so draining is quick
	}
	for i := range l.list {
		x := &l.list[i]
		x.opts = base
		x.opts.Name = x.name
		x.opts.OnShed = func(how string) { c.metrics.ConnectionShed(x.name, how) }
		switch x.name {
		case "mcp":
			var auth gateway.Authenticator
			if !f.insecureNoAuth {
				auth = agentAuth(ctx, p.creds, c.db)
			}
			mcpH, err := c.gw.Handler(auth, agentHTTPOptions(cfg.Limits, f.insecureNoAuth, x.ln.Addr().String()))
			if err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			// Next to /mcp: the agents' own session API (child sessions,
			// authenticated by a session token).
			mux := http.NewServeMux()
			mux.Handle("/", mcpH)
			mux.Handle("/v1/", api.NewAgentSessions(c.gate, api.AgentAuthenticator(auth), &api.Options{Logger: log, SessionsChanged: c.gw.SessionsChanged}))
			x.h = mux
			x.opts.MaxConns = p.caps.mcp
			// Kept-alive connections idle after a request net/http answered
			// wait on the gateway's shared poller (idle40).
			x.opts.IdleHandoff = c.gw.KeepIdle
			maxBody := int64(cfg.Limits.MaxRequestBytes) // limits.max_request_bytes
			if maxBody <= 0 {
				maxBody = mcpMaxBody
			}
			x.opts.ReadTimeout = readTimeout(cfg.Listen.ReadHeaderTimeout, maxBody)
		case "admin":
			adminAPI := api.New(c.gate, approverAuth(p.creds), &api.Options{
				Logger: log, Metrics: telemetry.Handler(c.reg), Sessions: c.gate, SessionsChanged: c.gw.SessionsChanged, Policies: policiesAPI(c.policies),
				Explain:       &liveExplainer{holder: c.holder, cfg: cfg, ann: c.cat.annotations(cfg), quorum: c.gate.ExplainQuorum},
				Profiling:     true,
				Ready:         c.gate.Ready,
				Upstreams:     upstreamStates(c.gw),
				Grants:        c.gate,
				Events:        c.db,
				EventsChanged: c.events.Wait,
				Audit:         auditAPI{c.trail, c.db},
			})
			// The web inbox at /ui/ beside the API.
			h, err := withInbox(ctx, adminAPI, c.db, p.creds, cfg, log)
			if err != nil {
				return err
			}
			// Event streams end before draining, like held calls.
			x.opts.BeforeShutdown = func() {
				c.gate.Stop()
				adminAPI.EndStreams()
			}
			// Slack's interaction endpoint (when configured) sits in front
			// of the API; it authenticates by Slack's signature.
			x.h = c.notes.handler(h)
			x.opts.MaxConns = p.caps.admin
			x.opts.ReadTimeout = adminReadTimeout(cfg.Listen.ReadHeaderTimeout)
		}
	}
	return nil
}
