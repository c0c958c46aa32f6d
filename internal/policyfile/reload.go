// Package policyfile keeps the deployment policy in force in step with the
// config file when policy.source is "file" (the default): on SIGHUP, or
// when the file's content changes (serve --watch), the file is read and
// validated again; a valid policy is swapped into the [policy.Holder] the
// gate evaluates, and an invalid file leaves the old policy in force, is
// logged and is counted. Only the policy section and grants.enabled
// (through Options.Grants) are applied; every other key, and every agent
// or approver token (read from its variable or file at start), needs a
// restart (a warning says so when they differ).
package policyfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"toolgate/internal/config"
	"toolgate/internal/policy"
	"toolgate/internal/privfile"
	"toolgate/internal/telemetry"
)

// Options configures a Reloader. The zero value (or nil) is valid.
type Options struct {
	// Logger receives "policy reloaded" and "policy reload failed" records;
	// default discard.
	Logger *slog.Logger
	// Metrics counts reloads and failed reloads; nil counts nothing.
	Metrics *telemetry.Metrics
	// Env expands ${VAR} in the file, as at start (cmd passes
	// os.LookupEnv); nil has no variables.
	Env config.Env
	// Check, when set, runs on a new config that passed config.Validate;
	// an error refuses the reload like a validation error (serve uses it to
	// refuse a policy nobody could review, as it does at start, and to log
	// the config's warnings).
	Check func(config.Config) error
	// Tokens are the agent and approver tokens in force, as serve
	// resolved them from the config at start (config.Config.Tokens;
	// without --dev's): a reload whose file resolves to others warns. Nil
	// reads them from the running config at New.
	Tokens map[string]config.Credential
	// ReadFiles reads the token and secret files of a config once each,
	// for the tokens a reload compares (cmd passes the start's reader);
	// nil reads approvers' files with privfile for os.Geteuid and agents'
	// with privfile.ReadRegular.
	ReadFiles func(config.Config) config.Files
	// Grants, when set, is called with the grants section of each config
	// a reload puts in force (before its policy when it turns grants off,
	// after it otherwise), so that grants.enabled follows the file (serve
	// stores it for the gate). A changed grants.enabled is then applied,
	// not reported as needing a restart; grants.max_ttl still needs one.
	Grants func(config.Grants)
}

// A Reloader re-reads the config file at a path and swaps its policy into a
// Holder. Its methods are safe for concurrent use; reloads are serialised.
type Reloader struct {
	path    string
	running config.Config     // the config the process started with
	tokens  map[string]string // principalTokens of running at New; nil if unreadable then
	holder  *policy.Holder
	log     *slog.Logger
	metrics *telemetry.Metrics
	env     config.Env
	check   func(config.Config) error
	files   func(config.Config) config.Files
	grants  func(config.Grants)

	mu      sync.Mutex
	seen    [sha256.Size]byte // guarded by mu: digest of the content last read by Reload or Changed
	read    bool              // guarded by mu: seen is set
	enabled bool              // guarded by mu: grants.enabled in force (with grants)
}

// New returns a Reloader for the config file at path. running is the
// config the process started with (its policy is already in h); the
// current content of the file is taken as seen, so [Reloader.Changed]
// reports only later edits.
func New(path string, running config.Config, h *policy.Holder, opts *Options) *Reloader {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReadFiles == nil {
		o.ReadFiles = func(c config.Config) config.Files {
			return c.ReadFiles(privfile.Reader{Euid: os.Geteuid()}, privfile.ReadRegular)
		}
	}
	r := &Reloader{path: path, running: running, holder: h, log: o.Logger, metrics: o.Metrics, env: o.Env, check: o.Check, files: o.ReadFiles, grants: o.Grants}
	r.enabled = running.Grants.Enabled
	if o.Tokens != nil {
		r.tokens = principals(o.Tokens)
	} else {
		r.tokens, _ = principalTokens(running, o.Env, r.files(running))
	}
	if b, err := os.ReadFile(path); err == nil {
		r.seen, r.read = sha256.Sum256(b), true
	}
	return r
}

