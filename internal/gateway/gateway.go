package gateway

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/httpserve"
	"toolgate/internal/mcpwire"
	"toolgate/internal/procs"
)

// A Gatekeeper decides whether a tools/call may be dispatched. Admit may
// block while the call is held for approval; it returns when the call may run
// (Allowed) or is refused. *gate.Gate implements it. Admit must be safe for
// concurrent use; the gateway calls Admission.Finish exactly once after
// dispatching an allowed call.
type Gatekeeper interface {
	Admit(ctx context.Context, c gate.Call) gate.Admission
}

// ServerConfig describes one upstream MCP server. Exactly one of Command
// (a stdio child process) and URL (a Streamable HTTP endpoint) is set.
type ServerConfig struct {
	// Name is the server's name in config: [a-z0-9][a-z0-9-]*, so it never
	// contains "__" and the exposed name "<server>__<tool>" splits back
	// uniquely (case C06).
	Name string
	// Command, Args, Env and Dir start a stdio server. Env is the child's
	// complete environment (the gateway's own is not inherited; cmd
	// computes it, see config.Config.UpstreamEnvs); Dir is the working
	// directory.
	Command string
	Args    []string
	Env     map[string]string
	Dir     string
	// URL is a Streamable HTTP endpoint; Headers are added to every request
	// sent to it (for example Authorization).
	URL     string
	Headers map[string]string
	// CallTimeout bounds each tools/call sent to this server; 0 means no
	// bound. When it fires, the call fails with a JSON-RPC error naming the
	// timeout and notifications/cancelled is sent upstream.
	CallTimeout time.Duration
	// ConnectTimeout bounds starting this server and initialize (and each
	// reconnect, and a listing made on a fresh session); 0 means
	// Options.ConnectTimeout.
	ConnectTimeout time.Duration
	// Unprefixed exposes the server's tools and prompts under their own
	// names instead of "<server>__<tool>". A tool name that another
	// server's tool already has is a startup error (later: logged and not
	// exposed), never an overwrite (case C05); a prompt name two servers
	// would expose is exposed prefixed for both. Policy still matches the
	// real (server, tool).
	Unprefixed bool
	// Optional marks a server that is not required (config
	// servers.<name>.required: false): while it is down, [Gateway.Ready]
	// still succeeds. Its calls fail either way.
	Optional bool
	// Sessions is SessionsShared or SessionsPerAgent; "" means per_agent
	// for a stdio server and shared for an HTTP one (see agentconn.go).
	Sessions string
	// ClientCapabilities lists the client capabilities toolgate declares to
	// the server and forwards requests for: CapabilityRoots,
	// CapabilitySampling, CapabilityElicitation. nil means all three; an
	// empty list none. Leaving out roots keeps a server that would take
	// its allowed directories from the client's roots (the filesystem
	// server) on the directories it was started with.
	ClientCapabilities []string
}

func (c ServerConfig) validate() error {
	var errs []error
	if !validServerName(c.Name) {
		errs = append(errs, fmt.Errorf("server name %q: want [a-z0-9][a-z0-9-]*", c.Name))
	}
	if (c.Command == "") == (c.URL == "") {
		errs = append(errs, fmt.Errorf("server %q: set exactly one of command and url", c.Name))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("server %q: connect timeout %s < 0", c.Name, c.ConnectTimeout))
	}
	if c.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("server %q: call_timeout must not be negative", c.Name))
	}
	if c.Sessions != "" && c.Sessions != SessionsShared && c.Sessions != SessionsPerAgent {
		errs = append(errs, fmt.Errorf("server %q: sessions %q: want %s or %s", c.Name, c.Sessions, SessionsShared, SessionsPerAgent))
	}
	for _, cp := range c.ClientCapabilities {
		if cp != CapabilityRoots && cp != CapabilitySampling && cp != CapabilityElicitation {
			errs = append(errs, fmt.Errorf("server %q: client capability %q: want %s, %s or %s", c.Name, cp, CapabilityRoots, CapabilitySampling, CapabilityElicitation))
		}
	}
	return errors.Join(errs...)
}

