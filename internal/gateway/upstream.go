package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamProtocolVersion is the protocol version upstream sessions are
// opened at: it works against every go-sdk server mode and keeps
// cancellation by notification and classic elicitation (notes §7).
const upstreamProtocolVersion = "2025-11-25"

// JSON-RPC error codes of the gateway's own transport failures (the
// implementation-defined server error range of JSON-RPC 2.0). Errors that an
// upstream returned are passed through with their own code.
const (
	// CodeUpstreamUnavailable: the upstream is down, exited during the call,
	// or its session could not be re-established.
	CodeUpstreamUnavailable = -32000
	// CodeUpstreamTimeout: the upstream did not answer within call_timeout.
	// It is the code the TypeScript SDK uses for a request timeout.
	CodeUpstreamTimeout = -32001
)

var errCallTimeout = errors.New("call_timeout reached")

// upstreamIdleConns bounds the idle connections kept to one HTTP upstream
// (per host; the same bound for all hosts of the server together).
const upstreamIdleConns = 256

// stableAfter is how long a session must have lived for the reconnect
// backoff to start over at RestartMin.
const stableAfter = 30 * time.Second

// An upConn is one live session with an upstream.
type upConn struct {
	cs   *mcp.ClientSession
	proc *process  // the stdio child; nil for HTTP
	raw  *rawCalls // the raw tools/call path of a stdio session (rawcall.go); nil for HTTP
	// hc and url are the HTTP client and endpoint of an HTTP session
	// (rawhttpcall.go); nil and "" for stdio.
	hc  *http.Client
	url string
	// rawHead is what the session's raw POSTs share, built at the
	// first (rawhttpcall.go).
	rawHead atomic.Pointer[rawHTTPHead]
	// logMu orders the logging/setLevel requests sent on cs
	// (upstream.setLoggingLevel).
	logMu sync.Mutex
}

// close ends the session. For stdio it ends the child first, so that the
// session's calls fail at once instead of being waited for.
func (c *upConn) close() {
	if c.proc != nil {
		_ = c.proc.Close()
	}
	_ = c.cs.Close()
	if c.raw != nil {
		c.raw.end(nil)
	}
}

// An upstream is one configured server: its client, its current session,
// and the goroutines that keep the session up and its tools fresh.
type upstream struct {
	name   string
	cfg    ServerConfig
	g      *Gateway
	log    *slog.Logger
	client *mcp.Client
	http   *http.Client // HTTP upstreams only
	stderr *stderrLog   // stdio upstreams only

	refreshCh chan struct{} // cap 1: a tools/list refresh is wanted
	itemsCh   chan struct{} // cap 1: a refresh of prompts and resources is wanted
	resetCh   chan struct{} // cap 1: the session expired upstream (HTTP 404)
	checkCh   chan struct{} // cap 1: a health check is wanted now (health.go)

	// toolsFrom and itemsFrom are the upstream sessions whose list change
	// the next refresh lists (nil: the shared session); itemsReported is
	// set when the change was one of prompts or resources. See changedOn.
	toolsFrom, itemsFrom atomic.Pointer[mcp.ClientSession]
	itemsReported        atomic.Bool

	// Per-agent sessions (servers.<name>.sessions: per_agent; agentconn.go).
	agentsMu     sync.Mutex
	agents       map[*mcp.ServerSession]*agentConn // guarded by agentsMu
	agentsClosed bool                              // guarded by agentsMu
	byClient     sync.Map                          // *mcp.ClientSession → *agentConn
	// notify delivers resources/updated notifications to agents without
	// blocking the upstream's notification handler.
	notify orderedSender

	// The session of 2026-07-28 agents' tool calls (modernconn.go).
	modern modernConn

	// The shared session and its health.
	mu          sync.Mutex
	conn        *upConn       // guarded by mu; nil while down
	downErr     error         // guarded by mu; why conn is nil
	failures    int           // guarded by mu; failed connect attempts so far
	changed     chan struct{} // guarded by mu; closed and replaced on every change
	resetConn   *upConn       // guarded by mu; the session a reset was asked for
	state       string        // guarded by mu; StateConnecting, StateConnected… (health.go)
	since       time.Time     // guarded by mu; when state began
	unreachable error         // guarded by mu; the failed health check of conn, if any
	listErr     error         // guarded by mu; why the last tools/list failed (redacted), nil once one succeeds (downtool.go)

	lastRead atomic.Int64 // unix ns of the last bytes read on the shared session (health.go)

	// rawHTTPSeq numbers the raw HTTP calls (rawhttpcall.go): the last
	// number used, so also how many were sent.
	rawHTTPSeq atomic.Uint64
	// drains are the goroutines reading the rest of raw HTTP calls'
	// response bodies and POSTing their notifications/cancelled
	// (rawhttpcall.go, upstream.background); run waits for them
	// (endDrains).
	drains      sync.WaitGroup
	drainMu     sync.Mutex
	drainsEnded bool // guarded by drainMu: no new drain starts
	// drainsStarted counts the goroutines background started.
	drainsStarted atomic.Int64
}

