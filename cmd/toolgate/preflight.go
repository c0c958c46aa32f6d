package main

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/gateway"
	"toolgate/internal/gctune"
	"toolgate/internal/privfile"
	"toolgate/internal/store/sqlstore"
)

// system is what serve and `policy check` read from the machine: the
// environment, files and the process's identity and limits. Tests pass
// their own.
type system struct {
	lookupEnv config.Env
	environ   []string
	readFile  func(string) ([]byte, error) // agents' token files
	// openPrivate opens an approver's token file or a notification
	// secret file for privfile to check and read; nil is
	// privfile.OpenNoFollow.
	openPrivate func(string) (*os.File, error)
	euid        int
	// nofile is the soft RLIMIT_NOFILE (0 when unknown); the Go runtime
	// raises it to the hard limit at start.
	nofile uint64
	// memCeiling is the memory the process is meant to stay under, in
	// bytes (gctune.MemoryCeiling; 0 when unknown).
	memCeiling int64
}

// osSystem returns the real system.
func osSystem() system {
	return system{lookupEnv: os.LookupEnv, environ: os.Environ(), readFile: privfile.ReadRegular, euid: os.Geteuid(), nofile: softNofile(),
		memCeiling: gctune.MemoryCeiling(os.Getenv)}
}

// files reads, once each, the token and secret files cfg names (see
// config.Config.ReadFiles): serveWarnings and preflight take the result,
// so a start or a `policy check` reads each file once and uses the bytes
// it checked.
func (sys system) files(cfg config.Config) config.Files {
	return cfg.ReadFiles(privfile.Reader{Euid: sys.euid, Open: sys.openPrivate}, sys.readFile)
}

// plan is what serve starts from once preflight has passed.
type plan struct {
	creds map[string]config.Credential // by token hash; --dev adds to it
	// configured are the tokens of the config (creds before --dev adds
	// to it), which a policy reload compares the file's with.
	configured map[string]config.Credential
	notify     []config.ChannelSecrets // of notify.channels, in order
	mcpAddr    string                  // "" when the agent listener is off (--stdio)
	adminAddr  string                  // "" when the admin listener is off
	upstreams  []gateway.ServerConfig  // each stdio server with its complete environment
	// dropped lists base variables left out of an upstream's environment
	// because their value is a secret ("servers.fs: USER").
	dropped   []string
	redaction *approval.Redaction
	caps      connCaps
}

// preflight runs every check serve makes before it opens anything, on a
// config that loaded (so Validate passed), with the files sys.files read
// for it: a SQLite storage.path whose directory is not a file
// (checkStoragePath), approver and notification secret files private to
// the service user (each problem said once: the check is the read), every
// token and notification secret resolvable, a safe admin socket directory,
// an approver for every approve rule (unless approvals.allow_no_approvers),
// tokens for each listener that is on (--dev mints them), --insecure-no-auth
// only on loopback, and stdio upstreams' environments free of toolgate's
// secrets (issue 9). serve refuses to start, and `toolgate policy check`
// exits 2, on the same error, which joins every problem; both call this
// function so they cannot disagree.
func preflight(cfg config.Config, f serveFlags, sys system, files config.Files) (plan, error) {
	var errs []error
	p := plan{mcpAddr: cfg.Listen.MCP, adminAddr: cfg.Listen.Admin}
	if f.stdio {
		p.mcpAddr = ""
		if !cfg.Listen.AdminSet {
			p.adminAddr = "" // stdio mode opens no admin port unless configured
		}
	}
	// A DSN that does not parse is the config's fault (exit 2), found
	// before anything starts; one that parses but cannot connect fails
	// the start later (exit 1).
	if cfg.Storage.Driver == sqlstore.DriverPostgres && cfg.Storage.DSN != "" {
		if err := sqlstore.CheckDSN(cfg.Storage.DSN); err != nil {
			errs = append(errs, fmt.Errorf("storage.dsn: %w", err))
		}
	}
	if err := checkStoragePath(cfg.Storage); err != nil {
		errs = append(errs, err)
	}
	creds, err := cfg.Tokens(sys.lookupEnv, files.ReadFile)
	if err != nil {
		errs = append(errs, err)
	}
	// The outbox starts with these secrets; it reads none of its own.
	notes, nerr := cfg.NotifySecrets(sys.lookupEnv, files.ReadFile)
	if nerr != nil {
		errs = append(errs, nerr)
	}
	p.creds, p.configured, p.notify = creds, maps.Clone(creds), notes
	// A Unix admin socket's directory is checked now and on every
	// connection.
	lc := &api.ListenConfig{Geteuid: func() int { return sys.euid }}
	if err := lc.Check(p.adminAddr); err != nil {
		errs = append(errs, fmt.Errorf("listen.admin: %w", err))
	}
	if bad := unreviewable(cfg, f); len(bad) > 0 {
		fix := "add approvers (roles: [approver]) or set approvals.allow_no_approvers: true"
		if len(cfg.Approvers) == 0 {
			// Most often a first try that forgot --dev.
			fix = "add approvers (roles: [approver]), run with --dev for throwaway tokens, or set approvals.allow_no_approvers: true"
		}
		errs = append(errs, fmt.Errorf("no configured approver could review %s; %s", strings.Join(bad, ", "), fix))
	}
	if err == nil && !f.dev {
		if p.mcpAddr != "" && !f.insecureNoAuth && !hasKind(creds, config.KindAgent) {
			errs = append(errs, errors.New("no agent tokens configured: add agents: with token_env/token_file/token_sha256, or run with --dev"))
		}
		if p.adminAddr != "" && !hasKind(creds, config.KindHuman) {
			errs = append(errs, errors.New("no approver tokens configured: add approvers: with token_env/token_file/token_sha256, or run with --dev"))
		}
	}
	if f.insecureNoAuth && p.mcpAddr != "" && !isLoopback(p.mcpAddr) {
		errs = append(errs, fmt.Errorf("--insecure-no-auth needs a loopback listen.mcp address, got %q", p.mcpAddr))
	}
	if p.redaction, err = cfg.Redaction(); err != nil {
		errs = append(errs, err)
	}
	envs, dropped, err := cfg.UpstreamEnvs(sys.environ, cfg.Secrets(sys.lookupEnv, files.ReadFile))
	if err != nil {
		errs = append(errs, err)
	}
	p.upstreams, p.dropped = gatewayServers(cfg, envs), dropped
	p.caps = capsFor(cfg.Listen, sys.nofile, sys.memCeiling)
	return p, errors.Join(errs...)
}

