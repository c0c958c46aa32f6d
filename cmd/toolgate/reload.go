package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"toolgate/internal/config"
	"toolgate/internal/policy"
	"toolgate/internal/policyfile"
	"toolgate/internal/telemetry"
)

// watchInterval is how often serve --watch looks at the config file.
const watchInterval = time.Second

// notifyHUP relays SIGHUP (whose default action would end the process) to
// the returned channel; call signal.Stop on it when done.
func notifyHUP() chan os.Signal {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// reloadPolicy runs until ctx ends: with policy.source file it reloads the
// policy section of the config file at path into h on every SIGHUP (and,
// with watch, when the file changes), refusing a policy that nobody could
// review unless approvals.allow_no_approvers is set, as at start, and
// hands grants (when not nil) the grants section of each config it puts in
// force (grants.enabled follows the file). With policy.source store a
// SIGHUP is only logged, saying that the file is not read again.
// tokens are the config's tokens serve started with (plan.configured) and
// files reads a reloaded config's token files as serve read them
// (system.files).
func reloadPolicy(ctx context.Context, path string, cfg config.Config, h *policy.Holder, hup <-chan os.Signal, watch, dev bool, log *slog.Logger, metrics *telemetry.Metrics,
	tokens map[string]config.Credential, files func(config.Config) config.Files, grants func(config.Grants)) error {
	if policySource(cfg) != policy.SourceFile {
		// A store's revisions are numbered (logged with their digest by
		// the follower); "revision" here would name the digest.
		log.Info("policy in force", "source", policySource(cfg), "digest", policy.Revision(h.Load()))
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
				log.Info("SIGHUP ignored: policy.source is store, so the policy follows the database; the config file is not read again (grants.enabled and every other key take effect after a restart)")
			}
		}
	}
	log.Info("policy in force", "source", policySource(cfg), "revision", policy.Revision(h.Load()))
	var devApprovers []config.Approver
	if dev {
		devApprovers = append(devApprovers, config.Approver{ID: config.DevApproverID, Roles: []string{config.RoleAdmin}})
	}
	check := func(c config.Config) error {
		for _, w := range c.Warnings() {
			if dev && strings.HasPrefix(w, "no approver has role") {
				continue
			}
			log.Warn(w)
		}
		if bad := c.Unreviewable(devApprovers...); len(bad) > 0 && !c.Approvals.AllowNoApprovers {
			return fmt.Errorf("no configured approver could review %s", strings.Join(bad, ", "))
		}
		return nil
	}
	r := policyfile.New(path, cfg, h, &policyfile.Options{Logger: log, Metrics: metrics, Env: os.LookupEnv, Check: check,
		Tokens: tokens, ReadFiles: files, Grants: grants})
	var every time.Duration
	if watch {
		every = watchInterval
	}
	return r.Run(ctx, hup, every)
}

func policySource(cfg config.Config) string {
	if cfg.Policy.Source == "" {
		return policy.SourceFile
	}
	return cfg.Policy.Source
}
