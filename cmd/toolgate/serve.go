package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/audit"
	"toolgate/internal/config"
	"toolgate/internal/execpages"
	"toolgate/internal/gate"
	"toolgate/internal/gateway"
	"toolgate/internal/gctune"
	"toolgate/internal/httpserve"
	"toolgate/internal/policy"
	"toolgate/internal/policystore"
	"toolgate/internal/procs"
	"toolgate/internal/seal"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/telemetry"
)

type serveFlags struct {
	config         string
	dev            bool
	stdio          bool
	insecureNoAuth bool
	readyFile      string
	logLevel       string
	watch          bool
}

// parseServeFlags parses serve's arguments. It returns ok false (and no
// error) for -h, whose help goes to stdout; a usage error prints the help
// to stderr.
func parseServeFlags(args []string, stdout, stderr io.Writer) (f serveFlags, ok bool, err error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "path to the YAML config (required)")
	fs.BoolVar(&f.dev, "dev", false, "mint throwaway agent and approver tokens and print them to stderr")
	fs.BoolVar(&f.stdio, "stdio", false, "serve one agent over stdin/stdout instead of HTTP; stdout carries only the protocol")
	fs.BoolVar(&f.insecureNoAuth, "insecure-no-auth", false, "accept agents on /mcp without a token (loopback listeners only)")
	fs.StringVar(&f.readyFile, "ready-file", "", "write the bound addresses as JSON to this file once listening")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug|info|warn|error")
	fs.BoolVar(&f.watch, "watch", false, "reload the policy when the config file changes (checked every second), as on SIGHUP")
	usage := func(w io.Writer) {
		fmt.Fprint(w, "Usage: toolgate serve --config FILE [--dev] [--stdio] [--insecure-no-auth]\n"+
			"                      [--ready-file F] [--log-level L] [--watch]\n\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
		fmt.Fprint(w, "\n\"toolgate policy check [--dev] [--stdio] [--insecure-no-auth] FILE\" runs the same checks without starting.\n"+
			"Exit status: 0 stopped by a signal (or the --stdio client left), 1 failure, 2 usage or invalid config.\n")
	}
	fs.Usage = func() {} // printed below: to stdout when asked for, else to stderr
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return f, false, nil
		}
		usage(stderr)
		return f, false, fmt.Errorf("%w: %w", errUsage, err)
	}
	if strings.TrimSpace(f.config) == "" || fs.NArg() > 0 {
		usage(stderr)
		return f, false, fmt.Errorf("%w: serve needs --config FILE and no positional arguments", errUsage)
	}
	return f, true, nil
}

// serveIO is what serve talks to besides the config: the standard streams,
// the system, and (for tests) a callback with the bound addresses once
// every listener is open.
type serveIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	sys            system
	onReady        func(ready map[string]string)
	gc             *gctune.Settings // what serve applied; nil in tests
	procs          bool             // follow the process's CPU with GOMAXPROCS (procs.Follow); false in tests
	// exit ends the process when a shutdown overruns shutdownBound
	// (shutdownWatch); nil in tests, which arm no bound.
	exit func(code int)
	// releaseExec unmaps the executable's pages once start-up is over and
	// whenever the process turns quiet (execpages.WhenQuiet, releaseIdle);
	// false in tests.
	releaseExec bool
}

func serve(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	gc := gctune.Apply(os.Getenv) // GOGC and GOMEMLIMIT from the environment win
	// GOMAXPROCS from the environment wins, as GOGC does.
	return serveWith(ctx, args, serveIO{stdin: stdin, stdout: stdout, stderr: stderr, sys: osSystem(), gc: &gc,
		procs: os.Getenv("GOMAXPROCS") == "", releaseExec: true, exit: os.Exit})
}