// unreviewable names the policy's approval parameters no approver could
// review (the --dev approver counted), unless approvals.allow_no_approvers
// lets serve start anyway; serve refuses to start when there is any.
func unreviewable(cfg config.Config, f serveFlags) []string {
	if cfg.Approvals.AllowNoApprovers {
		return nil
	}
	var devApprovers []config.Approver
	if f.dev {
		devApprovers = append(devApprovers, config.Approver{ID: devApproverID, Roles: []string{config.RoleAdmin}})
	}
	return cfg.Unreviewable(devApprovers...)
}

// serveWarnings lists what serve logs as warnings and `policy check`
// prints, without failing: the config's own warnings (without the one
// about missing approvers when --dev mints one, or when unreviewable
// makes it an error that says more), tokens short enough to guess,
// webhook signing secrets shorter than an HMAC-SHA256 key should be,
// connection caps that exceed the descriptor limit, and a relative SQLite
// path about to make a new store away from the config file
// (storageWhereWarning).
func serveWarnings(cfg config.Config, f serveFlags, sys system, files config.Files) []string {
	var out []string
	refused := len(unreviewable(cfg, f)) > 0
	for _, w := range cfg.Warnings() {
		if (f.dev || refused) && strings.HasPrefix(w, "no approver has role") {
			continue // --dev mints an admin token; or preflight refuses, saying more
		}
		out = append(out, w)
	}
	out = append(out, cfg.ShortTokens(sys.lookupEnv, files.ReadFile)...)
	out = append(out, cfg.ShortNotifySecrets(sys.lookupEnv, files.ReadFile)...)
	out = append(out, commandWarnings(cfg, sys)...)
	if w := capsFor(cfg.Listen, sys.nofile, sys.memCeiling).warning; w != "" {
		out = append(out, w)
	}
	if w := storagePathWarning(cfg.Storage); w != "" {
		out = append(out, w)
	}
	if w := storageWhereWarning(cfg.Storage, f.config); w != "" {
		out = append(out, w)
	}
	return out
}

// devApproverID is the id of the approver --dev mints.
const devApproverID = config.DevApproverID

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

// gatewayServers returns the upstreams of cfg in name order, each stdio
// one with its environment from envs.
func gatewayServers(cfg config.Config, envs map[string]map[string]string) []gateway.ServerConfig {
	out := make([]gateway.ServerConfig, 0, len(cfg.Servers))
	for _, n := range slices.Sorted(maps.Keys(cfg.Servers)) {
		s := cfg.Servers[n]
		sc := gateway.ServerConfig{
			Name: n, Command: s.Command, Args: s.Args, Dir: s.Dir,
			URL: s.URL, Headers: s.Headers, CallTimeout: s.CallTimeout, ConnectTimeout: s.ConnectTimeout,
			Unprefixed: s.ToolPrefix != nil && !*s.ToolPrefix,
			Optional:   !s.IsRequired(),
			Sessions:   s.Sessions,
			// nil (absent) means all; an explicit empty list none.
			ClientCapabilities: s.ClientCapabilities,
		}
		if s.Command != "" {
			sc.Env = envs[n]
			if sc.Env == nil {
				sc.Env = map[string]string{} // never inherit: see gateway.ServerConfig.Env
			}
		}
		out = append(out, sc)
	}
	return out
}
