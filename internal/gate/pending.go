package gate

import (
	"fmt"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// InboxLink is the approver inbox's page of approval id
// (<approvals.public_url>/ui/approvals/<id>), or "" when no public URL is
// configured.
func (g *Gate) InboxLink(id approval.ID) string { return g.inboxLink(id) }

// Instance is the id this gateway process writes as held_by on the calls
// it holds (Options.Instance, else a random id chosen by New); serve logs
// it at start so an operator can tell instances apart in approvals show.
func (g *Gate) Instance() string { return g.instance }

// pendingAnswer is the answer of a call that waits for a decision on r
// but is answered now (max hold, multi round-trip): it names the approval,
// where to review it and how to continue.
func (g *Gate) pendingAnswer(r approval.Request) Admission {
	where := ""
	if link := g.inboxLink(r.ID); link != "" {
		where = "; an approver can review it at " + link
	}
	meta := g.approvalMeta(r)
	return Admission{
		ApprovalID: r.ID,
		Pending:    true,
		Held:       heldCopy(r),
		Meta:       meta,
		Message: fmt.Sprintf("approval %s is pending (%s, rule %q)%s. Nothing was run yet. "+
			"Re-send the identical call to continue: it waits for the decision and runs once approved. The request expires at %s.",
			r.ID, progressOf(r), r.Rule, where, r.ExpiresAt.UTC().Format(time.RFC3339)),
	}
}

// progressOf says how many of the required approvals r has.
func progressOf(r approval.Request) string {
	n := 0
	seen := map[string]bool{}
	for _, rv := range r.Reviews {
		if rv.Verdict == approval.VerdictApprove && !seen[rv.By] {
			seen[rv.By] = true
			n++
		}
	}
	return fmt.Sprintf("%d of %d approvals", n, max(r.RequiredApprovals, 1))
}

// StatusMessage is a short account of where the call of approval r
// stands, for a task's statusMessage: "awaiting approval <id>: 1 of 2
// approvals; expires 12:05:30Z; <inbox link>" while pending, then what was
// decided and whether the call ran. It carries no approver's free text
// (a reason), which the model would read: denial reasons go in the
// result only.
func (g *Gate) StatusMessage(r approval.Request) string {
	switch r.State {
	case approval.StatePending:
		parts := []string{fmt.Sprintf("awaiting approval %s: %s", r.ID, progressOf(r)), "expires " + g.shortTime(r.ExpiresAt)}
		if link := g.inboxLink(r.ID); link != "" {
			parts = append(parts, link)
		}
		return strings.Join(parts, "; ")
	case approval.StateApproved:
		return fmt.Sprintf("approval %s approved by %s; the call is about to run", r.ID, r.DecidedBy)
	case approval.StateConsumed:
		switch r.DispatchOutcome {
		case approval.OutcomeNone:
			return fmt.Sprintf("approval %s approved by %s; the call is running", r.ID, r.DecidedBy)
		case approval.OutcomeUnknown:
			return fmt.Sprintf("approval %s: the outcome of the run is unknown (the gateway instance running it stopped); it is not run again", r.ID)
		case approval.OutcomeTransportError:
			return fmt.Sprintf("approval %s: the call ran but the server failed", r.ID)
		}
		return fmt.Sprintf("approval %s: the call ran", r.ID)
	case approval.StateDenied:
		return fmt.Sprintf("approval %s denied by %s; nothing was run", r.ID, r.DecidedBy)
	case approval.StateExpired:
		if r.Reason == approval.ReasonUnusedApproval {
			return fmt.Sprintf("approval %s timed out: approved but not used in time; nothing was run", r.ID)
		}
		return fmt.Sprintf("approval %s timed out: no decision before %s; nothing was run", r.ID, g.shortTime(r.ExpiresAt))
	case approval.StateCancelled:
		return fmt.Sprintf("approval %s %s; nothing was run", r.ID, cancelledWhy(r.Reason))
	case approval.StateInvalidated:
		return fmt.Sprintf("approval %s invalidated: %s; nothing was run", r.ID, r.Reason)
	}
	return fmt.Sprintf("approval %s is %s", r.ID, r.State)
}

// cancelledWhy says why a request was cancelled when its reason is one
// the gateway wrote (the session was revoked, the caller cancelled, the
// session's policy changed), else just "cancelled" (polish16). Only these
// fixed reasons are quoted: a statusMessage carries no free text.
func cancelledWhy(reason string) string {
	switch reason {
	case store.ReasonSessionRevoked:
		return reason // "cancelled: the session was revoked"
	case approval.ReasonCancelled:
		return "cancelled by its caller"
	case ReasonPolicyRevision:
		return "cancelled: " + ReasonPolicyRevision
	}
	return "cancelled"
}

// shortTime writes t as 15:04:05Z (UTC), with the date in front when it
// is not today's (UTC) by the gate's clock. To the second: a rule's
// timeout may be seconds long (to the minute, a 30-second request "timed
// out: no decision before" a time before it was made).
func (g *Gate) shortTime(t time.Time) string {
	t = t.UTC()
	if t.Format(time.DateOnly) == g.now().UTC().Format(time.DateOnly) {
		return t.Format("15:04:05Z")
	}
	return t.Format("2006-01-02 15:04:05Z")
}
