package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/store"
	"toolgate/internal/web"
)

// withInbox serves the web inbox (internal/web) at /ui/ beside the admin
// API h on the admin listener; / and /ui redirect to /ui/. Every inbox
// stream ends when ctx does (see api.Server.EndStreams).
func withInbox(ctx context.Context, h *api.Server, db store.WebSessionStore, creds map[string]config.Credential, cfg config.Config, log *slog.Logger) (http.Handler, error) {
	inbox, err := web.New(h, db, identifyApprover(creds), &web.Options{
		Logger: log, SessionTTL: cfg.Web.SessionTTL, PublicURL: cfg.PublicURL(),
	})
	if err != nil {
		return nil, fmt.Errorf("web inbox: %w", err)
	}
	context.AfterFunc(ctx, h.EndStreams) // graceful shutdown does not wait for event streams
	mux := http.NewServeMux()
	toInbox := http.RedirectHandler("/ui/", http.StatusSeeOther)
	mux.Handle("GET /{$}", toInbox)
	mux.Handle("GET /ui", toInbox)
	mux.Handle("/ui/", inbox)
	mux.Handle("/", h)
	return mux, nil
}

// identifyApprover looks an approver up by the hex SHA-256 of its token
// (the key of creds), for the inbox's sessions: agents are never approvers.
func identifyApprover(creds map[string]config.Credential) web.Identify {
	return func(tokenHash string) (approval.Principal, []string, bool) {
		c, ok := creds[tokenHash]
		if !ok || c.Principal.Kind != config.KindHuman {
			return approval.Principal{}, nil, false
		}
		return c.Principal, slices.Clone(c.Roles), true
	}
}