// serveWith runs `toolgate serve` until ctx ends, the stdio client leaves
// or serving fails. It checks everything first (preflight) and then starts
// the parts in order, each undone on every path by a teardown (last
// started, first stopped), so an early return leaves nothing running: no
// goroutine, listener, child process or open store.
func serveWith(ctx context.Context, args []string, sio serveIO) error {
	f, ok, err := parseServeFlags(args, sio.stdout, sio.stderr)
	if !ok {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", errUsage, f.logLevel)
	}
	log := slog.New(slog.NewTextHandler(sio.stderr, &slog.HandlerOptions{Level: level}))
	if gc := sio.gc; gc != nil {
		log.Debug("garbage collector", "gogc", gc.GCPercent, "gogc_from", gc.GCPercentSource,
			"memory_limit_bytes", gc.MemoryLimit, "memory_limit_from", gc.MemoryLimitSource)
	}

	// Registered before the teardown, so it still bounds the teardown.
	watch := &shutdownWatch{}
	defer watch.arm(ctx, shutdownBound, log, sio.exit)()

	cfg, err := config.LoadFile(f.config, sio.sys.lookupEnv)
	if err != nil {
		return fmt.Errorf("%w: %w", errConfig, err) // err names the file
	}
	files := sio.sys.files(cfg) // each token and secret file read once, checked as read
	for _, w := range serveWarnings(cfg, f, sio.sys, files) {
		log.Warn(w)
	}
	p, err := preflight(cfg, f, sio.sys, files)
	if err != nil {
		// Each problem names the file, and the line of its key where the
		// file has one, as policy check prints it.
		var lines []error
		for _, l := range preflightLines(f.config, err) {
			lines = append(lines, errors.New(l))
		}
		return fmt.Errorf("%w: %w", errConfig, errors.Join(lines...))
	}
	for _, d := range p.dropped {
		log.Warn("variable not passed to the upstream: its value is one of toolgate's secrets", "variable", d)
	}
	var devLines []string
	if f.dev {
		devLines = mintDevTokens(p.creds, p.mcpAddr != "", p.adminAddr != "")
	}

	td := teardown{at: watch.at}
	defer td.run()
	// SIGHUP reloads the policy (reload.go) and must not end the process.
	hup := notifyHUP()
	td.add(func() { signal.Stop(hup) })
	lns, err := bindListeners(ctx, p, log)
	if err != nil {
		return err
	}
	td.add(lns.close)
	c, err := startCore(ctx, cfg, f, p, log, &td)
	if err != nil {
		return err
	}
	watch.inFlight(func() []any {
		return []any{"calls_in_flight", c.gw.CallsInFlight(), "approvals_in_dispatch", c.gate.Dispatching(), "gateway_close_step", c.gw.CloseStep()}
	})
	if err := lns.attach(ctx, cfg, f, p, c, log); err != nil {
		return err
	}
	for _, l := range lns.list {
		attrs := []any{"listener", l.name, "url", l.url, "max_conns", l.opts.MaxConns}
		if l.name == "mcp" {
			// config, nofile or memory (caps.go).
			attrs = append(attrs, "max_conns_from", p.caps.mcpFrom)
		}
		log.Info("listening", attrs...)
	}
	for _, l := range devLines {
		fmt.Fprintln(sio.stderr, l)
	}
	ready := lns.ready()
	if f.readyFile != "" {
		if err := writeReadyFile(f.readyFile, ready); err != nil {
			return err
		}
	}
	if sio.onReady != nil {
		sio.onReady(ready)
	}
	return runServe(ctx, cfg, f, c, lns, hup, log, sio, watch)
}

// teardown holds the undo steps of what serve started; run runs them last
// first. It is not safe for concurrent use.
type teardown struct {
	undo []func()
	at   func(step string) // the shutdown watch's step (shutdownWatch.at)
}

func (t *teardown) add(f func()) { t.undo = append(t.undo, f) }

// step adds an undo step the shutdown watch names while it runs, so a
// shutdown that overran its bound says which one it was stuck in.
func (t *teardown) step(name string, f func()) {
	t.add(func() {
		if t.at != nil {
			t.at(name)
		}
		f()
	})
}

func (t *teardown) run() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.undo = nil
}