func newUpstream(sc ServerConfig, g *Gateway) *upstream {
	u := &upstream{
		name:      sc.Name,
		cfg:       sc,
		g:         g,
		log:       g.log.With("server", sc.Name),
		refreshCh: make(chan struct{}, 1),
		itemsCh:   make(chan struct{}, 1),
		agents:    map[*mcp.ServerSession]*agentConn{},
		resetCh:   make(chan struct{}, 1),
		checkCh:   make(chan struct{}, 1),
		changed:   make(chan struct{}),
		downErr:   errors.New("not connected yet"),
		state:     StateConnecting,
		since:     time.Now(),
	}
	u.client = u.newClient(nil)
	if sc.URL != "" {
		base := http.DefaultTransport.(*http.Transport).Clone()
		// Keep a connection per call in flight: Go's default of 2 idle
		// connections per host closes the others after each burst, so
		// concurrent calls kept opening new TCP connections (issue 13: 0.9
		// per call at 16 in flight). Idle connections still close after
		// IdleConnTimeout (90 s), so the pool follows the recent peak.
		base.MaxIdleConns = upstreamIdleConns
		base.MaxIdleConnsPerHost = upstreamIdleConns
		// POSTs to a plain http:// upstream go without net/http's
		// connection goroutines (rawhttpconn.go); the rest through base.
		lean := newH1Transport(base, base.Proxy, sc.URL, upstreamIdleConns)
		u.http = newUpstreamHTTPClient(&captureRoundTripper{base: lean, headers: sc.Headers, max: g.opts.MaxResultBytes, routes: g.routes,
			log: u.log, onRead: u.sawTraffic, up: u}, u.log)
	} else {
		u.stderr = newStderrLog(sc.Name, sc.Env, g.log)
	}
	return u
}

// Client capabilities toolgate can offer an upstream (ServerConfig.ClientCapabilities).
const (
	CapabilityRoots       = "roots"
	CapabilitySampling    = "sampling"
	CapabilityElicitation = "elicitation"
)

// offers reports whether toolgate declares capability to this server:
// all three unless ClientCapabilities names some.
func (c ServerConfig) offers(capability string) bool {
	return c.ClientCapabilities == nil || slices.Contains(c.ClientCapabilities, capability)
}

// clientCapabilities are the client capabilities the upstream sessions of
// cfg declare: toolgate forwards each server→client request to the agent
// that made the request it belongs to, so by default servers expose
// everything they would expose to a capable direct client; an agent that
// lacks a capability makes the upstream get an error (relay.go).
func clientCapabilities(cfg ServerConfig) *mcp.ClientCapabilities {
	caps := &mcp.ClientCapabilities{}
	if cfg.offers(CapabilityRoots) {
		caps.RootsV2 = &mcp.RootCapabilities{ListChanged: true}
	}
	if cfg.offers(CapabilitySampling) {
		caps.Sampling = &mcp.SamplingCapabilities{Tools: &mcp.SamplingToolsCapabilities{}, Context: &mcp.SamplingContextCapabilities{}}
	}
	if cfg.offers(CapabilityElicitation) {
		caps.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}
	}
	return caps
}

