package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/gate"
	"toolgate/internal/gateway"
	"toolgate/internal/policy"
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

func serve(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "path to the YAML config (required)")
	fs.BoolVar(&f.dev, "dev", false, "mint throwaway agent and approver tokens and print them to stderr")
	fs.BoolVar(&f.stdio, "stdio", false, "serve one agent over stdin/stdout instead of HTTP; stdout carries only the protocol")
	fs.BoolVar(&f.insecureNoAuth, "insecure-no-auth", false, "accept agents on /mcp without a token (loopback listeners only)")
	fs.StringVar(&f.readyFile, "ready-file", "", "write the bound addresses as JSON to this file once listening")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug|info|warn|error")
	fs.BoolVar(&f.watch, "watch", false, "reload the policy when the config file changes (checked every second), as on SIGHUP")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if f.config == "" || fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: serve needs --config FILE and no positional arguments", errUsage)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg, err := config.LoadFile(f.config, os.LookupEnv)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errUsage, f.config, err)
	}
	// SIGHUP reloads the policy (reload.go) and must not end the process.
	hup := notifyHUP()
	defer signal.Stop(hup)
	for _, w := range cfg.Warnings() {
		if f.dev && strings.HasPrefix(w, "no approver has role") {
			continue // --dev mints an admin token below
		}
		log.Warn(w)
	}
	if err := cfg.CheckTokenFiles(os.Geteuid()); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	creds, err := cfg.Tokens(os.LookupEnv, os.ReadFile)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	adminAddr := cfg.Listen.Admin
	if f.stdio && !cfg.Listen.AdminSet {
		adminAddr = "" // stdio mode opens no admin port unless configured
	}
	// A Unix admin socket's directory is checked now and on every connection.
	adminListen := &api.ListenConfig{Logger: log}
	if err := adminListen.Check(adminAddr); err != nil {
		return fmt.Errorf("%w: listen.admin: %v", errUsage, err)
	}
	mcpAddr := cfg.Listen.MCP
	if f.stdio {
		mcpAddr = ""
	}
	var devLines []string
	if f.dev {
		devLines, err = mintDevTokens(creds, mcpAddr != "", adminAddr != "")
		if err != nil {
			return err
		}
	}
	var devApprovers []config.Approver
	if f.dev {
		devApprovers = append(devApprovers, config.Approver{ID: "dev-approver", Roles: []string{config.RoleAdmin}})
	}
	if bad := cfg.Unreviewable(devApprovers...); len(bad) > 0 && !cfg.Approvals.AllowNoApprovers {
		return fmt.Errorf("%w: no configured approver could review %s; add approvers (roles: [approver]) or set approvals.allow_no_approvers: true", errUsage, strings.Join(bad, ", "))
	}
	if mcpAddr != "" && !f.insecureNoAuth && !hasKind(creds, "agent") {
		return fmt.Errorf("%w: no agent tokens configured: add agents: with token_env/token_file/token_sha256, or run with --dev", errUsage)
	}
	if adminAddr != "" && !hasKind(creds, "human") {
		return fmt.Errorf("%w: no approver tokens configured: add approvers: with token_env/token_file/token_sha256, or run with --dev", errUsage)
	}
	if f.insecureNoAuth && mcpAddr != "" && !isLoopback(mcpAddr) {
		return fmt.Errorf("%w: --insecure-no-auth needs a loopback listen.mcp address, got %q", errUsage, mcpAddr)
	}

	db, watch, err := openStore(ctx, cfg.Storage, log)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer db.Close()

	redaction, err := cfg.Redaction()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	tp, shutdownTracing, err := telemetry.NewTracerProvider(ctx, os.Getenv, version)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = shutdownTracing(sctx)
	}()
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)
	deliveryMetrics := telemetry.NewDeliveryMetrics(reg)
	cat := &lazyCatalog{}
	startPolicy := cfg.Policy
	holder := policy.NewHolder(&startPolicy) // swapped by reloadPolicy
	// With policy.source: store, the store's current revision replaces it.
	policies, err := startPolicyStore(ctx, db, cfg, holder, f.dev, log)
	if err != nil {
		return err
	}
	g := gate.New(db, holder, &gate.Options{
		Logger:                 log,
		KeepAlive:              cfg.Approvals.KeepAlive,
		SweepInterval:          cfg.Approvals.SweepInterval,
		Lease:                  cfg.Approvals.Lease,
		RetryWait:              max(cfg.Approvals.RetryWait, time.Nanosecond), // 0 answers at once
		MaxPendingPerPrincipal: cfg.Approvals.MaxPendingPerPrincipal,
		MaxPending:             cfg.Approvals.MaxPending,
		Redaction:              redaction,
		Catalog:                cat,
		Metrics:                metrics,
		Tracer:                 tp.Tracer("toolgate"),
		ServerExists: func(name string) bool {
			_, ok := cfg.Servers[name]
			return ok
		},
		SessionApproval:      cfg.Policy.Approval,
		SessionApprovalFunc:  func() policy.Approval { return holder.Load().Approval },
		PolicyRequestTimeout: cfg.Sessions.PolicyRequestTimeout,
		MaxPolicyRequests:    cfg.Sessions.MaxPendingPolicyRequests,
		Annotations:          cat.annotations(cfg),
	})

	notes, err := newNotifications(cfg, db, g, holder, deliveryMetrics, log)
	if err != nil {
		return err
	}

	gwOpts := &gateway.Options{Logger: log, Version: version, Sessions: g}
	if cfg.Sessions.RequestTool {
		gwOpts.PolicyRequests = g
	}
	gw, err := gateway.New(ctx, gatewayServers(cfg), g, gwOpts)
	if err != nil {
		return fmt.Errorf("start upstreams: %w", err)
	}
	defer gw.Close()
	cat.gw = gw
	// A new policy may hide or show tools (policy.list_denied): tell the
	// MCP sessions whose lists changed.
	holder.OnStore(gw.SessionsChanged)

	eg, ctx := errgroup.WithContext(ctx)
	ready := map[string]string{}
	if mcpAddr != "" {
		ln, err := net.Listen("tcp", mcpAddr)
		if err != nil {
			return fmt.Errorf("listen.mcp: %w", err)
		}
		var auth gateway.Authenticator
		if !f.insecureNoAuth {
			auth = agentAuth(ctx, creds, db)
		}
		mcpH, err := gw.Handler(auth, &gateway.HTTPOptions{InsecureNoAuth: f.insecureNoAuth, ListenAddr: ln.Addr().String()})
		if err != nil {
			ln.Close()
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		// Next to /mcp: the agents' own session API (child sessions,
		// authenticated by a session token).
		mux := http.NewServeMux()
		mux.Handle("/", mcpH)
		mux.Handle("/v1/", api.NewAgentSessions(g, api.AgentAuthenticator(auth), &api.Options{Logger: log, SessionsChanged: gw.SessionsChanged}))
		h := http.Handler(mux)
		ready["mcp"] = "http://" + ln.Addr().String() + "/mcp"
		eg.Go(func() error { return serveHTTP(ctx, ln, h, g) })
	}
	if adminAddr != "" {
		ln, err := adminListen.Listen(ctx, adminAddr)
		if errors.Is(err, api.ErrUnsafeSocketDir) {
			return fmt.Errorf("%w: listen.admin: %v", errUsage, err)
		} else if err != nil {
			return fmt.Errorf("listen.admin: %w", err)
		}
		h := api.New(g, approverAuth(creds), &api.Options{
			Logger: log, Metrics: telemetry.Handler(reg), Sessions: g, SessionsChanged: gw.SessionsChanged, Policies: policiesAPI(policies),
			Explain: &liveExplainer{holder: holder, cfg: cfg, ann: cat.annotations(cfg)},
			Ready: func(ctx context.Context) error {
				if err := g.Ready(ctx); err != nil {
					return err
				}
				return gw.Ready()
			},
		})
		ready["admin"] = adminAddr
		if ln.Addr().Network() == "tcp" {
			ready["admin"] = "http://" + ln.Addr().String()
		}
		eg.Go(func() error { return serveHTTP(ctx, ln, notes.handler(h), g) })
	}
	eg.Go(func() error {
		// On shutdown, end held calls first (their requests stay pending and
		// expire at their stored deadline), so the listeners drain quickly.
		<-ctx.Done()
		g.Stop()
		return gw.Close()
	})
	eg.Go(func() error { return g.Run(ctx) })
	eg.Go(func() error {
		return reloadPolicy(ctx, f.config, cfg, holder, hup, f.watch, f.dev, log, metrics)
	})
	eg.Go(func() error { watch(ctx, g, notes.wake); return nil })
	eg.Go(func() error { return notes.run(ctx) })
	if policies != nil {
		eg.Go(func() error { policies.Follow(ctx); return nil })
	}

	for _, k := range []string{"mcp", "admin"} {
		if v, ok := ready[k]; ok {
			log.Info("listening", "listener", k, "url", v)
		}
	}
	for _, l := range devLines {
		fmt.Fprintln(stderr, l)
	}
	if f.readyFile != "" {
		if err := writeReadyFile(f.readyFile, ready); err != nil {
			return err
		}
	}
	if f.stdio {
		p := cfg.StdioPrincipal()
		eg.Go(func() error {
			err := gw.ServeStdio(ctx, io.NopCloser(stdin), nopWriteCloser{stdout}, p)
			g.Stop()
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("stdio: %w", err)
			}
			return errStdioDone
		})
	}
	err = eg.Wait()
	if errors.Is(err, errStdioDone) {
		err = nil
	}
	return err
}

