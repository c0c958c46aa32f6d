package main

import (
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/gate"
	"toolgate/internal/gateway"
	"toolgate/internal/store"
)

// mintDevTokens adds throwaway tokens for the listeners that need them and
// returns the lines to print.
func mintDevTokens(creds map[string]config.Credential, agent, admin bool) []string {
	add := func(c config.Credential) string {
		tok := "tg_dev_" + rand.Text()
		creds[config.TokenHash(tok)] = c
		return tok
	}
	lines := []string{"toolgate --dev: throwaway tokens, valid until this process exits:"}
	if agent {
		tok := add(config.Credential{Principal: approval.Principal{ID: "dev-agent", Kind: config.KindAgent}})
		lines = append(lines, "  agent token (Authorization: Bearer on /mcp):  "+tok)
	}
	if admin {
		tok := add(config.Credential{Principal: approval.Principal{ID: devApproverID, Kind: config.KindHuman}, Roles: []string{config.RoleAdmin}})
		lines = append(lines, "  approver token (TOOLGATE_TOKEN for the CLI):  "+tok)
	}
	return lines
}

func lookup(creds map[string]config.Credential, token string) (config.Credential, bool) {
	if token == "" {
		return config.Credential{}, false
	}
	c, ok := creds[config.TokenHash(token)]
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

// reviewers lists who can review requests for the gate's quorum check
// (gate.Options.Reviewers), by config.Config.Reviewers (the rule `policy
// explain` uses too): the people among creds (the tokens the admin API
// accepts) with role approver or admin, and with dev serve --dev's
// approver, whether or not this process minted its token (as preflight
// counts it: a stdio process's decisions may come from another --dev
// process sharing the store). With approvals.allow_no_approvers it is
// nil, "not known", and calls are held as before.
func reviewers(cfg config.Config, creds map[string]config.Credential, dev bool) []gate.Reviewer {
	people := make([]config.Credential, 0, len(creds)+1)
	if dev {
		people = append(people, config.DevApprover())
	}
	for _, c := range creds {
		people = append(people, c)
	}
	return gate.ReviewersOf(cfg.Reviewers(people))
}