// core is what serve runs on: the store, the gate, the gateway and the
// policy service; startCore registers their undo steps.
type core struct {
	db       *sqlstore.DB
	watch    func(ctx context.Context, g *gate.Gate, changed, policy func())
	gate     *gate.Gate
	gw       *gateway.Gateway
	load     *procs.Load // the MCP requests in flight, for procs.Follow
	holder   *policy.Holder
	cat      *lazyCatalog         // the gateway's tool catalog, for the gate and explain
	policies *policystore.Service // nil with policy.source: file
	reg      *prometheus.Registry
	metrics  *telemetry.Metrics
	// tokens are the config's tokens in force (plan.configured), which a
	// policy reload compares the file's with.
	tokens map[string]config.Credential
	// grantsOff is grants.enabled: false of the config in force (at start,
	// then each reload's), read by the gate on every use.
	grantsOff atomic.Bool
	// notes are the notification outbox and Slack interactions (zero when
	// notify.channels is empty).
	notes notifications
	// events wakes the admin API's event streams (and so the web inbox) on
	// every change the store's change feed reports.
	events api.Broadcast
	// trail is the audit trail: the gate's Recorder and the chainer.
	trail *audit.Trail
}

// startCore opens the store, tracing, the gate, the policy store (with
// policy.source: store) and the upstreams, adding each undo step to td as
// it goes. On error what was started is undone by td.
func startCore(ctx context.Context, cfg config.Config, f serveFlags, p plan, log *slog.Logger, td *teardown) (*core, error) {
	db, watch, err := openStore(ctx, cfg.Storage, log)
	if err != nil && cfg.Storage.Driver == sqlstore.DriverPostgres && errors.Is(err, store.ErrUnavailable) {
		return nil, fmt.Errorf("open store: %w (is Postgres running at the address storage.dsn names, and does the database exist? docs/deploy.md)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	td.step("closing the store", func() { _ = db.Close() })
	tp, shutdownTracing, err := telemetry.NewTracerProvider(ctx, os.Getenv, buildVersion().Version)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	td.step("flushing the traces", func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = shutdownTracing(sctx)
	})
	c := &core{db: db, watch: watch, reg: prometheus.NewRegistry(), tokens: p.configured}
	c.metrics = telemetry.NewMetrics(c.reg)
	deliveryMetrics := telemetry.NewDeliveryMetrics(c.reg)
	c.trail = audit.New(db, &audit.Options{
		Logger: log, QueueSize: cfg.Audit.QueueSize, Poll: cfg.Audit.Poll, Retention: cfg.Audit.Retention,
		Redaction: p.redaction, Metrics: telemetry.NewAuditMetrics(c.reg),
		Settled: db.Settled, // c.watch runs the SQLite watch it reads (openStore)
	})
	cat := &lazyCatalog{}
	c.cat = cat
	startPolicy := cfg.Policy
	c.holder = policy.NewHolder(&startPolicy) // swapped by reloadPolicy
	c.grantsOff.Store(!cfg.Grants.Enabled)    // and so is this
	// With policy.source: store, the store's current revision replaces it.
	if c.policies, err = startPolicyStore(ctx, db, cfg, c.holder, f.dev, log); err != nil {
		return nil, err
	}
	key, err := gatewayKey(ctx, db)
	if err != nil {
		return nil, err
	}
	var policies gate.PolicyFollower // policy.source: file has nothing newer to read
	if c.policies != nil {
		policies = c.policies // the consume of a held call checks the newest revision in its transaction
	}
	c.gate = gate.New(db, c.holder, &gate.Options{
		Logger:                 log,
		KeepAlive:              cfg.Approvals.KeepAlive,
		SweepInterval:          cfg.Approvals.SweepInterval,
		Watched:                true, // c.watch reports every change (openStore)
		Settled:                db.Settled,
		Lease:                  cfg.Approvals.Lease,
		RetryWait:              max(cfg.Approvals.RetryWait, time.Nanosecond), // 0 answers at once
		MaxPendingPerPrincipal: cfg.Approvals.MaxPendingPerPrincipal,
		MaxPending:             cfg.Approvals.MaxPending,
		Key:                    key,
		ResultMaxBytes:         int(cfg.Approvals.ResultMaxBytes),
		ResultTTL:              cfg.Approvals.ResultTTL,
		Redaction:              p.redaction,
		Catalog:                cat,
		Metrics:                c.metrics,
		Tracer:                 tp.Tracer("toolgate"),
		ServerExists: func(name string) bool {
			_, ok := cfg.Servers[name]
			return ok
		},
		SessionApproval:      cfg.Policy.Approval,
		SessionApprovalFunc:  func() policy.Approval { return c.holder.Load().Approval },
		PolicyRequestTimeout: cfg.Sessions.PolicyRequestTimeout,
		MaxPolicyRequests:    cfg.Sessions.MaxPendingPolicyRequests,
		PublicURL:            cfg.PublicURL(),
		Annotations:          cat.annotations(cfg),
		Recorder:             c.trail,
		Reviewers:            reviewers(cfg, p.creds, f.dev),
		Retention:            store.Retention(cfg.Retention),
		GrantMaxTTL:          cfg.Grants.MaxTTL,
		GrantsDisabledFunc:   c.grantsOff.Load, // follows a reload (reloadPolicy)
		Policies:             policies,
	})
	// The id approvals show prints as "Held by" for the calls this process
	// holds (random per process).
	log.InfoContext(ctx, "gateway instance", "instance", c.gate.Instance())
	if c.notes, err = newNotifications(cfg, p.notify, db, c.gate, c.holder, deliveryMetrics, log); err != nil {
		return nil, err
	}
	gwOpts := &gateway.Options{Logger: log, Version: buildVersion().Version, Sessions: c.gate,
		MaxHold: cfg.Approvals.MaxHold, Tasks: c.gate, MRTR: c.gate,
		HealthInterval:    cfg.Upstreams.HealthInterval,
		MaxResultBytes:    int(cfg.Limits.MaxResultBytes),
		MaxRequestBytes:   int(cfg.Limits.MaxRequestBytes),
		StdioWriteTimeout: cfg.Limits.StdioWriteTimeout}
	c.load = &procs.Load{}
	gwOpts.Load = c.load
	if cfg.Sessions.RequestTool {
		gwOpts.PolicyRequests = c.gate
	}
	if c.gw, err = gateway.New(ctx, p.upstreams, c.gate, gwOpts); err != nil {
		return nil, fmt.Errorf("start upstreams: %w", err)
	}
	td.step("closing the upstreams", func() { _ = c.gw.Close() })
	cat.gw = c.gw
	// A new policy may hide or show tools (policy.list_denied): tell the
	// MCP sessions whose lists changed.
	// Rules that never decide a call are logged for each revision put in
	// force, as policy check warns about them.
	shadows := &config.ShadowLog{Log: log}
	shadows.Policy(ctx, c.holder.Load())
	c.holder.OnStore(func() {
		c.gw.SessionsChanged()
		shadows.Policy(ctx, c.holder.Load())
	})
	return c, nil
}

// runServe runs everything that serve keeps running, in one group, until
// ctx ends, the stdio client leaves, or one part fails; then every part
// stops and runServe waits for all of them.
func runServe(ctx context.Context, cfg config.Config, f serveFlags, c *core, lns *listeners, hup <-chan os.Signal, log *slog.Logger, sio serveIO, watch *shutdownWatch) error {
	signalled := ctx // ends on SIGINT or SIGTERM (main's NotifyContext)
	// On a signal the gate is stopped before any part sees the group's ctx
	// end: a held call that the stdio session's end cancels is then
	// answered "the gateway is shutting down", not "the caller went away".
	ctx, cancel := context.WithCancel(context.WithoutCancel(signalled))
	defer cancel()
	defer context.AfterFunc(signalled, func() { c.gate.Stop(); cancel() })()
	eg, ctx := errgroup.WithContext(ctx)
	for _, l := range lns.list {
		eg.Go(func() error {
			if err := httpserve.Serve(ctx, l.ln, l.h, &l.opts); err != nil {
				return fmt.Errorf("listen.%s: %w", l.name, err)
			}
			return nil
		})
	}
	eg.Go(func() error {
		// On shutdown, end held calls first (their requests stay pending and
		// expire at their stored deadline), so the listeners drain quickly;
		// Close waits (up to its ShutdownGrace, as long as the listeners
		// wait for requests in flight) for their answers to be written
		// before it closes the agent sessions.
		<-ctx.Done()
		watch.at("answering held calls, closing the listeners, agent sessions and upstreams")
		if signalled.Err() != nil {
			// Said at once: the upstreams' grace can take seconds.
			log.Info("stopping: held calls are answered now (their approvals stay pending), then the upstreams stop")
		}
		c.gate.Stop()
		return c.gw.Close()
	})
	eg.Go(func() error { return c.gate.Run(ctx) })
	if gc := sio.gc; gc != nil {
		eg.Go(func() error { gctune.Tune(ctx, *gc); return nil })
	}
	if sio.releaseExec {
		act := execpages.Activity{Seen: c.load.Seen, CPU: processCPU(), Collections: gcCycles()}
		if gc := sio.gc; gc != nil && gc.GCPercentSource == "default" {
			// The heap too, unless the operator manages the collector
			// (GOGC set), as gctune does.
			act.Collect = debug.FreeOSMemory
		}
		eg.Go(func() error {
			execpages.WhenQuiet(ctx, execpages.StartupTail, act, releaseIdle(log))
			return nil
		})
	}
	if sio.procs {
		eg.Go(func() error { procs.Follow(ctx, c.load, runtime.GOMAXPROCS(0), setProcs, processCPU()); return nil })
	}
	eg.Go(func() error {
		return reloadPolicy(ctx, f.config, cfg, c.holder, hup, f.watch, f.dev, log, c.metrics, c.tokens, sio.sys.files,
			func(g config.Grants) { c.grantsOff.Store(!g.Enabled) })
	})
	eg.Go(func() error {
		c.watch(ctx, c.gate, func() {
			c.notes.wake()
			c.events.Notify()
			c.trail.Wake()
		}, func() {
			if c.policies != nil {
				c.policies.Wake() // another instance's revision: in force before the next poll
			}
		})
		return nil
	})
	eg.Go(func() error { return c.notes.run(ctx) })
	if c.policies != nil {
		eg.Go(func() error { c.policies.Follow(ctx); return nil })
	}
	if f.stdio {
		pr := cfg.StdioPrincipal()
		eg.Go(func() error {
			out, outDone := stdioOut(sio.stdout, sio.stderr)
			// The pipe goes back blocking on every way out (outDone runs
			// once): it is the agent's (or a shell's), shared with whoever
			// writes to it next. The bound's exit runs it too.
			defer outDone()
			watch.beforeExit(outDone)
			err := c.gw.ServeStdio(ctx, io.NopCloser(sio.stdin), out, pr)
			outDone()
			c.gate.Stop()
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("stdio: %w", err)
			}
			return errStdioDone
		})
	}
	err := runWithTrail(ctx, c.trail, func() error {
		err := eg.Wait()
		watch.at("flushing the audit trail")
		return err
	})
	if errors.Is(err, errStdioDone) {
		err = nil
	}
	if signalled.Err() != nil {
		log.Info("stopped")
	}
	return err
}