var errStdioDone = errors.New("stdio client closed")

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveHTTP serves h on ln until ctx ends, then shuts down gracefully. There
// is no WriteTimeout: held calls stream for as long as a person takes.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, g *gate.Gate) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	g.Stop()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	return nil
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

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func hasKind(creds map[string]config.Credential, kind string) bool {
	for _, c := range creds {
		if c.Principal.Kind == kind {
			return true
		}
	}
	return false
}

// mintDevTokens adds throwaway tokens for the listeners that need them and
// returns the lines to print.
func mintDevTokens(creds map[string]config.Credential, agent, admin bool) ([]string, error) {
	var lines []string
	add := func(c config.Credential) (string, error) {
		tok := "tg_dev_" + rand.Text()
		sum := sha256.Sum256([]byte(tok))
		creds[hex.EncodeToString(sum[:])] = c
		return tok, nil
	}
	lines = append(lines, "toolgate --dev: throwaway tokens, valid until this process exits:")
	if agent {
		tok, err := add(config.Credential{Principal: approval.Principal{ID: "dev-agent", Kind: "agent"}})
		if err != nil {
			return nil, err
		}
		lines = append(lines, "  agent token (Authorization: Bearer on /mcp):  "+tok)
	}
	if admin {
		tok, err := add(config.Credential{Principal: approval.Principal{ID: "dev-approver", Kind: "human"}, Roles: []string{"admin"}})
		if err != nil {
			return nil, err
		}
		lines = append(lines, "  approver token (TOOLGATE_TOKEN for the CLI):  "+tok)
	}
	return lines, nil
}

