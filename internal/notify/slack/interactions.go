package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Reviewer records reviews; *gate.Gate has it, and so the admin API and
// the interaction endpoint decide through the same code (eligibility,
// self-review, quorum, tenants, expiry, hash pinning). Errors are those of
// gate.Gate.Review.
type Reviewer interface {
	Get(ctx context.Context, id approval.ID) (approval.Request, error)
	Review(ctx context.Context, id approval.ID, reviewer approval.Principal, v approval.Verdict, reason, pinnedHash string) (approval.Request, error)
}

// An Approver is the toolgate approver a Slack user id maps to
// (approvers[].slack_user_id).
type Approver struct {
	Principal approval.Principal
	Roles     []string
}

// An App is a Slack app whose interactions are accepted: its signing
// secret, and where to send the clicking user feedback (nil: nowhere).
type App struct {
	SigningSecret string
	Feedback      func(ctx context.Context, channel, user, text string) error
}

// Interaction outcomes, as counted by InteractionOptions.Count.
const (
	InteractionDecided      = "decided"       // a review was recorded (or repeated)
	InteractionRefused      = "refused"       // signed, but nothing was decided
	InteractionBadSignature = "bad_signature" // missing or wrong signature
	InteractionStale        = "stale"         // timestamp outside the replay window
)

// ReplayWindow is how far a request's X-Slack-Request-Timestamp may be from
// now: 5 minutes, as Slack recommends.
const ReplayWindow = 5 * time.Minute

// maxInteraction bounds the body of one interaction (Slack sends the
// whole message along).
const maxInteraction = 1 << 20

// InteractionOptions configures the interaction endpoint.
type InteractionOptions struct {
	// Apps are the Slack apps whose signatures are accepted; at least one.
	Apps []App
	// Approvers maps Slack user ids to approvers. Any other user is
	// refused and nothing is decided.
	Approvers map[string]Approver
	// ChatApproval reports whether a request may be decided from chat (its
	// rule has chat_approval, in the policy in force now); required.
	ChatApproval func(r approval.Request) bool
	// Reviewer records the reviews; required.
	Reviewer Reviewer
	// Logger gets one line per refused or failed interaction; default
	// discard.
	Logger *slog.Logger
	// Count, when set, counts each interaction's outcome.
	Count func(outcome string)
	// Now is the clock of the replay window; default time.Now.
	Now func() time.Time
}

// Interactions is the http.Handler of POST /v1/slack/interactions. It is
// safe for concurrent use. Feedback to the clicking user is sent by Run,
// after the answer (Slack wants one within 3 seconds).
type Interactions struct {
	o InteractionOptions
	q chan feedbackJob
}

// feedbackJob is one message to show a clicking user.
type feedbackJob struct {
	app                 *App
	channel, user, text string
}

// feedbackQueue bounds the messages waiting for Run; more are dropped
// (logged): feedback is a courtesy, the message update is the record.
const feedbackQueue = 64

// NewInteractions returns the interaction endpoint.
func NewInteractions(o InteractionOptions) (*Interactions, error) {
	switch {
	case len(o.Apps) == 0:
		return nil, errors.New("slack interactions: no signing secret")
	case o.Reviewer == nil || o.ChatApproval == nil:
		return nil, errors.New("slack interactions: a reviewer and a chat-approval check are required")
	}
	for _, a := range o.Apps {
		if a.SigningSecret == "" {
			return nil, errors.New("slack interactions: empty signing secret")
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Interactions{o: o, q: make(chan feedbackJob, feedbackQueue)}, nil
}

// Run sends the queued feedback messages until ctx ends, each under a
// 5-second timeout.
func (h *Interactions) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case j := <-h.q:
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := j.app.Feedback(fctx, j.channel, j.user, j.text); err != nil {
				h.o.Logger.WarnContext(ctx, "slack: feedback to the user failed", "err", err)
			}
			cancel()
		}
	}
}

// Errors of VerifySignature.
var (
	ErrBadSignature = errors.New("slack: bad signature")
	ErrStale        = errors.New("slack: request timestamp outside the replay window")
)

