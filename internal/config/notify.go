package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"toolgate/internal/policy"
)

// Notify configures notifications (issue 14): channels on which approval
// events are announced, and how the outbox that delivers them retries.
type Notify struct {
	// Channels are the receivers, each a webhook or a Slack destination.
	Channels []NotifyChannel `yaml:"channels,omitempty"`
	// Poll is how often the outbox looks for new events and due retries
	// when nothing woke it sooner (the store's change feed wakes it on every
	// new event); default 1s.
	Poll time.Duration `yaml:"poll"`
	// Timeout bounds one delivery attempt (one HTTP exchange with a
	// receiver); default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// Backoff is the wait before the first retry of a failed delivery; it
	// doubles with each further failure (with jitter: a wait of d is drawn
	// from [d/2, d)) up to BackoffMax. Defaults 1s and 5m.
	Backoff    time.Duration `yaml:"backoff"`
	BackoffMax time.Duration `yaml:"backoff_max"`
	// Lease is how long an instance's claim on a delivery lasts unless
	// renewed; the attempting instance renews it every Lease/4, and
	// another instance takes over a delivery whose instance died within
	// about Lease. It must exceed the clock difference between instances
	// sharing a database. Default 5s, at least 1s.
	Lease time.Duration `yaml:"lease"`
}

// MinNotifyLease is the shortest notify.lease accepted: renewals come
// every Lease/4, and a shorter lease would spend the store on renewals
// and let a store hiccup hand a delivery to another instance.
const MinNotifyLease = time.Second

// Notification channel types (NotifyChannel.Type).
const (
	ChannelWebhook = "webhook"
	ChannelSlack   = "slack"
)

// DefaultMaxAge is a channel's max_age when it sets none: how long after
// its event a delivery is retried before it counts as failed.
const DefaultMaxAge = time.Hour

// DefaultSlackAPI is the base URL of Slack's Web API, a Slack channel's
// api_url when it sets none.
const DefaultSlackAPI = "https://slack.com/api"

// notifyEvents are the valid entries of a channel's events list: the
// approval event types (approval.EventType) that notifications announce,
// "decided", which stands for approved and denied, and "dispatch_failed",
// which stands for the dispatched events whose outcome is not ok. Package
// notify resolves them (its test holds the two lists equal).
var notifyEvents = []string{"requested", "reviewed", "approved", "denied", "decided",
	"expired", "cancelled", "consumed", "invalidated", "dispatched", "dispatch_failed"}

// NotifyEvents returns the valid entries of a channel's events list.
func NotifyEvents() []string { return slices.Clone(notifyEvents) }

// DefaultNotifyEvents are the events of a channel that lists none: a new
// request, a review that leaves it pending (the other approvers of a
// request needing two hear that one approved; a review that settles it is
// announced by its approved or denied event only, package notify), every
// way a pending one ends, an approval invalidated at dispatch (the human
// said yes and nothing ran: they must hear it), and a dispatch whose
// outcome is not ok (it failed, or toolgate cannot say whether it ran: the
// instance died mid-dispatch).
var DefaultNotifyEvents = []string{"requested", "reviewed", "decided", "expired", "cancelled", "invalidated", "dispatch_failed"}

// NotifyChannel is one receiver of notifications. Its secrets (a webhook's
// URL and signing secret, a Slack bot token, incoming-webhook URL or
// signing secret) come only from environment variables (*_env) or files
// (*_file, contents trimmed of surrounding white space), never from the
// config itself, and are never logged: a webhook URL often carries a
// credential in its path.
type NotifyChannel struct {
	// Name identifies the channel in metrics, logs and the store; unique,
	// [A-Za-z0-9][A-Za-z0-9._-]*, at most 64 characters.
	Name string `yaml:"name"`
	// Type is "webhook" or "slack".
	Type string `yaml:"type"`
	// URLEnv or URLFile names where the receiver's URL comes from: the
	// webhook's endpoint (required for webhook), or a Slack incoming-webhook
	// URL (slack without a bot token).
	URLEnv  string `yaml:"url_env,omitempty"`
	URLFile string `yaml:"url_file,omitempty"`
	// SecretEnv or SecretFile names the signing secret: for a webhook, the
	// HMAC key of Toolgate-Signature (required); for Slack, the app's
	// signing secret that interactions (buttons) are verified with
	// (optional; without it no buttons are shown).
	SecretEnv  string `yaml:"secret_env,omitempty"`
	SecretFile string `yaml:"secret_file,omitempty"`
	// TokenEnv or TokenFile names a Slack bot token (xoxb-…), with which
	// messages are posted with chat.postMessage and updated in place with
	// chat.update. Slack only; set it or a URL, not both.
	TokenEnv  string `yaml:"token_env,omitempty"`
	TokenFile string `yaml:"token_file,omitempty"`
	// Channel is the Slack channel (an id such as C0123456789) the bot
	// posts to; required with a bot token.
	Channel string `yaml:"channel,omitempty"`
	// APIURL is the base URL of Slack's Web API; default
	// https://slack.com/api (tests point it at a local stand-in).
	APIURL string `yaml:"api_url,omitempty"`
	// Events lists which events are announced (see the Notify* names);
	// default DefaultNotifyEvents.
	Events []string `yaml:"events,omitempty"`
	// Rules and Servers, when not empty, restrict the channel to requests
	// whose rule (approval.Request.Rule), and whose server, is listed.
	Rules   []string `yaml:"rules,omitempty"`
	Servers []string `yaml:"servers,omitempty"`
	// MaxAge is how long after its event a failing delivery is retried;
	// then it counts as failed. 0 means DefaultMaxAge.
	MaxAge time.Duration `yaml:"max_age,omitempty"`
}

