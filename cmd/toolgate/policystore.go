package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"toolgate/internal/api"
	"toolgate/internal/config"
	"toolgate/internal/policy"
	"toolgate/internal/policystore"
	"toolgate/internal/store"
)

// startPolicyStore sets up policy.source: store. It returns nil when the
// source is the file. Otherwise it puts the store's current revision in
// holder (the config file's policy becomes revision 1 when the store has
// none) and returns the service whose Follow keeps this instance on the
// newest revision. Proposals that widen are approved by a deployment
// admin: every configured approver with the admin role and no tenant (and
// dev-approver with --dev).
func startPolicyStore(ctx context.Context, db store.Store, cfg config.Config, holder *policy.Holder, dev bool, log *slog.Logger) (*policystore.Service, error) {
	if policySource(cfg) != policy.SourceStore {
		return nil, nil
	}
	var admins []string
	for _, a := range cfg.Approvers {
		// Deployment admins only: an admin with a tenant may change
		// nothing outside its tenant, and the policy governs all of them.
		if slices.Contains(a.Roles, config.RoleAdmin) && a.Tenant == "" {
			admins = append(admins, a.ID)
		}
	}
	if dev {
		admins = append(admins, "dev-approver")
	}
	poll := policystore.DefaultPoll
	if p := cfg.Storage.Poll; p > 0 && p < poll {
		poll = p
	}
	svc := policystore.New(db, &policystore.Options{
		Logger:    log,
		Approvers: admins,
		Poll:      poll,
		Install: func(rev store.PolicyRevision, p *policy.Policy) {
			holder.Store(p)
			for _, m := range p.InMonitorMode() {
				log.Warn("policy in monitor mode: calls it would deny or hold proceed", "revision", rev.Revision, "what", m)
			}
		},
	})
	if _, err := svc.Bootstrap(ctx, &cfg.Policy, "config"); err != nil {
		return nil, fmt.Errorf("policy.source store: %w", err)
	}
	return svc, nil
}

// policiesAPI returns svc as api.Policies, nil (no routes) when svc is nil.
func policiesAPI(svc *policystore.Service) api.Policies {
	if svc == nil {
		return nil
	}
	return svc
}
