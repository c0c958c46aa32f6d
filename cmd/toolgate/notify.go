package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/notify"
	"toolgate/internal/notify/slack"
	"toolgate/internal/notify/webhook"
	"toolgate/internal/policy"
	"toolgate/internal/telemetry"
)

// notifications are the notification outbox and the Slack interaction
// endpoint of one serve process; the zero value (no channels configured)
// does nothing.
type notifications struct {
	outbox       *notify.Outbox
	interactions *slack.Interactions
}

// newNotifications builds the channels of notify.channels with secrets,
// theirs in the same order, as preflight read them (config.NotifySecrets;
// nothing is read again here, so the bytes used are the ones checked). s is the store the outbox works on; reviewer
// decides Slack button clicks (the gate); holder is the policy in force,
// whose rules say which requests may be decided from chat.
func newNotifications(cfg config.Config, secrets []config.ChannelSecrets, s notify.Store, reviewer slack.Reviewer, holder *policy.Holder, m *telemetry.DeliveryMetrics, log *slog.Logger) (notifications, error) {
	if len(cfg.Notify.Channels) == 0 {
		return notifications{}, nil
	}
	if len(secrets) != len(cfg.Notify.Channels) {
		return notifications{}, fmt.Errorf("%w: %d notification channels but secrets for %d", errConfig, len(cfg.Notify.Channels), len(secrets))
	}
	var err error
	chat := func(r approval.Request) bool {
		p := holder.Load()
		return p != nil && p.ChatApproval(r.Rule)
	}
	n := cfg.Notify
	var (
		routes []notify.Route
		apps   []slack.App
	)
	for i, ch := range n.Channels {
		sec := secrets[i]
		var c notify.Channel
		switch ch.Type {
		case config.ChannelWebhook:
			c, err = webhook.New(sec.URL, sec.Secret, &webhook.Options{PublicURL: cfg.Approvals.PublicURL, UserAgent: "toolgate/" + buildVersion().Version})
		case config.ChannelSlack:
			var s *slack.Slack
			s, err = slack.New(slack.Options{
				APIURL: ch.EffectiveAPIURL(), Token: sec.Token, Channel: ch.Channel, WebhookURL: sec.URL,
				Interactive: sec.Secret != "", ChatApproval: chat, PublicURL: cfg.Approvals.PublicURL,
			})
			if err == nil && sec.Secret != "" {
				apps = append(apps, slack.App{SigningSecret: sec.Secret, Feedback: s.Ephemeral})
			}
			c = s
		}
		if err != nil {
			return notifications{}, fmt.Errorf("%w: notify.channels[%d] %q: %w", errConfig, i, ch.Name, err)
		}
		routes = append(routes, notify.Route{
			Name: ch.Name, Channel: c, Events: ch.EffectiveEvents(), Rules: ch.Rules, Servers: ch.Servers, MaxAge: ch.EffectiveMaxAge(),
		})
	}
	out := notifications{}
	out.outbox, err = notify.New(s, routes, &notify.Options{
		Logger: log, Metrics: m, Poll: n.Poll, Timeout: n.Timeout, Backoff: n.Backoff, BackoffMax: n.BackoffMax, Lease: n.Lease,
	})
	if err != nil {
		return notifications{}, err
	}
	if len(apps) == 0 {
		return out, nil
	}
	approvers := map[string]slack.Approver{}
	for _, a := range cfg.Approvers {
		if a.SlackUserID != "" {
			approvers[a.SlackUserID] = slack.Approver{
				Principal: approval.Principal{ID: a.ID, Kind: config.KindHuman, Tenant: a.Tenant, Groups: a.Groups},
				Roles:     a.Roles,
			}
		}
	}
	out.interactions, err = slack.NewInteractions(slack.InteractionOptions{
		Apps: apps, Approvers: approvers, ChatApproval: chat, Reviewer: reviewer, Logger: log, Count: m.Interaction,
	})
	return out, err
}

// run runs the outbox and the interactions' feedback sender until ctx
// ends.
func (n notifications) run(ctx context.Context) error {
	done := make(chan struct{})
	if n.interactions != nil {
		go func() {
			defer close(done)
			_ = n.interactions.Run(ctx)
		}()
	} else {
		close(done)
	}
	defer func() { <-done }()
	if n.outbox == nil {
		<-ctx.Done()
		return nil
	}
	return n.outbox.Run(ctx)
}

// wake tells the outbox that the store changed.
func (n notifications) wake() {
	if n.outbox != nil {
		n.outbox.Wake()
	}
}

// InteractionsPath is where Slack posts button clicks, on the admin
// listener.
const InteractionsPath = "/v1/slack/interactions"

// handler returns admin with the Slack interaction endpoint in front of it
// when Slack apps are configured. The endpoint authenticates by Slack's
// signature, not by a bearer token.
func (n notifications) handler(admin http.Handler) http.Handler {
	if n.interactions == nil {
		return admin
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+InteractionsPath, n.interactions)
	mux.Handle("/", admin)
	return mux
}