// VerifySignature checks Slack's request signature: sig must be "v0=" +
// hex HMAC-SHA256(secret, "v0:" + ts + ":" + body) (compared in constant
// time) and ts (unix seconds) within ReplayWindow of now, either way. It
// returns nil, ErrBadSignature or ErrStale.
func VerifySignature(secret, ts, sig string, body []byte, now time.Time) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	got, herr := hex.DecodeString(hexSig)
	if err != nil || !ok || herr != nil {
		return ErrBadSignature
	}
	if !hmac.Equal(got, signature(secret, ts, body)) {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > ReplayWindow || d < -ReplayWindow {
		return ErrStale
	}
	return nil
}

// Sign returns Slack's X-Slack-Signature for body sent at ts (for tests
// and stand-ins).
func Sign(secret, ts string, body []byte) string {
	return "v0=" + hex.EncodeToString(signature(secret, ts, body))
}

func signature(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return m.Sum(nil)
}

// payload is the part of a block_actions interaction the endpoint reads.
type payload struct {
	Type string `json:"type"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Channel struct {
		ID string `json:"id"`
	} `json:"channel"`
	Actions []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// refusal is an answer that decides nothing: status, a code and a message
// for the clicking user.
type refusal struct {
	status int
	code   string
	msg    string
	err    error // logged only
}

func (e *refusal) Error() string { return e.code + ": " + e.msg }

func refuse(status int, code, msg string) *refusal {
	return &refusal{status: status, code: code, msg: msg}
}

func (h *Interactions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInteraction))
	if err != nil {
		h.answer(w, r, refuse(http.StatusRequestEntityTooLarge, "too_large", "the request is too large"))
		return
	}
	ts, sig := r.Header.Get("X-Slack-Request-Timestamp"), r.Header.Get("X-Slack-Signature")
	var app *App
	stale := false
	for i := range h.o.Apps {
		err := VerifySignature(h.o.Apps[i].SigningSecret, ts, sig, body, h.o.Now())
		if err == nil {
			app = &h.o.Apps[i]
			break
		}
		stale = stale || errors.Is(err, ErrStale)
	}
	if app == nil {
		outcome, e := InteractionBadSignature, refuse(http.StatusUnauthorized, "bad_signature", "the Slack signature does not verify")
		if stale {
			outcome, e = InteractionStale, refuse(http.StatusUnauthorized, "stale", "the request is older than 5 minutes (or from the future): replays are refused")
		}
		h.count(outcome)
		h.answer(w, r, e)
		return
	}
	p, verdict, id, hash, perr := parse(body)
	if perr != nil {
		h.count(InteractionRefused)
		h.answer(w, r, perr)
		return
	}
	got, rerr := h.decide(r.Context(), p.User.ID, verdict, id, hash)
	if rerr != nil {
		h.count(InteractionRefused)
		h.feedback(r.Context(), app, p, rerr.msg)
		h.answer(w, r, rerr)
		return
	}
	h.count(InteractionDecided)
	note := fmt.Sprintf("Your %s of %s · %s was recorded; the request is %s", verdictNoun(verdict), got.Server, got.Tool, got.State)
	call := got.Kind == "" || got.Kind == approval.KindToolCall
	switch {
	case got.State == approval.StatePending:
		note += fmt.Sprintf(" (%d of %d approvals)", approvals(got), max(got.RequiredApprovals, 1))
	case got.State == approval.StateInvalidated:
		// The approval's own transaction consumed the call held here,
		// and the re-check refused it (Gate.ReviewIf).
		note += ": the call did not run (" + got.Reason + ")"
	case got.State == approval.StateApproved && call && got.Mode == "retry":
		// The decision is recorded before the call is dispatched (or
		// checked and invalidated): say no more than that.
		note += fmt.Sprintf(" (%d of %d approvals); the call runs when its caller re-sends it, if the re-check against the policy in force admits it", approvals(got), max(got.RequiredApprovals, 1))
	case got.State == approval.StateApproved && call && h.heldAsTask(r.Context(), got):
		note += fmt.Sprintf(" (%d of %d approvals); held as an MCP task, the call runs when its holder %s, whether or not the agent is still connected", approvals(got), max(got.RequiredApprovals, 1), approval.RecheckWords)
	case got.State == approval.StateApproved && call:
		// As the CLI says it (newuser19): a caller that went away can
		// still take it up by re-sending the identical call; and the
		// dispatch re-check may still invalidate it (explain50).
		note += fmt.Sprintf(" (%d of %d approvals); the call runs when its holder %s, if its caller is still waiting or re-sends it", approvals(got), max(got.RequiredApprovals, 1), approval.RecheckWords)
	}
	h.feedback(r.Context(), app, p, note+".")
	h.o.Logger.InfoContext(r.Context(), "approval reviewed from Slack", "approval", id, "slack_user", p.User.ID, "verdict", verdict, "state", got.State)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "state": got.State})
}

// heldAsTask reports whether r holds a call made as an MCP task, when
// the Reviewer can tell (a HeldAsTask method, as *gate.Gate has); a
// failed look-up is logged and reads as not a task.
func (h *Interactions) heldAsTask(ctx context.Context, r approval.Request) bool {
	th, ok := h.o.Reviewer.(interface {
		HeldAsTask(ctx context.Context, id approval.ID) (bool, error)
	})
	if !ok || r.Mode != "hold" {
		return false
	}
	task, err := th.HeldAsTask(ctx, r.ID)
	if err != nil {
		h.o.Logger.WarnContext(ctx, "cannot tell whether an approval holds a task", "approval", r.ID, "err", err)
	}
	return task
}

// parse reads a block_actions payload with one toolgate button.
func parse(body []byte) (payload, approval.Verdict, approval.ID, string, *refusal) {
	var p payload
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		return p, "", "", "", refuse(http.StatusBadRequest, "invalid_request", "want a form with a payload")
	}
	if err := json.Unmarshal([]byte(form.Get("payload")), &p); err != nil {
		return p, "", "", "", refuse(http.StatusBadRequest, "invalid_request", "the payload is not JSON")
	}
	if p.Type != "block_actions" || len(p.Actions) != 1 || p.User.ID == "" {
		return p, "", "", "", refuse(http.StatusBadRequest, "invalid_request", "want one block action by a user")
	}
	var v approval.Verdict
	switch p.Actions[0].ActionID {
	case ActionApprove:
		v = approval.VerdictApprove
	case ActionDeny:
		v = approval.VerdictDeny
	default:
		return p, "", "", "", refuse(http.StatusBadRequest, "invalid_request", "not a toolgate button")
	}
	id, hash, ok := strings.Cut(p.Actions[0].Value, " ")
	if !ok || id == "" || !strings.HasPrefix(hash, "sha256:") {
		return p, "", "", "", refuse(http.StatusBadRequest, "invalid_request", "the button carries no approval id and hash")
	}
	return p, v, approval.ID(id), hash, nil
}

// decide applies the click of Slack user on id, pinned to hash, after the
// checks that belong to chat: a mapped approver with a reviewing role, a
// tool call, and a rule with chat_approval. Everything else is the gate's.
func (h *Interactions) decide(ctx context.Context, user string, v approval.Verdict, id approval.ID, hash string) (approval.Request, *refusal) {
	a, ok := h.o.Approvers[user]
	if !ok {
		return approval.Request{}, refuse(http.StatusForbidden, "unknown_user", "your Slack account is not mapped to a toolgate approver (approvers[].slack_user_id); nothing was decided")
	}
	if !slices.Contains(a.Roles, "approver") && !slices.Contains(a.Roles, "admin") {
		return approval.Request{}, refuse(http.StatusForbidden, "forbidden", "your toolgate account has no approver or admin role; nothing was decided")
	}
	r, err := h.o.Reviewer.Get(ctx, id)
	if err == nil && a.Principal.Tenant != "" && r.Tenant != a.Principal.Tenant {
		err = store.ErrNotFound // another tenant's request is not found, as in the API
	}
	if err != nil {
		return approval.Request{}, reviewRefusal(id, err)
	}
	if r.Kind != "" && r.Kind != approval.KindToolCall {
		return approval.Request{}, refuse(http.StatusForbidden, "chat_approval_off", "policy changes cannot be decided from chat; use the inbox or the CLI")
	}
	if !h.o.ChatApproval(r) {
		return approval.Request{}, refuse(http.StatusForbidden, "chat_approval_off", fmt.Sprintf("rule %q does not allow deciding from chat (chat_approval); use the inbox or the CLI", r.Rule))
	}
	if v == approval.VerdictApprove && !argumentsFit(argumentSummary(r.Arguments)) {
		// The message could not show them whole (render offers no Approve
		// then); a click from an older message or a forged one is refused.
		return approval.Request{}, refuse(http.StatusForbidden, "arguments_not_shown", "the arguments are too long to show in Slack; approve in the inbox or with the CLI; nothing was decided")
	}
	reason := ""
	if v == approval.VerdictDeny {
		reason = "denied from Slack by " + a.Principal.ID
	}
	got, err := h.o.Reviewer.Review(ctx, id, a.Principal, v, reason, hash)
	if errors.Is(err, approval.ErrDuplicate) {
		return got, nil // the same click again: nothing changes
	}
	if err != nil {
		return approval.Request{}, reviewRefusal(id, err)
	}
	return got, nil
}

// reviewRefusal maps the errors of Reviewer as the admin API does.
func reviewRefusal(id approval.ID, err error) *refusal {
	e := &refusal{err: err}
	switch {
	case errors.Is(err, store.ErrNotFound):
		e.status, e.code, e.msg = http.StatusNotFound, "not_found", fmt.Sprintf("no approval %s", id)
	case errors.Is(err, approval.ErrSelfReview):
		e.status, e.code, e.msg = http.StatusForbidden, "self_review", "you cannot review a call you requested or that acts for you"
	case errors.Is(err, approval.ErrNotEligible):
		e.status, e.code, e.msg = http.StatusForbidden, "not_eligible", "you are not among the approvers of this request's rule"
	case errors.Is(err, approval.ErrHashMismatch):
		e.status, e.code, e.msg = http.StatusConflict, "hash_mismatch", "the request's arguments are not the ones this message showed"
	case errors.Is(err, approval.ErrExpired):
		e.status, e.code, e.msg = http.StatusConflict, "expired", "the request has expired"
	case errors.Is(err, approval.ErrResolved):
		e.status, e.code, e.msg = http.StatusConflict, "resolved", "the request is no longer pending"
	case errors.Is(err, approval.ErrConflict):
		e.status, e.code, e.msg = http.StatusConflict, "conflict", "you already gave the other verdict"
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		e.status, e.code, e.msg = http.StatusServiceUnavailable, "unavailable", "the approval store is unavailable; try again"
	default:
		e.status, e.code, e.msg = http.StatusInternalServerError, "internal", "internal error"
	}
	return e
}

func verdictNoun(v approval.Verdict) string {
	if v == approval.VerdictDeny {
		return "denial"
	}
	return "approval"
}

// answer writes a refusal as the admin API writes errors.
func (h *Interactions) answer(w http.ResponseWriter, r *http.Request, e *refusal) {
	level := slog.LevelWarn
	if e.status >= 500 {
		level = slog.LevelError
	}
	attrs := []any{"status", e.status, "code", e.code}
	if e.err != nil {
		attrs = append(attrs, "err", e.err)
	}
	h.o.Logger.Log(r.Context(), level, "slack interaction refused", attrs...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": e.code, "message": e.msg}})
}

// feedback queues text for the clicking user; see Run.
func (h *Interactions) feedback(ctx context.Context, app *App, p payload, text string) {
	if app.Feedback == nil {
		return
	}
	select {
	case h.q <- feedbackJob{app, p.Channel.ID, p.User.ID, text}:
	default:
		h.o.Logger.WarnContext(ctx, "slack: feedback queue full; message dropped")
	}
}

func (h *Interactions) count(outcome string) {
	if h.o.Count != nil {
		h.o.Count(outcome)
	}
}