func validServerName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Options configures a Gateway. A nil *Options or zero fields give the
// documented defaults.
type Options struct {
	// Logger receives the gateway's logs, the upstreams' stderr lines and
	// their MCP log messages. Default: discard.
	Logger *slog.Logger
	// Load, when set, counts the MCP POSTs the HTTP front serves (a held
	// call only until it is held; GET streams not at all), for
	// procs.Follow, and (Load.Saw) the messages a stdio agent sends, for
	// execpages.WhenQuiet.
	Load *procs.Load
	// Version is the version the gateway reports in its MCP server info.
	Version string
	// HeldGoroutines makes a held 2026-07-28 call parked off net/http's
	// connection (leanpark.go) wait on a goroutine of its own
	// (gate.Gate.WaitHold), as before branch heldwait, instead of on the
	// gate's events without one (gate.Gate.WaitHoldFunc). Default false.
	HeldGoroutines bool
	// ConnectTimeout bounds connecting to one upstream (process start or
	// HTTP, initialize, first tools/list). Default 30s.
	ConnectTimeout time.Duration
	// RestartMin and RestartMax bound the backoff between reconnect attempts
	// of an upstream: the delay starts at RestartMin and doubles up to
	// RestartMax, and never exceeds HealthInterval. Defaults 250ms and 30s.
	RestartMin, RestartMax time.Duration
	// HealthInterval is how often each upstream session is checked with an
	// MCP ping (a failed ping marks the upstream unreachable; three in a
	// row drop the session and reconnect), and the longest wait between
	// reconnect attempts of an upstream that is down. Default 10s.
	HealthInterval time.Duration
	// pingTimeout bounds one health check; tests set it, else it is
	// max(HealthInterval, minPingTimeout).
	pingTimeout time.Duration
	// TerminateGrace is how long a stdio child gets after its stdin closes,
	// and again after SIGTERM, before it is killed. Default 1s.
	TerminateGrace time.Duration
	// MaxResultBytes bounds one message read from an upstream, in bytes
	// (limits.max_result_bytes): a stdio line, an SSE event or a JSON
	// response body. A tools/call result over it fails only its own call,
	// with an isError result; the shared session survives (the message is
	// read to its end and discarded, never held whole). Default 64 MiB.
	MaxResultBytes int
	// MaxRequestBytes bounds one message a stdio agent sends
	// (limits.max_request_bytes); a longer line is answered with a
	// JSON-RPC error and the session goes on. HTTP agents are bounded by
	// HTTPOptions.MaxBody. Default 8 MiB.
	MaxRequestBytes int
	// ProgressLinger is how long an upstream progress token stays known after
	// its call returned, so late progress is dropped quietly. Default 5s.
	ProgressLinger time.Duration
	// Rewrite, when set, transforms a call's arguments before the gate sees
	// them (so approvers see, and the hash covers, the rewritten bytes), and
	// again immediately before an approved call is dispatched; if the second
	// result differs from what was approved, the gate invalidates the
	// approval (case C11). It is a hook for embedders and tests; it must not
	// retain or modify its input.
	Rewrite func(server, tool string, args json.RawMessage) json.RawMessage
	// Sessions, when set, limits what agent sessions see in tools/list to
	// their effective tools (the gate enforces calls either way). nil shows
	// every principal every tool.
	Sessions SessionPolicy
	// PolicyRequests, when set, exposes the built-in tool PolicyToolName
	// to agent sessions (listed only to them), through which a session
	// asks to change its own policy. nil: no built-in tool
	// (sessions.request_tool: false).
	PolicyRequests PolicyRequester
	// ListPageSize is the page size of prompts/list, resources/list and
	// resources/templates/list. Default DefaultListPageSize.
	ListPageSize int
	// MaxHold bounds how long a call (tools/call, prompts/get,
	// resources/read) whose caller sent no progress token is held for an
	// approval: then it is answered with the gate's pending answer (an
	// isError result, or CodeRefused, naming the approval, its link and
	// "re-send the identical call to continue"). Callers with a progress
	// token are held with keep-alives until the decision. 0: no bound
	// (approvals.max_hold).
	MaxHold time.Duration
	// Tasks, when set, serves the Tasks extension to 2026-07-28 clients
	// that declare it (tasks.go): held calls become tasks, and tasks/get,
	// tasks/cancel and tasks/update are answered. nil: no Tasks.
	Tasks TaskKeeper
	// MRTR, when set, answers held calls of 2026-07-28 clients that
	// declare URL-mode elicitation (and not Tasks) with multi round-trip
	// rounds pointing at the approval's inbox page (modern.go). nil, or no
	// public URL: such calls are held as usual (approvals.max_hold).
	MRTR RequestStater
	// ShutdownGrace bounds how long Close (and the end of ServeStdio's
	// ctx) waits for the answers of the calls it cancels to be written
	// before it closes the agent sessions (answers.go): a held call's "the
	// gateway is shutting down". Default httpserve.DefaultShutdownTimeout
	// (3 s), the listeners' own wait for requests in flight.
	ShutdownGrace time.Duration
	// StdioWriteTimeout bounds each write to a stdio agent (ServeStdio's
	// out), the wait behind earlier writes included: an agent that stops
	// reading ends its session with errAgentNotReading instead of blocking
	// it for good (stdiowrite.go). 0: no bound.
	StdioWriteTimeout time.Duration
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Version == "" {
		r.Version = "dev"
	}
	if r.ConnectTimeout <= 0 {
		r.ConnectTimeout = 30 * time.Second
	}
	if r.RestartMin <= 0 {
		r.RestartMin = 250 * time.Millisecond
	}
	if r.RestartMax < r.RestartMin {
		r.RestartMax = max(30*time.Second, r.RestartMin)
	}
	if r.HealthInterval <= 0 {
		r.HealthInterval = 10 * time.Second
	}
	if r.pingTimeout <= 0 {
		r.pingTimeout = max(r.HealthInterval, minPingTimeout)
	}
	if r.TerminateGrace <= 0 {
		r.TerminateGrace = time.Second
	}
	if r.MaxResultBytes <= 0 {
		r.MaxResultBytes = 64 << 20
	}
	if r.MaxRequestBytes <= 0 {
		r.MaxRequestBytes = 8 << 20
	}
	if r.ProgressLinger <= 0 {
		r.ProgressLinger = 5 * time.Second
	}
	if r.ListPageSize <= 0 {
		r.ListPageSize = DefaultListPageSize
	}
	if r.ShutdownGrace <= 0 {
		r.ShutdownGrace = httpserve.DefaultShutdownTimeout
	}
	return r
}

