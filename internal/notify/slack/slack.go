// Package slack is the Slack notification channel and its interaction
// endpoint (issue 14; docs/notifications.md).
//
// With a bot token, a request's first event posts a message
// (chat.postMessage) and later events update that message in place
// (chat.update); its channel and ts are kept in the store as the delivery's
// ref. With an incoming-webhook URL, which cannot edit, every event posts a
// new message. A message shows the summary (server, tool, a one-line
// argument summary of the display copy), requester, rule, expiry, quorum
// progress, display warnings and a link to the inbox.
//
// Approve and deny buttons appear only on pending requests whose rule has
// chat_approval, and only when the Slack app's signing secret is
// configured. Clicks reach [Interactions] (POST /v1/slack/interactions on
// the admin listener), which verifies Slack's signature, maps the Slack
// user to a configured approver and records the review through the same
// gate code as the admin API.
package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/notify"
	"toolgate/internal/notify/webhook"
)

// Options configures a Slack channel. Exactly one of Token (with
// Channel) and WebhookURL is required.
type Options struct {
	// APIURL is the base URL of Slack's Web API; default
	// https://slack.com/api.
	APIURL string
	// Token is a bot token; Channel the Slack channel id it posts to.
	Token   string
	Channel string
	// WebhookURL is an incoming-webhook URL.
	WebhookURL string
	// Interactive says that the app's signing secret is configured, so
	// clicks can be verified: only then are buttons shown.
	Interactive bool
	// ChatApproval reports whether a request may be decided from chat
	// (its rule has chat_approval); nil means never.
	ChatApproval func(r approval.Request) bool
	// PublicURL is approvals.public_url, for the inbox link; empty: none.
	PublicURL string
	// Client sends the requests; default one that follows no redirects.
	Client *http.Client
}

// Slack is a notify.Channel posting to one Slack channel. It is safe for
// concurrent use.
type Slack struct {
	o Options
}

var _ notify.Channel = (*Slack)(nil)

// New returns a Slack channel. Errors never repeat a URL or token.
func New(o Options) (*Slack, error) {
	switch {
	case o.Token != "" && o.WebhookURL != "":
		return nil, errors.New("slack: set a bot token or an incoming-webhook URL, not both")
	case o.Token != "" && o.Channel == "":
		return nil, errors.New("slack: a bot token needs a channel")
	case o.Token == "" && o.WebhookURL == "":
		return nil, errors.New("slack: need a bot token or an incoming-webhook URL")
	}
	for _, u := range []string{o.APIURL, o.WebhookURL} {
		if u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, errors.New("slack: want http or https URLs with a host")
		}
	}
	if o.APIURL == "" {
		o.APIURL = "https://slack.com/api"
	}
	o.APIURL = strings.TrimRight(o.APIURL, "/")
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Slack{o: o}, nil
}

// Ref is the message a bot posted for a request: kept in the store (as
// JSON) so later events update it.
type Ref struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// Deliver posts or updates the message of m's request (see the package
// doc) and returns the message's ref (bot) or "" (incoming webhook).
func (s *Slack) Deliver(ctx context.Context, m notify.Message) (string, error) {
	msg := render(m.Request, renderOptions{
		publicURL: s.o.PublicURL,
		buttons:   s.o.Interactive && s.o.ChatApproval != nil && s.o.ChatApproval(m.Request),
	})
	if s.o.WebhookURL != "" {
		return "", s.postWebhook(ctx, msg)
	}
	if m.Ref != "" {
		var ref Ref
		if err := json.Unmarshal([]byte(m.Ref), &ref); err == nil && ref.Channel != "" && ref.TS != "" {
			_, err := s.call(ctx, "chat.update", map[string]any{"channel": ref.Channel, "ts": ref.TS, "text": msg.Text, "blocks": msg.Blocks})
			var se *apiError
			switch {
			case err == nil:
				return m.Ref, nil
			case errors.As(err, &se) && (se.code == "message_not_found" || se.code == "cant_update_message" || se.code == "edit_window_closed"):
				// The message is gone or frozen: post a new one below.
			default:
				return "", err
			}
		}
	}
	out, err := s.call(ctx, "chat.postMessage", map[string]any{"channel": s.o.Channel, "text": msg.Text, "blocks": msg.Blocks, "unfurl_links": false})
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(Ref{Channel: out.Channel, TS: out.TS})
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Ephemeral shows text to user in channel, visible to them only
// (chat.postEphemeral). It needs a bot token; without one it does nothing.
func (s *Slack) Ephemeral(ctx context.Context, channel, user, text string) error {
	if s.o.Token == "" || channel == "" || user == "" {
		return nil
	}
	_, err := s.call(ctx, "chat.postEphemeral", map[string]any{"channel": channel, "user": user, "text": escape(text)})
	return err
}

// apiAnswer is the part of a Web API answer the channel reads.
type apiAnswer struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// apiError is a Web API answer with ok false; code is Slack's error code
// (such as channel_not_found), never a secret.
type apiError struct{ method, code string }

func (e *apiError) Error() string { return "slack: " + e.method + ": " + e.code }

// call POSTs body as JSON to the Web API method with the bot token.
func (s *Slack) call(ctx context.Context, method string, body map[string]any) (apiAnswer, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return apiAnswer{}, notify.Permanent(fmt.Errorf("slack: encode %s: %w", method, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.APIURL+"/"+method, bytes.NewReader(b))
	if err != nil {
		return apiAnswer{}, notify.Permanent(fmt.Errorf("slack: %s: cannot build the request", method))
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+s.o.Token)
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return apiAnswer{}, safe(method, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("slack: %s: answered %d", method, resp.StatusCode)
		if d, ok := webhook.RetryAfter(resp); ok {
			return apiAnswer{}, notify.RetryAfter(err, d)
		}
		return apiAnswer{}, err
	}
	var out apiAnswer
	if err := json.Unmarshal(raw, &out); err != nil {
		return apiAnswer{}, fmt.Errorf("slack: %s: the answer is not JSON", method)
	}
	if !out.OK {
		return out, &apiError{method: method, code: safeCode(out.Error)}
	}
	return out, nil
}

// postWebhook POSTs msg to the incoming webhook; Slack answers 200 "ok".
func (s *Slack) postWebhook(ctx context.Context, msg message) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return notify.Permanent(fmt.Errorf("slack: encode the message: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.WebhookURL, bytes.NewReader(b))
	if err != nil {
		return notify.Permanent(errors.New("slack: incoming webhook: cannot build the request"))
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return safe("incoming webhook", err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	err = fmt.Errorf("slack: incoming webhook answered %d", resp.StatusCode)
	if d, ok := webhook.RetryAfter(resp); ok {
		return notify.RetryAfter(err, d)
	}
	return err
}

// safe returns err without the URL that *url.Error carries.
func safe(what string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("slack: %s: no answer within the timeout", what)
		}
		return fmt.Errorf("slack: %s: %s: %w", what, strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// safeCode keeps an error code to the characters Slack's codes use, so an
// odd answer cannot put anything else in a log line.
func safeCode(code string) string {
	if code == "" {
		return "unknown_error"
	}
	if len(code) > 64 || strings.ContainsFunc(code, func(r rune) bool { return r != '_' && (r < 'a' || r > 'z') && (r < '0' || r > '9') }) {
		return "unrecognised_error"
	}
	return code
}
