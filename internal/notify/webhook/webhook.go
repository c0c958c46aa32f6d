// Package webhook is the webhook notification channel: each event is a
// signed JSON POST to the receiver's URL (issue 14; docs/notifications.md).
//
// The body is a [Body]: the event and the approval as the admin API shows
// it (the redacted display copy of the arguments, never the raw ones).
// Headers: Toolgate-Event-Id (the same on every attempt: deduplicate by
// it), Toolgate-Delivery-Attempt, and Toolgate-Signature:
// t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>, made anew
// for each attempt. Receivers check it with [Verify] (or the snippet in
// docs/notifications.md) and reject a t older than 5 minutes.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/notify"
)

// Headers of every request.
const (
	HeaderEventID   = "Toolgate-Event-Id"
	HeaderSignature = "Toolgate-Signature"
	HeaderAttempt   = "Toolgate-Delivery-Attempt"
)

// Tolerance is how old (or how far ahead) a signature's t may be for
// [Verify] to accept it: 5 minutes, as issue 14 asks receivers to check.
const Tolerance = 5 * time.Minute

// Body is the JSON body of a webhook request.
type Body struct {
	// ID is the event id: the same on every attempt, and for every channel
	// announcing the event. Receivers deduplicate by it.
	ID string `json:"id"`
	// Type is the event: requested, reviewed, approved, denied, expired,
	// cancelled, consumed, invalidated or dispatched (a channel's
	// dispatch_failed selects dispatched events whose
	// Approval.DispatchOutcome is not ok).
	Type string `json:"type"`
	// Seq is the event's sequence number in toolgate's event log
	// (GET /v1/events?since=).
	Seq int64 `json:"seq"`
	// At is when the event happened (RFC 3339, UTC); Actor who made it.
	At    time.Time `json:"at"`
	Actor string    `json:"actor,omitempty"`
	// State is the approval's state as the event left it; Approval.State
	// is its state when the request was sent, which may be later.
	State   string `json:"state"`
	Channel string `json:"channel"`
	// Approval is the approval as GET /v1/approvals/{id} returns it, with
	// the redacted display copy of the arguments.
	Approval api.Approval `json:"approval"`
	// InboxURL links to the approval in the web inbox, when
	// approvals.public_url is set.
	InboxURL string `json:"inbox_url,omitempty"`
}

// Options configures a Webhook. A nil *Options gives the defaults.
type Options struct {
	// Client sends the requests; default a client that follows no
	// redirects (a redirect counts as a failed attempt, so the body and
	// its signature never go to another URL). Its timeout, if any, adds
	// to the outbox's per-attempt timeout.
	Client *http.Client
	// PublicURL is approvals.public_url: Body.InboxURL is
	// PublicURL + "/ui/approvals/" + id. Empty: no link.
	PublicURL string
	// UserAgent is sent as User-Agent; default "toolgate".
	UserAgent string
	// Now is the clock of the signature's t; default time.Now.
	Now func() time.Time
}

// Webhook is a notify.Channel that POSTs to one URL. It is safe for
// concurrent use.
type Webhook struct {
	url    string
	secret []byte
	o      Options
}

var _ notify.Channel = (*Webhook)(nil)

// New returns a Webhook posting to rawURL (http or https) signed with
// secret (not empty). Errors never repeat the URL: it may hold a
// credential.
func New(rawURL, secret string, opts *Options) (*Webhook, error) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return nil, errors.New("webhook: the URL does not parse")
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, errors.New("webhook: want an http or https URL with a host")
	case secret == "":
		return nil, errors.New("webhook: empty signing secret")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.UserAgent == "" {
		o.UserAgent = "toolgate"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	return &Webhook{url: rawURL, secret: []byte(secret), o: o}, nil
}

// Encode returns the body of the request announcing m: compact JSON of
// [Body], with characters that could hide text escaped as the admin API
// escapes them (api.EscapeJSON), and no HTML escaping.
func Encode(m notify.Message, publicURL string) ([]byte, error) {
	b := Body{
		ID: m.EventID, Type: string(m.Event.Type), Seq: m.Event.Seq, At: m.Event.At.UTC(), Actor: m.Event.Actor,
		State: string(m.Event.State), Channel: m.Channel, Approval: api.FromRequest(m.Request),
	}
	if publicURL != "" {
		b.InboxURL = strings.TrimRight(publicURL, "/") + "/ui/approvals/" + url.PathEscape(string(m.Request.ID))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return nil, fmt.Errorf("encode webhook body: %w", err)
	}
	return api.EscapeJSON(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// Deliver POSTs m. A 2xx answer delivers it. Any other answer, or no
// answer, is an error saying only the status or the kind of failure (never
// the URL or the response body); a 429 or 503 with Retry-After asks the
// outbox to wait that long; a 401 or 403 is a refusal (notify.Refused:
// retried, logged at WARN).
func (w *Webhook) Deliver(ctx context.Context, m notify.Message) (string, error) {
	body, err := Encode(m, w.o.PublicURL)
	if err != nil {
		return "", notify.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return "", notify.Permanent(errors.New("webhook: cannot build the request"))
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", w.o.UserAgent)
	h.Set(HeaderEventID, m.EventID)
	h.Set(HeaderAttempt, strconv.Itoa(m.Attempt))
	h.Set(HeaderSignature, Sign(w.secret, w.o.Now(), body))
	resp, err := w.o.Client.Do(req)
	if err != nil {
		return "", safe(err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return "", nil
	}
	err = fmt.Errorf("receiver answered %d", resp.StatusCode)
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return "", notify.Refused(err) // its secret differs: a configuration error, retried but logged at WARN
	}
	if after, ok := RetryAfter(resp); ok {
		return "", notify.RetryAfter(err, after)
	}
	return "", err
}

// RetryAfter returns the wait a 429 or 503 answer asks for in its
// Retry-After header (seconds, or an HTTP date), capped at an hour.
func RetryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	} else {
		return 0, false
	}
	return min(max(d, 0), time.Hour), true
}

// safe returns err without the request URL that *url.Error carries.
func safe(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		switch {
		case ue.Timeout():
			return errors.New("webhook: no answer within the timeout")
		case errors.Is(ue.Err, context.Canceled):
			return fmt.Errorf("webhook: %w", context.Canceled)
		}
		return fmt.Errorf("webhook: %s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// Sign returns the Toolgate-Signature value for body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>".
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("webhook: bad signature")
	ErrStale        = errors.New("webhook: signature timestamp outside the tolerance")
)

// Verify checks header, a Toolgate-Signature value, against body and
// secret: one of its v1 entries must be the HMAC of t + "." + body
// (compared in constant time), and t must be within tolerance of now
// (older or ahead). It returns nil, ErrBadSignature (also for a malformed
// header) or ErrStale.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var (
		ts   string
		sigs [][]byte
	)
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrBadSignature
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if s, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, s)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignature
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			ok = true
		}
	}
	if !ok {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}