// connectTimeout bounds starting u and its initialize handshake:
// servers.<name>.connect_timeout, else the gateway's default.
func (u *upstream) connectTimeout() time.Duration {
	if d := u.cfg.ConnectTimeout; d > 0 {
		return d
	}
	return u.g.opts.ConnectTimeout
}

// newClient returns an MCP client for sessions with u's server that
// declare the client capabilities of u's configuration: the shared
// session's (owner nil) or the per-agent sessions of owner.
func (u *upstream) newClient(owner *agentConn) *mcp.Client {
	return u.newClientWith(clientCapabilities(u.cfg), owner)
}

// newClientWith is newClient for sessions that declare caps.
func (u *upstream) newClientWith(caps *mcp.ClientCapabilities, owner *agentConn) *mcp.Client {
	g := u.g
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate", Version: g.opts.Version}, &mcp.ClientOptions{
		Logger:       g.log,
		Capabilities: caps,
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) {
			u.changedOn(req.Session, true)
		},
		PromptListChangedHandler: func(_ context.Context, req *mcp.PromptListChangedRequest) {
			u.changedOn(req.Session, false)
		},
		ResourceListChangedHandler: func(_ context.Context, req *mcp.ResourceListChangedRequest) {
			u.changedOn(req.Session, false)
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			u.resourceUpdated(req.Session, req.Params)
		},
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			u.elicitationComplete(req.Params)
		},
		// Notification handlers run one at a time per session: these never
		// block. Progress and log messages are handled from the wire, in
		// order (rawcap.go, ssetee.go): there toolgate knows the session
		// and the request stream they came on, which progress is bound to
		// (progress.go); the SDK's handler would not, so it has none.
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			u.logMessage(ctx, req.Params)
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	c.AddReceivingMiddleware(u.receivingMiddleware(owner))
	return c
}

// connect starts the shared session: the child process or HTTP
// connection, then initialize at upstreamProtocolVersion.
func (u *upstream) connect(ctx context.Context) (*upConn, error) {
	c, err := u.connectWith(ctx, u.client, nil)
	if err == nil {
		// Before any call: log messages of the first calls are not lost.
		u.setLogging(ctx, c)
	}
	return c, err
}

// connectWith starts a session with client: the shared one (owner nil) or
// the per-agent session of owner.
func (u *upstream) connectWith(ctx context.Context, client *mcp.Client, owner *agentConn) (*upConn, error) {
	return u.connectSession(ctx, client, owner, owner == nil)
}

// connectSession is connectWith; shared says whether the session's traffic
// tells the shared session's health (health.go): only the shared one's does.
func (u *upstream) connectSession(ctx context.Context, client *mcp.Client, owner *agentConn, shared bool) (*upConn, error) {
	return u.connectAt(ctx, client, owner, shared, upstreamProtocolVersion)
}