// setProcs is procs.Follow's setter: one P, or the runtime's default back
// (which also resumes the runtime's own updates of it from the CPU limit).
func setProcs(n int) {
	if n == 1 {
		runtime.GOMAXPROCS(1)
		return
	}
	runtime.SetDefaultGOMAXPROCS()
}

// trailRunner is the audit trail as runWithTrail runs it (*audit.Trail).
type trailRunner interface {
	Run(ctx context.Context) error
}

// runWithTrail runs trail alongside wait (the serve group's Wait) and
// stops it only once wait has returned, so that its last flush comes after
// every part that records calls has stopped: a call admitted while the
// listeners shut down queues its audit record before that flush, not
// after it, where nothing would read it. ctx's values are kept, its
// cancellation is not. It returns wait's error, else trail's.
func runWithTrail(ctx context.Context, trail trailRunner, wait func() error) error {
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- trail.Run(tctx) }()
	err := wait()
	stop()
	if terr := <-done; err == nil {
		err = terr
	}
	return err
}

var errStdioDone = errors.New("stdio client closed")

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// stdioOut is the agent's side of serve --stdio's stdout (w) and what to
// call once the session ended: for the process's own stdout, a copy whose
// writes take a deadline when it is a pipe or socket
// (gateway.StdioOutput), unless logs (serve's stderr) is the same pipe;
// for any other writer (in-process tests), w, never closed.
func stdioOut(w, logs io.Writer) (io.WriteCloser, func()) {
	if f, ok := w.(*os.File); ok {
		lf, _ := logs.(*os.File)
		return gateway.StdioOutput(f, lf)
	}
	return nopWriteCloser{w}, func() {}
}