func lookup(creds map[string]config.Credential, token string) (config.Credential, bool) {
	if token == "" {
		return config.Credential{}, false
	}
	sum := sha256.Sum256([]byte(token))
	c, ok := creds[hex.EncodeToString(sum[:])]
	return c, ok
}

// sessionLookupTimeout bounds the store lookup of a session token.
const sessionLookupTimeout = 5 * time.Second

// agentAuth authenticates agents by their configured tokens and agent
// sessions by their session tokens (looked up by hash in the store on every
// request, so a revocation anywhere is seen at once). A store error
// rejects the token (fail closed).
func agentAuth(ctx context.Context, creds map[string]config.Credential, sessions store.SessionStore) gateway.Authenticator {
	return func(token string) (approval.Principal, bool) {
		if c, ok := lookup(creds, token); ok {
			if c.Principal.Kind != "agent" {
				return approval.Principal{}, false
			}
			return c.Principal, true
		}
		if sessions == nil || !strings.HasPrefix(token, gate.TokenPrefix) {
			return approval.Principal{}, false
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionLookupTimeout)
		defer cancel()
		s, err := sessions.SessionByToken(lctx, gate.HashToken(token))
		if err != nil {
			return approval.Principal{}, false
		}
		// A revoked session still authenticates, so its calls get an isError
		// result saying "revoked" that the model can read (the gate refuses
		// them), rather than a bare 401.
		return approval.Principal{ID: s.Principal, Kind: "agent", Tenant: s.Tenant, OnBehalfOf: s.OnBehalfOf, SessionID: string(s.ID)}, true
	}
}

func approverAuth(creds map[string]config.Credential) api.Authenticator {
	return func(token string) (approval.Principal, []string, bool) {
		c, ok := lookup(creds, token)
		if !ok || c.Principal.Kind != "human" {
			return approval.Principal{}, nil, false
		}
		return c.Principal, slices.Clone(c.Roles), true
	}
}

func gatewayServers(cfg config.Config) []gateway.ServerConfig {
	names := make([]string, 0, len(cfg.Servers))
	for n := range cfg.Servers {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]gateway.ServerConfig, 0, len(names))
	for _, n := range names {
		s := cfg.Servers[n]
		dir := s.Dir
		out = append(out, gateway.ServerConfig{
			Name: n, Command: s.Command, Args: s.Args, Env: s.Env, Dir: dir,
			URL: s.URL, Headers: s.Headers, CallTimeout: s.CallTimeout,
			Unprefixed: s.ToolPrefix != nil && !*s.ToolPrefix,
			Sessions:   s.Sessions,
			// nil (absent) means all; an explicit empty list none.
			ClientCapabilities: s.ClientCapabilities,
		})
	}
	return out
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
// changes made by other processes (SQLite: a cheap PRAGMA data_version poll)
// or instances (Postgres: LISTEN/NOTIFY, with a safety poll every
// storage.poll and a re-read after every reconnect); the watch wakes the
// gate's held calls and calls changed.
func openStore(ctx context.Context, cfg config.Storage, log *slog.Logger) (*sqlstore.DB, func(context.Context, *gate.Gate, func()), error) {
	db, err := sqlstore.Open(ctx, sqlstore.Config{
		Driver: cfg.Driver, Path: cfg.Path, DSN: cfg.DSN, MaxConns: cfg.MaxConns, Poll: cfg.Poll, Logger: log,
	})
	if err != nil {
		return nil, nil, err
	}
	return db, func(ctx context.Context, g *gate.Gate, changed func()) {
		db.Watch(ctx, func(id approval.ID) {
			if id == "" {
				g.WakeAll() // anything may have changed
			} else {
				g.Wake(id)
			}
			changed() // new events for the notification outbox
		})
	}, nil
}
