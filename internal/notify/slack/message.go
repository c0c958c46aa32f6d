package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"toolgate/internal/approval"
)

// Action ids of the buttons; the value of both is "<approval id> <arguments
// hash>", so a click decides exactly the request, and arguments, shown.
const (
	ActionApprove = "toolgate_approve"
	ActionDeny    = "toolgate_deny"
)

// message is a Slack message: a fallback text (notifications, clients
// without blocks) and Block Kit blocks.
type message struct {
	Text   string           `json:"text"`
	Blocks []map[string]any `json:"blocks"`
}

type renderOptions struct {
	publicURL string // inbox base URL, or ""
	buttons   bool   // show approve and deny on a pending request
}

// Limits of Slack's Block Kit (characters) that the message keeps under.
const (
	maxHeader  = 150
	maxSummary = 300 // one line of arguments: enough to recognise, the inbox has the rest
	maxField   = 500
)

// render builds the message for r as it stands. Everything taken from the
// request is either plain_text or escaped for mrkdwn (&, < and >), so an
// argument cannot mention anyone, link anywhere or format the message; the
// arguments are the display copy (secrets already hidden, hidden
// characters already escaped by the gate).
func render(r approval.Request, o renderOptions) message {
	status := statusText(r)
	subject := subjectText(r)
	var blocks []map[string]any
	blocks = append(blocks, map[string]any{"type": "header", "text": plain(clip(status+": "+subject, maxHeader))})
	summary := argumentSummary(r.Arguments)
	blocks = append(blocks, map[string]any{"type": "section", "text": plain(clip(summary, maxSummary))})
	approvable := argumentsFit(summary)

	requester := r.RequestedBy
	if r.OnBehalfOf != "" {
		requester += " (for " + r.OnBehalfOf + ")"
	}
	fields := []map[string]any{
		mrkdwn("*Requested by*\n" + escape(clip(requester, maxField))),
		mrkdwn("*Rule*\n" + escape(clip(r.Rule, maxField))),
	}
	if r.State == approval.StatePending {
		fields = append(fields, mrkdwn("*Expires*\n"+date(r.ExpiresAt.Unix(), r.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))))
		fields = append(fields, mrkdwn(fmt.Sprintf("*Approvals*\n%d of %d", approvals(r), max(r.RequiredApprovals, 1))))
	}
	if r.DecidedBy != "" {
		by := r.DecidedBy
		if r.Reason != "" {
			by += ": " + r.Reason
		}
		fields = append(fields, mrkdwn("*Decided by*\n"+escape(clip(by, maxField))))
	}
	blocks = append(blocks, map[string]any{"type": "section", "fields": fields})
	if o.buttons && r.State == approval.StatePending && !approvable {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []any{
			mrkdwn(":warning: The arguments are too long to show here in full: approve in the inbox or with the CLI."),
		}})
	}
	if len(r.DisplayWarnings) > 0 {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []any{
			mrkdwn(":warning: " + escape(clip(strings.Join(r.DisplayWarnings, "; "), maxField))),
		}})
	}
	blocks = append(blocks, map[string]any{"type": "context", "elements": []any{
		mrkdwn("Approval `" + escape(string(r.ID)) + "` · arguments `" + escape(r.ArgumentsHash) + "`"),
	}})

	var actions []any
	if o.publicURL != "" {
		actions = append(actions, map[string]any{"type": "button", "action_id": "toolgate_open", "text": plain("Open in inbox"),
			"url": o.publicURL + "/ui/approvals/" + url.PathEscape(string(r.ID))})
	}
	if o.buttons && r.State == approval.StatePending {
		value := string(r.ID) + " " + r.ArgumentsHash
		if approvable {
			actions = append(actions, map[string]any{"type": "button", "action_id": ActionApprove, "style": "primary", "text": plain("Approve"), "value": value,
				"confirm": confirm("Approve this call?", subject, "Approve")})
		}
		actions = append(actions, map[string]any{"type": "button", "action_id": ActionDeny, "style": "danger", "text": plain("Deny"), "value": value,
			"confirm": confirm("Deny this call?", subject, "Deny")})
	}
	if len(actions) > 0 {
		blocks = append(blocks, map[string]any{"type": "actions", "block_id": "toolgate_" + string(r.ID), "elements": actions})
	}
	return message{Text: escape(status + ": " + subject + ", requested by " + requester + ", rule " + r.Rule), Blocks: blocks}
}