// A Gateway connects agents to upstream MCP servers through a Gatekeeper.
// Create it with [New]; serve agents with [Gateway.Handler] or
// [Gateway.ServeStdio]; stop it with [Gateway.Close]. Its methods are safe
// for concurrent use.
type Gateway struct {
	log  *slog.Logger
	opts Options
	gk   Gatekeeper

	server *mcp.Server
	// impl is the server's implementation: what a 2026-07-28 result
	// names in _meta (SEP-2575 serverInfo; lean2026.go adds it as the SDK).
	impl     *mcp.Implementation
	implJSON []byte // impl as json.Marshal writes it; nil if it cannot
	catalog  *catalog
	ups      map[string]*upstream // fixed at creation
	routes   *progressRoutes
	carriers *carriers
	calls    *sessionCalls
	// answers counts the answers owed on agent sessions that Close waits
	// for before closing them (answers.go).
	answers answers
	views   *views

	// toolsMu serializes catalog updates with the matching changes of the
	// downstream server's tool set.
	toolsMu sync.Mutex

	// Prompts, resources and templates (issue 10; items.go).
	itemsMu      sync.Mutex             // serializes rebuilds of exposed
	items        map[string]serverItems // guarded by itemsMu: by server
	exposed      atomic.Pointer[exposure]
	origins      *origins
	subs         *subscriptions
	levels       *levels
	elicitations elicitations
	deliveries   deliveries

	// watched are the agent sessions whose end the gateway waits for
	// (agentconn.go): true while live, false while sessionEnded releases
	// what the gateway held for one.
	watchMu     sync.Mutex
	watched     map[*mcp.ServerSession]bool // guarded by watchMu
	watchClosed bool                        // guarded by watchMu

	// root is the lifecycle context of the background goroutines: it is a
	// documented lifecycle root, cancelled by Close.
	root context.Context
	// taskRunners holds the approval ids of the tasks this gateway resumed
	// for an instance that is gone (approval.ID → true), so each runs once.
	taskRunners sync.Map
	stop        context.CancelFunc
	wg          sync.WaitGroup
	closeMux    sync.Mutex
	closed      bool
	closeStep   atomic.Pointer[string] // Close's step now (CloseStep)

	// directRunners maps the task id of each direct task this gateway runs
	// to the cancel func of its call (directtask.go).
	directRunners sync.Map
	// leanRegs holds the session registries of the lean fronts
	// (*leanSessions → true) that sessions were added to.
	leanRegs sync.Map
	leanHook leanHook // tests only: set before Handler
	parkHook parkHook // tests only: set before Handler
	// dispatchHook, when set (tests), is called before a lean call's
	// admitted dispatch (answerModern, answerLean): a panic there is a
	// panic of the dispatch (answerfail.go).
	dispatchHook func()
	// initHook, when set (tests), is called as an HTTP agent's
	// initialize reaches the gateway's middleware, before its session
	// is registered (mcpsessions.go).
	initHook func()
	// noStdioLean, when set (tests) before ServeStdio, keeps every plain
	// stdio tools/call line on the SDK path (stdiolean.go); the Tasks
	// front still takes its lines (stdiotasks.go).
	noStdioLean bool
	// noPark, when set (tests) before Handler, keeps the held lean calls
	// of its front on their connections' goroutines (leanHold.park).
	noPark bool
	// parkWrite, when set (tests), replaces parkedWriteTimeout.
	parkWrite time.Duration
	// parkPoll watches the connections of parked calls (leanwatch_linux.go),
	// started by the first parked call (stored under closeMux, read
	// without it); parkPollFailed: it cannot run here, guarded by closeMux.
	parkPoll       atomic.Pointer[connPoller]
	parkPollFailed bool
	// parkQ admits parked calls a bounded number at a time
	// (parkadmit.go); tests may replace it before Handler.
	parkQ *parkQueue
	// answerQ answers decided parked calls a bounded number at a time
	// (parkanswer.go); tests may replace it before Handler.
	answerQ *parkQueue
	// admits bounds the admissions that run at once, on every path
	// (admitbound.go); tests may replace it before Handler.
	admits admitSlots
	// sessionReads bounds the reads of agent sessions' policies that
	// decide calls before any admission slot (admitbound.go); tests may
	// replace it before Handler.
	sessionReads admitSlots
}