// connectAt is connectSession at protocol version version: at
// upstreamProtocolVersion, a server that speaks only 2026-07-28 is
// connected in that era; at modernVersion the SDK asks server/discover
// first and falls back to initialize at 2025-11-25.
func (u *upstream) connectAt(ctx context.Context, client *mcp.Client, owner *agentConn, shared bool, version string) (*upConn, error) {
	opts := &mcp.ClientSessionOptions{ProtocolVersion: version}
	if u.cfg.URL != "" {
		hc := u.http
		if owner != nil || !shared {
			rt := *u.http.Transport.(*captureRoundTripper)
			rt.owner = owner
			rt.onRead = nil // only the shared session's traffic tells its health
			hc = newUpstreamHTTPClient(&rt, u.log)
		}
		t := &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: hc, MaxEventSize: u.g.opts.MaxResultBytes + sdkLimitSlack}
		cs, err := client.Connect(ctx, t, opts)
		if err != nil && ctx.Err() == nil && !transportFailure(err) && version != modernVersion {
			// A server that answered but speaks only 2026-07-28 (stateless,
			// no initialize): connect in that era, through server/discover.
			cs2, err2 := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: modernVersion})
			if err2 == nil && cs2.InitializeResult() != nil && cs2.InitializeResult().ProtocolVersion >= modernVersion {
				u.log.InfoContext(ctx, "upstream speaks only MCP 2026-07-28; connected in that era", "url", u.cfg.URL)
				return &upConn{cs: cs2, hc: hc, url: u.cfg.URL}, nil
			}
			if err2 == nil {
				_ = cs2.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", u.cfg.URL, err)
		}
		return &upConn{cs: cs, hc: hc, url: u.cfg.URL}, nil
	}
	p, err := startProcess(u.cfg, u.stderr, u.g.opts.TerminateGrace)
	if err != nil {
		return nil, err
	}
	stdout := p.out
	if shared {
		stdout = activityReader{r: p.out, saw: u.sawTraffic}
	}
	raw := newRawCalls(p, u.g.opts.MaxResultBytes, u.log)
	out := newStdoutGuard(ctx, stdout, u.g.opts.MaxResultBytes, u.log, raw)
	w := newSDKWriter(p)
	t := captureTransport{Transport: &mcp.IOTransport{Reader: io.NopCloser(out), Writer: w, MaxLineLength: u.g.opts.MaxResultBytes + sdkLimitSlack},
		routes: u.g.routes, up: u, owner: owner, raw: raw, w: w, bound: u.cfg.CallTimeout}
	cs, err := client.Connect(ctx, t, opts)
	if err != nil {
		_ = p.Close()
		if xe := p.startError(); xe != nil {
			err = fmt.Errorf("%w (%w)", err, xe)
		}
		return nil, fmt.Errorf("initialize %s: %w", u.cfg.Command, err)
	}
	p.tail.stop()
	return &upConn{cs: cs, proc: p, raw: raw}, nil
}

// run keeps the upstream connected until ctx is done, starting from first
// (nil if the first attempt failed), and refreshes its tools on request.
func (u *upstream) run(ctx context.Context, first *upConn) {
	defer u.endDrains() // they end with the gateway's root context
	var wg sync.WaitGroup
	wg.Go(func() { u.refreshLoop(ctx) })
	wg.Go(func() { u.itemsLoop(ctx) })
	defer u.notify.close()
	defer u.closeAgents()
	defer u.closeModern()
	defer wg.Wait()
	if u.http != nil {
		defer u.http.CloseIdleConnections()
	}

	o := u.g.opts
	delay := min(o.RestartMin, u.healthInterval())
	c := first
	for {
		if c == nil {
			// Not cut at once by Close (dialContext): an initialize the
			// upstream served is answered, so the session is closed below.
			cctx, cancel := u.g.dialContext(ctx, u.connectTimeout())
			var err error
			c, err = u.connect(cctx)
			cancel()
			if ctx.Err() != nil {
				if c != nil {
					c.close()
				}
				u.setDown(ctx, ErrShutdown, false)
				return
			}
			if err != nil {
				u.setDown(ctx, err, true)
				if !sleep(ctx, delay) {
					return
				}
				delay = u.nextDelay(delay)
				continue
			}
			u.setUp(ctx, c)
			u.requestRefresh() // its tools may have changed while it was down
		}
		u.setLogging(ctx, c)
		start := time.Now()
		err, reset := u.waitDown(ctx, c)
		if ctx.Err() != nil {
			u.setDown(ctx, ErrShutdown, false)
			return
		}
		c = nil
		if time.Since(start) >= stableAfter {
			delay = min(o.RestartMin, u.healthInterval())
		}
		if reset {
			u.setDown(ctx, errors.New("session expired upstream; re-initialising"), false)
			continue
		}
		if err == nil {
			err = errors.New("session closed by the upstream")
		}
		u.setDown(ctx, err, false)
		if !sleep(ctx, delay) {
			return
		}
		delay = u.nextDelay(delay)
	}
}