// statusText says where r stands, in a few words.
func statusText(r approval.Request) string {
	switch r.State {
	case approval.StatePending:
		if r.Kind == approval.KindSessionPolicy || r.Kind == approval.KindPolicyChange {
			return "Policy change needs approval"
		}
		return "Approval needed"
	case approval.StateApproved:
		return "Approved by " + r.DecidedBy
	case approval.StateConsumed:
		return "Approved by " + r.DecidedBy + ", " + outcomeText(r.DispatchOutcome)
	case approval.StateDenied:
		return "Denied by " + r.DecidedBy
	case approval.StateExpired:
		if r.DecidedBy != "" {
			return "Approved but not used in time"
		}
		return "Expired: nobody decided in time"
	case approval.StateCancelled:
		return "Cancelled"
	case approval.StateInvalidated:
		if r.Reason != "" { // what the dispatch re-check found: "policy now denies the call (rule …)"
			return "Approved by " + r.DecidedBy + ", then invalidated (" + r.Reason + "): it did not run"
		}
		return "Approved by " + r.DecidedBy + ", then invalidated: it did not run"
	}
	return string(r.State)
}

// outcomeText says what became of a consumed request's call: whether it
// ran, as far as toolgate knows, and never more than it knows.
func outcomeText(o approval.Outcome) string {
	switch o {
	case approval.OutcomeNone:
		return "running"
	case approval.OutcomeOK:
		return "ran"
	case approval.OutcomeToolError:
		return "ran, the tool reported an error"
	case approval.OutcomeTransportError:
		return "transport error, it may not have run"
	case approval.OutcomeCancelledAfterDispatch:
		return "cancelled after it was sent, it may have run"
	case approval.OutcomeUnknown:
		return "outcome unknown (the instance died), it may have run"
	}
	return "outcome " + string(o)
}

// subjectText names what is to be approved.
func subjectText(r approval.Request) string {
	switch r.Kind {
	case approval.KindSessionPolicy:
		return "session " + r.Target + " policy"
	case approval.KindPolicyChange:
		return "deployment policy"
	case approval.KindPromptGet: // Tool is the real prompt name
		return r.Server + " · prompt " + r.Tool
	case approval.KindResourceRead: // Tool is the real resource URI
		return r.Server + " · resource " + r.Tool
	}
	return r.Server + " · " + r.Tool
}

// argumentsFit reports whether summary (argumentSummary) is shown whole,
// not clipped at maxSummary. Only then may the message approve: an agent
// could otherwise pad the start of its arguments so that the part that
// matters is clipped away, and a click would approve what nobody saw.
func argumentsFit(summary string) bool { return utf8.RuneCountInString(summary) <= maxSummary }

// argumentSummary is the display copy as one line of compact JSON.
func argumentSummary(args []byte) string {
	if len(args) == 0 {
		return "(no arguments)"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return "(arguments not shown)"
	}
	return buf.String()
}

func approvals(r approval.Request) int {
	n := 0
	for _, rv := range r.Reviews {
		if rv.Verdict == approval.VerdictApprove {
			n++
		}
	}
	return n
}

// escape makes s safe as mrkdwn text: Slack's three control characters
// become entities, so no <@user>, <!channel> or <url|label> can form.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// clip shortens s to at most n characters, ending it with "…" if cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func plain(s string) map[string]any {
	if s == "" {
		s = " "
	}
	return map[string]any{"type": "plain_text", "text": s, "emoji": false}
}

func mrkdwn(s string) map[string]any {
	return map[string]any{"type": "mrkdwn", "text": s, "verbatim": true}
}

// date is Slack's date token for unix seconds, with a fallback text.
func date(unix int64, fallback string) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", unix, escape(fallback))
}

func confirm(title, text, yes string) map[string]any {
	return map[string]any{"title": plain(title), "text": plain(clip(text, maxField)), "confirm": plain(yes), "deny": plain("Cancel")}
}