// New connects to every upstream in servers, lists their tools and builds the
// catalog. It returns an error for an invalid or duplicate server config and
// for a duplicate exposed tool name (case C05). An upstream that cannot be
// connected does not fail New: it is logged, retried with backoff, and
// reported by [Gateway.Ready]; its tools appear once it connects.
//
// ctx bounds the initial connections only; the gateway runs until Close.
func New(ctx context.Context, servers []ServerConfig, gk Gatekeeper, opts *Options) (*Gateway, error) {
	if gk == nil {
		return nil, errors.New("gateway: nil Gatekeeper")
	}
	o := opts.withDefaults()
	seen := map[string]bool{}
	var errs []error
	for _, sc := range servers {
		if err := sc.validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[sc.Name] {
			errs = append(errs, fmt.Errorf("server %q: configured twice", sc.Name))
		}
		seen[sc.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}

	root, stop := context.WithCancel(context.WithoutCancel(ctx))
	g := &Gateway{
		log:          o.Logger,
		opts:         o,
		gk:           gk,
		catalog:      newCatalog(),
		ups:          map[string]*upstream{},
		parkQ:        newParkQueue(parkAdmitters, (*leanHold).admitQueued),
		answerQ:      newAnswerQueue(),
		admits:       newAdmitSlots(admitSlotsMax),
		sessionReads: newAdmitSlots(sessionReadsMax),
		routes:       newProgressRoutes(o.ProgressLinger, o.Logger),
		carriers:     &carriers{},
		calls:        newSessionCalls(),
		views:        newViews(),
		items:        map[string]serverItems{},
		origins:      &origins{},
		subs:         newSubscriptions(),
		levels:       newLevels(),
		watched:      map[*mcp.ServerSession]bool{},
		root:         root,
		stop:         stop,
	}
	g.exposed.Store(buildExposure(nil, o.Logger))
	// Everything MCP 2025-11-25 offers passes through (issue 10): the
	// lists answer from the upstreams, whatever each offers.
	caps := &mcp.ServerCapabilities{
		Tools:       &mcp.ToolCapabilities{ListChanged: true},
		Prompts:     &mcp.PromptCapabilities{ListChanged: true},
		Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
		Completions: &mcp.CompletionCapabilities{},
		Logging:     &mcp.LoggingCapabilities{},
	}
	if o.Tasks != nil {
		// Held calls of 2026-07-28 clients that declare it become tasks.
		caps.Extensions = map[string]any{mcpwire.TasksExtension: map[string]any{}}
	}
	g.impl = &mcp.Implementation{Name: "toolgate", Version: o.Version}
	if b, err := json.Marshal(g.impl); err == nil {
		g.implJSON = b
	}
	g.server = mcp.NewServer(g.impl, &mcp.ServerOptions{
		Logger:       sdkLogger(o.Logger),
		Capabilities: caps,
		// Lists differ per principal (policy, agent sessions).
		SetCacheable:       func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" },
		SubscribeHandler:   g.subscribe,
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) { g.initialized(req.Session) },
		UnsubscribeHandler: g.unsubscribe,
		//lint:ignore SA1019 roots are deprecated only from 2026-07-28.
		RootsListChangedHandler: func(_ context.Context, req *mcp.RootsListChangedRequest) {
			for _, ac := range g.agentConnsOf(req.Session) {
				ac.rootsChanged()
			}
		},
	})
	g.server.AddReceivingMiddleware(g.middleware)
	g.server.AddSendingMiddleware(g.sendingMiddleware)
	if o.PolicyRequests != nil {
		// The middleware answers its calls; this handler never runs.
		g.server.AddTool(policyTool(), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return errorResult("unknown tool " + PolicyToolName), nil
		})
	}

	for _, sc := range servers {
		u := newUpstream(sc, g)
		g.ups[sc.Name] = u
		if u.stderr != nil {
			// Drained from now on, so that the lines of a child that
			// fails its first start are logged as they come, before the
			// warning that it is unavailable (which quotes the last ones).
			g.wg.Go(func() { u.stderr.run(root) })
		}
	}

	// Connect every upstream in parallel; each reports its own outcome.
	type first struct {
		u     *upstream
		conn  *upConn
		tools upstreamTools
		items serverItems
		err   error
	}
	results := make(chan first, len(g.ups))
	for _, u := range g.ups {
		go func() {
			// Said before the wait, which can take minutes (an npx server's
			// first download) while nothing else is logged.
			u.log.InfoContext(ctx, "connecting to upstream; the listeners open once each upstream has answered or its connect_timeout has passed", "connect_timeout", u.connectTimeout())
			cctx, cancel := context.WithTimeout(ctx, u.connectTimeout())
			defer cancel()
			c, err := u.connect(cctx)
			if err != nil {
				results <- first{u: u, err: err}
				return
			}
			tools, err := listTools(cctx, c.cs)
			if err != nil {
				c.close()
				u.setListErr(err) // until a session lists them (downtool.go)
				results <- first{u: u, err: fmt.Errorf("list tools: %w", err)}
				return
			}
			items, err := u.listItems(cctx, c.cs)
			if err != nil {
				// Its tools stay usable; the next list_changed lists again.
				g.log.WarnContext(ctx, "upstream prompts and resources not listed", "server", u.name, "err", err)
				items = serverItems{name: u.name, unprefixed: u.cfg.Unprefixed}
			}
			results <- first{u: u, conn: c, tools: tools, items: items}
		}()
	}
	var firsts []first
	for range g.ups {
		firsts = append(firsts, <-results)
	}
	slices.SortFunc(firsts, func(a, b first) int { return cmpString(a.u.name, b.u.name) })

	var buildErrs []error
	for _, f := range firsts {
		if f.err != nil {
			continue
		}
		if err := g.applyTools(f.u.name, f.tools, true); err != nil {
			buildErrs = append(buildErrs, err)
		}
	}
	if err := errors.Join(buildErrs...); err != nil {
		for _, f := range firsts {
			if f.conn != nil {
				f.conn.close()
			}
		}
		stop()
		g.wg.Wait() // the stderr drains
		return nil, fmt.Errorf("gateway: %w", err)
	}
	var items []serverItems
	for _, f := range firsts {
		if f.err == nil {
			items = append(items, f.items)
		}
	}
	g.applyItems(items...)
	for _, f := range firsts {
		if f.err != nil {
			f.u.setDown(ctx, f.err, true)
		} else {
			f.u.setUp(ctx, f.conn)
		}
		g.wg.Go(func() { f.u.run(root, f.conn) })
	}
	if l, ok := o.Tasks.(orphanLister); ok && o.Tasks.LeaseInterval() > 0 {
		g.wg.Go(func() { g.sweepOrphanedTasks(root, l, o.Tasks.LeaseInterval()) })
	}
	return g, nil
}