// defaultNotify is the notify section of Default.
func defaultNotify() Notify {
	return Notify{Poll: time.Second, Timeout: 10 * time.Second, Backoff: time.Second, BackoffMax: 5 * time.Minute, Lease: 5 * time.Second}
}

var channelNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// slackUserRE is the shape of a Slack user id (U… or W…, upper-case
// letters and digits).
var slackUserRE = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)

// validate checks the notify section against c (servers must be
// configured), returning one error per problem.
func (n Notify) validate(c Config) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if n.Poll <= 0 {
		add("notify.poll %s: must be > 0", n.Poll)
	}
	if n.Timeout <= 0 {
		add("notify.timeout %s: must be > 0", n.Timeout)
	}
	if n.Backoff <= 0 {
		add("notify.backoff %s: must be > 0", n.Backoff)
	}
	if n.BackoffMax < n.Backoff {
		add("notify.backoff_max %s: must be >= notify.backoff (%s)", n.BackoffMax, n.Backoff)
	}
	if n.Lease < MinNotifyLease {
		add("notify.lease %s: must be at least %s", n.Lease, MinNotifyLease)
	}
	names := map[string]int{}
	for i, ch := range n.Channels {
		where := fmt.Sprintf("notify.channels[%d]", i)
		if ch.Name != "" {
			where += fmt.Sprintf(" %q", ch.Name)
		}
		errs = append(errs, ch.validate(where, c)...)
		if ch.Name == "" {
			continue
		}
		if j, dup := names[ch.Name]; dup {
			add("%s: name also used by notify.channels[%d]", where, j)
		} else {
			names[ch.Name] = i
		}
	}
	return errs
}

func (ch NotifyChannel) validate(where string, c Config) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(where+format, args...)) }
	switch {
	case ch.Name == "":
		add(".name: required")
	case !channelNameRE.MatchString(ch.Name):
		add(".name: must match %s", channelNameRE)
	}
	urlN := source(ch.URLEnv, ch.URLFile)
	secretN := source(ch.SecretEnv, ch.SecretFile)
	tokenN := source(ch.TokenEnv, ch.TokenFile)
	for _, p := range []struct{ key, env, file string }{
		{"url", ch.URLEnv, ch.URLFile}, {"secret", ch.SecretEnv, ch.SecretFile}, {"token", ch.TokenEnv, ch.TokenFile},
	} {
		if p.env != "" && p.file != "" {
			add(": set only one of %s_env or %s_file", p.key, p.key)
		}
		if p.env != "" && !validVarName(p.env) {
			add(".%s_env %q: not a variable name", p.key, p.env)
		}
		if p.file != "" && strings.TrimSpace(p.file) != p.file {
			add(".%s_file %q: padded with spaces", p.key, p.file)
		}
	}
	switch ch.Type {
	case ChannelWebhook:
		if urlN == 0 {
			add(": a webhook needs url_env or url_file (the URL is a secret: never inline)")
		}
		if secretN == 0 {
			add(": a webhook needs secret_env or secret_file (the key of Toolgate-Signature)")
		}
		if tokenN > 0 || ch.Channel != "" || ch.APIURL != "" {
			add(": token_env, token_file, channel and api_url are only for slack channels")
		}
	case ChannelSlack:
		switch {
		case tokenN > 0 && urlN > 0:
			add(": set a bot token (token_env or token_file) or an incoming-webhook URL (url_env or url_file), not both")
		case tokenN > 0 && ch.Channel == "":
			add(".channel: required with a bot token (the Slack channel id to post to)")
		case tokenN == 0 && urlN == 0:
			add(": a slack channel needs a bot token (token_env or token_file, with channel) or an incoming-webhook URL (url_env or url_file)")
		case urlN > 0 && ch.Channel != "":
			add(".channel: only with a bot token (an incoming webhook posts to its own channel)")
		}
		if ch.Channel != "" && strings.ContainsFunc(ch.Channel, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			add(".channel %q: must not contain spaces or control characters", ch.Channel)
		}
		if ch.APIURL != "" {
			if err := checkHTTPURL(ch.APIURL); err != nil {
				add(".api_url %q: %w", ch.APIURL, err)
			}
		}
	case "":
		add(".type: required (webhook or slack)")
	default:
		add(".type %q: want webhook or slack", ch.Type)
	}
	for k, e := range ch.Events {
		if !slices.Contains(notifyEvents, e) {
			add(".events[%d] %q: want one of %s", k, e, strings.Join(notifyEvents, ", "))
		}
	}
	for k, r := range ch.Rules {
		if strings.TrimSpace(r) == "" {
			add(".rules[%d]: empty", k)
		}
	}
	for k, s := range ch.Servers {
		if _, ok := c.Servers[s]; !ok {
			add(".servers[%d]: %s", k, c.unknownServer(s))
		}
	}
	if ch.MaxAge < 0 {
		add(".max_age %s: must be > 0 (or omitted for %s)", ch.MaxAge, DefaultMaxAge)
	}
	return errs
}