// nextDelay doubles the reconnect backoff up to RestartMax, and never past
// the health interval: an upstream that is down is tried at least that often.
func (u *upstream) nextDelay(d time.Duration) time.Duration {
	return min(2*d, u.g.opts.RestartMax, u.healthInterval())
}

// waitDown returns when c's session ended (with its error), when its
// health checks found it stale (c is closed), when a reset of c was asked
// for (reset is true; c is being closed), or when ctx is done (c is closed).
func (u *upstream) waitDown(ctx context.Context, c *upConn) (err error, reset bool) {
	hctx, stopHealth := context.WithCancel(ctx)
	stale := make(chan error, 1)
	var hwg sync.WaitGroup
	hwg.Go(func() { stale <- u.watchHealth(hctx, c) })
	defer hwg.Wait()
	defer stopHealth()
	ended := make(chan error, 1)
	go func() {
		err := c.cs.Wait()
		if c.proc != nil {
			if xe := c.proc.exitError(u.g.opts.TerminateGrace); xe != nil {
				err = xe
			}
		}
		ended <- err
	}()
	for {
		select {
		case err := <-ended:
			c.close() // make sure a child that only closed its stdout is gone
			// The SDK may close the session itself when the upstream answers
			// 404 to its id (the server restarted): re-initialise at once,
			// as for a reset, instead of backing off (case C03).
			return err, errors.Is(err, mcp.ErrSessionMissing)
		case <-ctx.Done():
			c.close()
			if err := <-ended; err != nil {
				u.log.DebugContext(ctx, "upstream session ended on shutdown", "err", err)
			}
			return nil, false
		case err := <-stale:
			if err == nil {
				continue // ctx is done; the case above follows
			}
			c.close()
			if serr := <-ended; serr != nil {
				u.log.DebugContext(ctx, "stale upstream session closed", "err", u.redact(serr.Error()))
			}
			return err, false
		case <-u.resetCh:
			u.mu.Lock()
			mine := u.resetConn == c
			u.mu.Unlock()
			if mine {
				// Other calls may still be waiting on the stale session; do not
				// wait for them here.
				go c.close()
				return nil, true
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (u *upstream) setUp(ctx context.Context, c *upConn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.conn, u.downErr, u.unreachable = c, nil, nil
	u.setState(ctx, StateConnected, nil)
	u.notifyLocked()
}

// setDown records that the upstream has no session, because of err;
// failed says err is a failed connect attempt.
func (u *upstream) setDown(ctx context.Context, err error, failed bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.conn, u.downErr, u.unreachable = nil, err, nil
	if failed {
		u.failures++
	}
	u.setState(ctx, StateReconnecting, err)
	u.notifyLocked()
}

// session returns the current session, or an error saying why there is none.
func (u *upstream) session() (*upConn, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn != nil {
		return u.conn, nil
	}
	return nil, fmt.Errorf("%s since %s: %w", u.state, u.since.UTC().Format(time.RFC3339), u.downErr)
}

func (u *upstream) ready() error {
	h := u.health()
	if h.State != StateConnected {
		return fmt.Errorf("upstream %q is %s: %s", u.name, h.State, h.LastError)
	}
	return nil
}

// reset asks run to drop the session c (it expired upstream) and connect a
// new one at once.
func (u *upstream) reset(c *upConn) {
	u.mu.Lock()
	if u.conn != c {
		u.mu.Unlock()
		return // already replaced
	}
	u.resetConn = c
	u.mu.Unlock()
	select {
	case u.resetCh <- struct{}{}:
	default:
	}
}

// awaitReconnect waits until a session other than stale is up. It fails when
// a connect attempt fails meanwhile, or when ctx is done.
func (u *upstream) awaitReconnect(ctx context.Context, stale *upConn) (*upConn, error) {
	u.mu.Lock()
	failures := u.failures
	u.mu.Unlock()
	for {
		u.mu.Lock()
		c, ch, f, derr := u.conn, u.changed, u.failures, u.downErr
		u.mu.Unlock()
		if c != nil && c != stale {
			return c, nil
		}
		if f > failures {
			return nil, derr
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// requestRefresh asks for the tools, prompts and resources to be listed
// again.
func (u *upstream) requestRefresh() {
	select {
	case u.refreshCh <- struct{}{}:
	default:
	}
	u.requestItemsRefresh()
}

// changedOn asks for the lists to be read again from cs, the upstream
// session that said they changed (its tools, and prompts and resources,
// or with tools unset only those): the catalog follows the list changes of
// every session of the server. For an HTTP server its sessions see one
// server; a stdio server's sessions are processes of their own (the
// shared one, per-agent ones, the one of 2026-07-28 agents' calls), whose
// lists can differ: the catalog then shows the list of the one that
// changed last, which for 2026-07-28 agents is the process their calls
// change (docs/protocol.md).
func (u *upstream) changedOn(cs *mcp.ClientSession, tools bool) {
	u.itemsFrom.Store(cs)
	if tools {
		u.toolsFrom.Store(cs)
		u.requestRefresh()
		return
	}
	u.itemsReported.Store(true)
	u.requestItemsRefresh()
}

// listSession is the session a refresh lists: from (the session that
// reported a change) when set, else the shared session c.
func listSession(from *mcp.ClientSession, c *upConn) *mcp.ClientSession {
	if from != nil {
		return from
	}
	return c.cs
}

// requestItemsRefresh asks for the prompts and resources to be listed again.
func (u *upstream) requestItemsRefresh() {
	select {
	case u.itemsCh <- struct{}{}:
	default:
	}
}

// refreshLoop lists the upstream's tools whenever a refresh is requested
// (tools/list_changed, or a new session) and applies them to the catalog.
func (u *upstream) refreshLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.refreshCh:
		}
		c, err := u.session()
		if err != nil {
			continue // a new session requests another refresh
		}
		lctx, cancel := context.WithTimeout(ctx, u.connectTimeout())
		from := u.toolsFrom.Swap(nil) // set when a session reported a change
		cs := listSession(from, c)
		tools, err := listTools(lctx, cs)
		if err != nil && cs != c.cs && lctx.Err() == nil {
			// The session that reported the change ended: list the shared one.
			tools, err = listTools(lctx, c.cs)
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				u.setListErr(err)
				u.log.WarnContext(ctx, "upstream tools/list", "err", u.lastListErr())
			}
			continue
		}
		// The tools are in the catalog before the failure is cleared: a
		// call in between is told the upstream is unavailable, never
		// "unknown tool" for a name the list just gave.
		if changed, _ := u.g.replaceTools(u.name, tools, false); !changed && from != nil {
			u.g.upstreamListChanged(true)
		}
		u.setListErr(nil)
	}
}

// listTools lists every tool of the session, following pagination, with
// the task support each declares (read from the raw results: the SDK's
// Tool has no execution field; tasksupport.go).
func listTools(ctx context.Context, cs *mcp.ClientSession) (upstreamTools, error) {
	out := upstreamTools{taskSupport: map[string]string{}}
	ctx = withListSlot(ctx, func(raw json.RawMessage) { readTaskSupport(raw, out.taskSupport) })
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return upstreamTools{}, err
		}
		out.defs = append(out.defs, t)
	}
	return out, nil
}

// setLogging asks a shared session of an upstream that offers logging for
// its logs at the lowest level any agent asked for (info until then);
// without it they are dropped. An error is only logged.
func (u *upstream) setLogging(ctx context.Context, c *upConn) {
	u.setLoggingLevel(ctx, c, u.g.levels.shared)
}

// logMessage writes an upstream's log message to toolgate's log; ctx is
// the reader's (it carries no deadline that matters here).
func (u *upstream) logMessage(ctx context.Context, p *mcp.LoggingMessageParams) {
	if p == nil {
		return
	}
	level := slog.LevelInfo
	switch p.Level {
	case "debug":
		level = slog.LevelDebug
	case "info", "notice":
	case "warning":
		level = slog.LevelWarn
	default: // error, critical, alert, emergency
		level = slog.LevelError
	}
	u.log.Log(ctx, level, "upstream log", "logger", p.Logger, "data", p.Data)
}