func writeReadyFile(path string, ready map[string]string) error {
	b, err := json.Marshal(ready)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return os.Rename(tmp, path)
}

// lazyCatalog lets the gate look up tool digests in the gateway, which is
// built after the gate.
type lazyCatalog struct{ gw *gateway.Gateway }

func (c *lazyCatalog) ToolDigest(server, tool string) (string, bool) {
	if c.gw == nil {
		return "", false
	}
	return c.gw.ToolDigest(server, tool)
}

// ItemDigest answers for prompts and resources too (gate.ItemCatalog).
func (c *lazyCatalog) ItemDigest(kind, server, name string) (string, bool) {
	if c.gw == nil {
		return "", false
	}
	return c.gw.ItemDigest(kind, server, name)
}

// openStore opens the configured database and returns how to watch it for
// changes made by other processes or instances: the store's change feed,
// read when SQLite's PRAGMA data_version moves, or on Postgres after each
// reconnect and every storage.poll, with NOTIFY waking a held call at once
// (sqlstore.DB.Watch); the watch wakes the gate's held calls and calls
// changed, and calls policy when a new deployment policy revision may have
// been committed.
func openStore(ctx context.Context, cfg config.Storage, log *slog.Logger) (*sqlstore.DB, func(ctx context.Context, g *gate.Gate, changed, policy func()), error) {
	db, err := sqlstore.Open(ctx, sqlstore.Config{
		Driver: cfg.Driver, Path: cfg.Path, DSN: cfg.DSN, MaxConns: cfg.MaxConns, Poll: cfg.Poll, Logger: log,
	})
	if err != nil {
		return nil, nil, err
	}
	// Which store this gateway uses (never the DSN: it may hold a password)
	// and whether it is new: no schema was found (sqlstore.DB.Created; a
	// SQLite file that did not exist or one a failed first start left
	// empty, a Postgres database toolgate never migrated). A relative
	// SQLite path is taken from the working directory, so a start from
	// elsewhere makes a new, empty store (storageWhereWarning says so
	// first); on Postgres a DSN naming another database does the same.
	msg := "store opened; schema migrations are applied"
	if db.Created() {
		msg = "new, empty store created; schema migrations are applied"
	}
	if db.Driver() == "postgres" {
		log.InfoContext(ctx, msg, "driver", db.Driver())
	} else {
		log.InfoContext(ctx, msg, "driver", db.Driver(), "path", absPath(cfg.Path))
	}
	return db, func(ctx context.Context, g *gate.Gate, changed, policy func()) {
		db.WatchEvents(ctx, sqlstore.WatchFuncs{
			Changed: func(id approval.ID) {
				if id == "" {
					g.WakeAll() // anything may have changed
					changed()
				} else {
					g.Wake(id)
				}
			},
			Appended: func() {
				g.Changed() // a new request: the sweeper's next due time may be earlier
				changed()   // new events for the notification outbox and the audit chain
			},
			Touched: g.Touched, // SQLite: a commit the log may not show (a lease's release)
			Policy:  policy,
		})
	}, nil
}

// auditAPI serves GET /v1/audit: the trail chains what is waiting, the
// store reads the chain.
type auditAPI struct {
	*audit.Trail
	*sqlstore.DB
}

// gatewayKeySecret names the store's shared secret behind task ids,
// multi round-trip request states and sealed task arguments.
const gatewayKeySecret = "gateway-key"

// gatewayKey returns the key every instance sharing the store uses: the
// first instance to start generates it and stores it (store.Secret), the
// others read it.
func gatewayKey(ctx context.Context, db interface {
	Secret(ctx context.Context, name string, value []byte, now time.Time) ([]byte, error)
}) (seal.Key, error) {
	fresh, err := seal.Generate()
	if err != nil {
		return seal.Key{}, fmt.Errorf("generate the gateway key: %w", err)
	}
	secret, err := db.Secret(ctx, gatewayKeySecret, fresh, time.Now())
	if err != nil {
		return seal.Key{}, fmt.Errorf("read the gateway key from the store: %w", err)
	}
	key, err := seal.NewKey(secret)
	if err != nil {
		return seal.Key{}, fmt.Errorf("the gateway key in the store: %w", err)
	}
	return key, nil
}