// source counts how many of an _env/_file pair are set.
func source(env, file string) int {
	n := 0
	if env != "" {
		n++
	}
	if file != "" {
		n++
	}
	return n
}

// checkHTTPURL checks that s is an absolute http or https URL with a host
// and no user information. Errors do not repeat s.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errors.New("does not parse as a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q, want http or https", u.Scheme)
	case u.Host == "":
		return errors.New("no host")
	case u.User != nil:
		return errors.New("must not hold user information")
	}
	return nil
}

// EffectiveMaxAge returns MaxAge, or DefaultMaxAge when it is 0.
func (ch NotifyChannel) EffectiveMaxAge() time.Duration {
	if ch.MaxAge > 0 {
		return ch.MaxAge
	}
	return DefaultMaxAge
}

// EffectiveEvents returns Events, or DefaultNotifyEvents when it is empty.
func (ch NotifyChannel) EffectiveEvents() []string {
	if len(ch.Events) > 0 {
		return slices.Clone(ch.Events)
	}
	return slices.Clone(DefaultNotifyEvents)
}

// EffectiveAPIURL returns APIURL without a trailing slash, or
// DefaultSlackAPI when it is empty.
func (ch NotifyChannel) EffectiveAPIURL() string {
	if ch.APIURL == "" {
		return DefaultSlackAPI
	}
	return strings.TrimRight(ch.APIURL, "/")
}

// ChannelSecrets are the secrets of one notification channel, read at
// serve time by [Config.NotifySecrets]. Empty fields are not configured.
// Never log them.
type ChannelSecrets struct {
	URL    string // webhook endpoint or Slack incoming-webhook URL
	Secret string // webhook HMAC key or Slack signing secret
	Token  string // Slack bot token
}