func cmpString(a, b string) int { return cmp.Compare(a, b) }

// Close cancels every agent call in flight (held or dispatched) with cause
// ErrShutdown, refuses new ones, stops the upstream sessions and stdio
// children, and waits for the gateway's goroutines. Call it before shutting
// the HTTP server down, so held calls do not keep it waiting. Close is
// idempotent. It has no bound of its own: its steps are bounded each
// (ShutdownGrace for the answers, the upstreams' TerminateGrace), and what
// is not (a goroutine waiting on a frozen upstream) is serve's 15 s
// shutdown bound's to cut, whose log line names the step (CloseStep).
func (g *Gateway) Close() error {
	g.closeMux.Lock()
	if g.closed {
		g.closeMux.Unlock()
		return nil
	}
	g.closed = true
	g.closeMux.Unlock()
	g.closingAt("cancelling the calls in flight")
	g.stop()
	g.calls.cancelAll(ErrShutdown)
	// Their answers ("the gateway is shutting down") are written before
	// the sessions close, which would drop them (answers.go).
	g.closingAt("writing the answers of the calls cut off")
	g.waitAnswers(&g.answers, "agent sessions")
	// The agent sessions the gateway watches end now (their per-agent
	// upstream sessions with them), so their watchers return.
	g.closingAt("closing the agent sessions")
	g.closeWatched()
	g.closingAt("waiting for the upstream sessions' and parked calls' goroutines")
	g.wg.Wait()
	g.closingAt("stopping the upstreams")
	g.routes.close()
	g.closingAt("closed")
	return nil
}