// Reload reads and validates the config file and, if it is valid, puts its
// policy in force. It logs "policy reloaded" with the old and new revision
// ([policy.Revision]) and the [policy.Diff] summary, and counts the reload.
// If the file cannot be read, does not parse or validate, fails
// Options.Check, or changes policy.source (which needs a restart), the
// policy in force stays, the problems are logged ("policy reload failed")
// and counted, and the error (one problem per line, see config.Lines) is
// returned.
func (r *Reloader) Reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.holder.Load()
	curRev := ""
	if cur != nil {
		curRev = policy.Revision(cur)
	}
	cfg, err := r.load()
	if err != nil {
		r.metrics.PolicyReloadFailed()
		r.log.ErrorContext(ctx, "policy reload failed; the current policy stays in force",
			"revision", curRev, "path", r.path, "err", strings.Join(config.Lines(err), "; "))
		return config.AtFile(r.path, err)
	}
	next := cfg.Policy // a fresh copy, never modified after Store
	newRev := policy.Revision(&next)
	changes := []string{"none"}
	if cur != nil {
		if d := policy.Diff(cur, &next); d != nil {
			changes = d
		}
	}
	// grants.enabled: false is handed over before the new policy is put in
	// force, true after it: the moment between the two then has grants
	// off, never the new policy with the old grants.enabled: true (a file
	// that lifts a rule's grants: false and turns grants off in the same
	// edit would otherwise let a grant admit a call the old and the new
	// config both refuse to let grants admit).
	if r.grants != nil && !cfg.Grants.Enabled {
		r.grants(cfg.Grants)
	}
	r.holder.Store(&next)
	r.metrics.PolicyReloaded()
	r.log.InfoContext(ctx, "policy reloaded", "old_revision", curRev, "revision", newRev, "changes", strings.Join(changes, "; "))
	applied := cfg
	if r.grants != nil {
		if cfg.Grants.Enabled {
			r.grants(cfg.Grants)
		}
		if cfg.Grants.Enabled != r.enabled {
			r.log.InfoContext(ctx, "grants.enabled reloaded", "enabled", cfg.Grants.Enabled)
			r.enabled = cfg.Grants.Enabled
		}
		applied.Grants.Enabled = r.running.Grants.Enabled // applied, not a restart's
	}
	if keys := changedOutsidePolicy(r.running, applied); len(keys) > 0 {
		r.log.WarnContext(ctx, "config keys outside policy changed; they take effect only after a restart",
			"path", r.path, "keys", strings.Join(keys, ","))
	}
	if w := tokenWarning(r.tokens, cfg, r.env, r.files(cfg)); w != "" {
		r.log.WarnContext(ctx, w, "path", r.path)
	}
	return nil
}

// load reads the file once (so the digest matches what is applied),
// parses and validates it.
func (r *Reloader) load() (config.Config, error) {
	b, err := os.ReadFile(r.path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // Reload names the file (config.AtFile)
		}
		return config.Config{}, fmt.Errorf("read: %w", err)
	}
	r.seen, r.read = sha256.Sum256(b), true
	cfg, err := config.Load(bytes.NewReader(b), r.env)
	if err == nil && r.check != nil {
		err = r.check(cfg)
	}
	if err == nil && source(cfg.Policy.Source) != source(r.running.Policy.Source) {
		err = fmt.Errorf("policy.source changed from %s to %s; restart toolgate to change it", source(r.running.Policy.Source), source(cfg.Policy.Source))
	}
	if err != nil {
		return config.Config{}, err
	}
	return cfg, nil
}

// Changed reports whether the file's content differs from what the
// Reloader last read (at New, Reload or Changed). It reads and hashes the
// whole file; a file that cannot be read (e.g. mid-rename by an editor) is
// reported as an error, not as a change.
func (r *Reloader) Changed() (bool, error) {
	b, err := os.ReadFile(r.path)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(b)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.read && sum == r.seen {
		return false, nil
	}
	return true, nil
}

// Run reloads on every value received from hup (cmd relays SIGHUP) and,
// when watch > 0, whenever [Reloader.Changed] reports a change, checked
// every watch interval. It returns nil when ctx ends. Failed reloads are
// logged and counted by Reload; Run keeps going.
func (r *Reloader) Run(ctx context.Context, hup <-chan os.Signal, watch time.Duration) error {
	var tick <-chan time.Time
	if watch > 0 {
		t := time.NewTicker(watch)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			r.log.InfoContext(ctx, "SIGHUP: reloading the policy", "path", r.path)
			_ = r.Reload(ctx)
		case <-tick:
			changed, err := r.Changed()
			if err != nil {
				r.log.DebugContext(ctx, "config file not readable; will look again", "path", r.path, "err", err)
				continue
			}
			if changed {
				r.log.InfoContext(ctx, "config file changed: reloading the policy", "path", r.path)
				_ = r.Reload(ctx)
			}
		}
	}
}

func source(s string) string {
	if s == "" {
		return policy.SourceFile
	}
	return s
}

// changedOutsidePolicy names the top-level keys of the file, other than
// policy, whose values differ between a and b, in the order of
// config.Config ("listen", "servers", …; "${VAR} references" when only
// which variables the file references changed).
func changedOutsidePolicy(a, b config.Config) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var keys []string
	refs := false
	for i := range va.NumField() {
		name, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("yaml"), ",")
		switch {
		case name == "policy" || reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()):
		case name == "-" || name == "":
			refs = true // not a key: it changes with the key that holds the reference
		default:
			keys = append(keys, name)
		}
	}
	if refs && len(keys) == 0 {
		keys = append(keys, "${VAR} references")
	}
	return keys
}