// NotifySecrets reads the secrets of every notification channel, in the
// order of notify.channels: variables with env (set but empty is an
// error), files with readFile (contents trimmed of surrounding white space;
// empty is an error). A URL must be an absolute http or https URL with a
// host. The error joins every problem, each naming the channel and the
// variable or file, never a value. Call it at serve time, after Validate,
// with the ReadFile of [Config.ReadFiles]: a secret file that is not
// private is then its error here.
func (c Config) NotifySecrets(env Env, readFile func(string) ([]byte, error)) ([]ChannelSecrets, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	var errs []error
	out := make([]ChannelSecrets, len(c.Notify.Channels))
	for i, ch := range c.Notify.Channels {
		where := fmt.Sprintf("notify.channels[%d] %q", i, ch.Name)
		read := func(key, envName, file string) string {
			switch {
			case envName != "":
				v, ok := env(envName)
				if !ok {
					errs = append(errs, fmt.Errorf("%s: %s_env %s is not set", where, key, envName))
				} else if v == "" {
					errs = append(errs, fmt.Errorf("%s: %s_env %s is empty", where, key, envName))
				}
				return v
			case file != "":
				if readFile == nil {
					errs = append(errs, fmt.Errorf("%s: %s_file %s: no file reader", where, key, file))
					return ""
				}
				b, err := readFile(file)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", where, readError(key+"_file", file, err)))
					return ""
				}
				b = bytes.TrimSpace(b)
				if len(b) == 0 {
					errs = append(errs, fmt.Errorf("%s: %s_file %s is empty", where, key, file))
				}
				return string(b)
			}
			return ""
		}
		s := ChannelSecrets{
			URL:    read("url", ch.URLEnv, ch.URLFile),
			Secret: read("secret", ch.SecretEnv, ch.SecretFile),
			Token:  read("token", ch.TokenEnv, ch.TokenFile),
		}
		if s.URL != "" {
			if err := checkHTTPURL(s.URL); err != nil {
				from := "url_env " + ch.URLEnv
				if ch.URLFile != "" {
					from = "url_file " + ch.URLFile
				}
				errs = append(errs, fmt.Errorf("%s: %s: %w", where, from, err))
			}
		}
		out[i] = s
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// notifyFiles lists the secret files of the notification channels, which
// ReadFiles reads as private.
func (c Config) notifyFiles() []string {
	var out []string
	for _, ch := range c.Notify.Channels {
		for _, p := range []string{ch.URLFile, ch.SecretFile, ch.TokenFile} {
			if p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// notifyWarnings lists valid but suspicious notification settings (see
// Warnings).
func (c Config) notifyWarnings() []string {
	var warns []string
	warn := func(format string, args ...any) { warns = append(warns, fmt.Sprintf(format, args...)) }
	p := &c.Policy
	known := func(rule string) bool {
		if rule == "default" || rule == "session require_approval" {
			return true
		}
		for i := range p.Rules {
			if p.RuleName(i) == rule {
				return true
			}
		}
		return false
	}
	interactive := false // a Slack channel can verify button clicks
	for i, ch := range c.Notify.Channels {
		for k, r := range ch.Rules {
			if r != "" && !known(r) {
				warn("notify.channels[%d] %q.rules[%d]: %q names no rule of the policy in this file", i, ch.Name, k, r)
			}
		}
		if ch.Type == ChannelSlack && source(ch.SecretEnv, ch.SecretFile) > 0 {
			interactive = true
		}
	}
	chat := slices.ContainsFunc(p.Rules, func(r policy.Rule) bool { return r.ChatApproval })
	mapped := slices.ContainsFunc(c.Approvers, func(a Approver) bool { return a.SlackUserID != "" })
	switch {
	case chat && !interactive:
		warn("some policy rules set chat_approval, but no slack channel has a signing secret (secret_env or secret_file): no buttons are shown")
	case chat && !mapped:
		warn("some policy rules set chat_approval, but no approver has a slack_user_id: every button click is refused")
	}
	return warns
}

// MinWebhookSecretBytes is the length under which ShortNotifySecrets warns
// about a webhook's signing secret: the 32 bytes of a SHA-256 output, the
// hash of Toolgate-Signature's HMAC. RFC 2104 (section 3) calls keys
// shorter than the hash output "strongly discouraged": a short key makes
// signatures a receiver cannot tell from a guesser's.
const MinWebhookSecretBytes = 32

// ShortNotifySecrets returns a warning for every webhook channel whose
// signing secret, read from secret_env or secret_file as NotifySecrets
// reads it, is shorter than MinWebhookSecretBytes bytes. Each warning names
// the channel, the variable or file and the length, never the secret.
// Secrets that cannot be read are NotifySecrets' errors, not warnings; a
// Slack signing secret is Slack's to choose and is not checked.
func (c Config) ShortNotifySecrets(env Env, readFile func(string) ([]byte, error)) []string {
	var out []string
	for i, ch := range c.Notify.Channels {
		if ch.Type != ChannelWebhook {
			continue
		}
		var v, src string
		switch {
		case ch.SecretEnv != "" && env != nil:
			v, _ = env(ch.SecretEnv)
			src = "secret_env " + ch.SecretEnv
		case ch.SecretFile != "" && readFile != nil:
			b, err := readFile(ch.SecretFile)
			if err != nil {
				continue
			}
			v, src = string(bytes.TrimSpace(b)), "secret_file "+ch.SecretFile
		}
		if n := len(v); n > 0 && n < MinWebhookSecretBytes {
			out = append(out, fmt.Sprintf("notify.channels[%d] %q: the signing secret of %s is %d bytes long; an HMAC-SHA256 key under %d bytes (RFC 2104) weakens Toolgate-Signature: use a random one (openssl rand -hex 32 makes 64)", i, ch.Name, src, n, MinWebhookSecretBytes))
		}
	}
	return out
}