// closingAt records Close's step, for CloseStep.
func (g *Gateway) closingAt(step string) { g.closeStep.Store(&step) }

// CloseStep names the step Close is at ("" before Close, "closed" once it
// returned), for serve's log line of a shutdown that overran its bound
// (branch shut39).
func (g *Gateway) CloseStep() string {
	if s := g.closeStep.Load(); s != nil {
		return *s
	}
	return ""
}

// CallsInFlight returns how many agent requests the gateway is serving
// now (tracked for cancellation at Close: tool calls and the other
// requests that go through its middleware, held or dispatched), for
// serve's log line of a shutdown that overran its bound.
func (g *Gateway) CallsInFlight() int { return g.calls.count() }

func (g *Gateway) serverNames() []string {
	names := make([]string, 0, len(g.ups))
	for n := range g.ups {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Catalog returns the exposed tools, sorted by exposed name.
func (g *Gateway) Catalog() []Tool {
	return g.catalog.list()
}

// ToolDigest returns the digest of the current definition of the real tool
// (server, tool), and false when the catalog has no such tool. It satisfies
// the gate's Catalog interface.
func (g *Gateway) ToolDigest(server, tool string) (digest string, ok bool) {
	e, ok := g.catalog.byReal(server, tool)
	if !ok {
		return "", false
	}
	return e.Digest, true
}

// ToolAnnotations returns the annotations the upstream declares for its
// tool (nil when it declares none). ok is false when the catalog does not
// expose the tool. Treat the result as read-only; whether to trust it is
// the caller's decision (servers.<name>.trust_annotations).
func (g *Gateway) ToolAnnotations(server, tool string) (a *mcp.ToolAnnotations, ok bool) {
	e, ok := g.catalog.byReal(server, tool)
	if !ok || e.Definition == nil {
		return nil, ok
	}
	return e.Definition.Annotations, true
}

// principalKey and stdioSessionKey are the context keys of a stdio
// session's principal and its session id in the call registry.
type (
	principalKey    struct{}
	stdioSessionKey struct{}
)

// ErrShutdown is the cancellation cause of calls cut short because the
// gateway is closing or ServeStdio's ctx ended. Like ErrClientGone, and
// unlike context.Canceled, it is not the caller cancelling.
var ErrShutdown = errors.New("gateway shutting down")

// ServeStdio serves one agent over newline-delimited JSON-RPC on in and out
// until the agent closes in, ctx is cancelled (then it returns ctx's error),
// or the session fails. Every call of this session is made as principal p.
// Only protocol messages are written to out.
func (g *Gateway) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser, p approval.Principal) error {
	lw := newLockedWriter(out, g.opts.StdioWriteTimeout)
	// The session's answers owed, counted in the gateway's too (answers.go).
	owed := &answers{parent: &g.answers}
	sid := "stdio-" + rand.Text()
	sctx := context.WithValue(context.WithValue(ctx, principalKey{}, p), stdioSessionKey{}, sid)
	// Plain tools/call lines answered without the SDK (stdiolean.go), and
	// the Tasks front's lines (stdiotasks.go).
	lean := newStdioLean(sctx, g, p, sid, lw, owed)
	lean.noPlain = g.noStdioLean
	defer lean.close(ErrClientGone)
	guard := newStdinGuard(in, lw, g.opts.MaxRequestBytes, g.opts.Load.Saw, lean) //nolint:contextcheck // the lean front's calls derive from sctx (stdioLean.ctx)
	guard.end = lean.inputEnded
	// The guard passes on lines of at most MaxRequestBytes.
	t := owingTransport{Transport: &mcp.IOTransport{Reader: readCloser{guard, in}, Writer: lw, MaxLineLength: g.opts.MaxRequestBytes + sdkLimitSlack}, owed: owed}
	ss, err := g.server.Connect(sctx, t, nil)
	if err != nil {
		return fmt.Errorf("serve stdio: %w", err)
	}
	lean.ss.Store(ss)
	stop := context.AfterFunc(ctx, func() {
		// A write to an agent that stopped reading now fails within the
		// grace, not stdio_write_timeout, which outlasts serve's shutdown
		// bound (tail40): the session then closes below, in time.
		lw.shorten(g.opts.ShutdownGrace)
		// Close waits for the calls in flight; end them first, and let
		// their answers be written before it (the SDK drops a response
		// once Close began).
		g.calls.cancelSession(sid, ErrShutdown)
		g.waitAnswers(owed, "the stdio session")
		_ = ss.Close()
	})
	defer stop()
	waited := make(chan error, 1)
	go func() { waited <- ss.Wait() }()
	select {
	case err = <-waited:
	case <-lw.stuck:
		// The agent stopped reading: end the session (its calls cancelled;
		// their answers cannot be written) rather than wait on it.
		if lw.shortened() {
			g.logStoppedReadingAtShutdown()
		} else {
			g.log.Error("ending the stdio session: the agent stopped reading its stdin (toolgate's stdout)", "limit", g.opts.StdioWriteTimeout)
		}
		g.calls.cancelSession(sid, errAgentNotReading)
		// Close no longer waits on a write (they fail at once now); the
		// goroutine above returns with it.
		_ = ss.Close()
		if werr := <-waited; werr != nil {
			g.log.Debug("the ended stdio session's wait", "err", werr)
		}
		return errAgentNotReading
	}
	if ctx.Err() != nil {
		if lw.failed() {
			g.logStoppedReadingAtShutdown()
		}
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// logStoppedReadingAtShutdown says that a stdio session ended at shutdown
// with a write to its agent cut off at the shutdown grace
// (lockedWriter.shorten): a warning, as the stop is a clean one all the
// same (serve exits 0).
func (g *Gateway) logStoppedReadingAtShutdown() {
	g.log.Warn("ending the stdio session at shutdown: the agent stopped reading its stdin (toolgate's stdout); a write to it did not complete within the shutdown grace", "grace", g.opts.ShutdownGrace)
}

// sdkLimitSlack is added to the SDK's own message size limits, which the
// guards in front of it (stdioguard.go, upstreamguard.go, the HTTP
// capture) enforce first: they only pass on messages within the
// configured limits, and replace the others with small errors.
const sdkLimitSlack = 64 << 10

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }
