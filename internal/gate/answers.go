package gate

import (
	"context"
	"fmt"
	"time"

	"toolgate/internal/approval"
)

// approvalRequired is the answer of a call in retry mode whose request is
// still pending.
func (g *Gate) approvalRequired(r approval.Request, what string) Admission {
	where := ""
	if link := g.inboxLink(r.ID); link != "" {
		where = " An approver can review it at " + link + "."
	}
	return Admission{
		ApprovalID: r.ID,
		Message: fmt.Sprintf("%s: this call needs a human approval (approval %s, rule %q); nothing was run.%s "+
			"Re-send the identical call to wait for the decision; the request expires at %s.",
			what, r.ID, r.Rule, where, r.ExpiresAt.UTC().Format(time.RFC3339)),
		Meta: g.approvalMeta(r),
	}
}

// inboxLink is the approver inbox's page of id, or "" without
// Options.PublicURL.
func (g *Gate) inboxLink(id approval.ID) string {
	if g.opts.PublicURL == "" {
		return ""
	}
	return g.opts.PublicURL + "/ui/approvals/" + string(id)
}

// heldMessage is the progress message of a call held on request id of
// rule, which expires at expiresAt: the id, the rule, the inbox link when
// Options.PublicURL is set, and the expiry in RFC 3339 UTC; never the
// arguments.
func (g *Gate) heldMessage(id approval.ID, rule string, expiresAt time.Time) string {
	where := ""
	if link := g.inboxLink(id); link != "" {
		where = "; an approver can review it at " + link
	}
	return fmt.Sprintf("waiting for approval %s (rule %q)%s; the request expires at %s", id, rule, where, expiresAt.UTC().Format(time.RFC3339))
}

// approvedMessage is the progress message of a call held on request id
// of rule that is approved already (a re-send taken over after the
// approval): what happens next, not "waiting for approval".
func approvedMessage(id approval.ID, rule string) string {
	return fmt.Sprintf("approval %s (rule %q) was granted; running the call", id, rule)
}

// keepAlive returns the keep-alive of c while it is held on request id of
// rule expiring at expiresAt, known to be in state, or nil when c has
// none. Its message is heldMessage, or approvedMessage when state is
// approved.
func (g *Gate) keepAlive(c Call, id approval.ID, rule string, expiresAt time.Time, state approval.State) func(context.Context) {
	if c.KeepAlive == nil {
		return nil
	}
	msg := g.heldMessage(id, rule, expiresAt)
	if state == approval.StateApproved {
		msg = approvedMessage(id, rule)
	}
	// The function alone, not c: a closure over c would keep a copy of
	// the whole Call (≈ 500 bytes) with each held call (held25c).
	send := c.KeepAlive
	return func(ctx context.Context) { send(ctx, msg) }
}

// approvalMeta is the _meta["toolgate/approval"] entry of answers about r;
// it has "url", the inbox link, when Options.PublicURL is set.
func (g *Gate) approvalMeta(r approval.Request) map[string]any {
	m := map[string]any{
		"id":         string(r.ID),
		"state":      string(r.State),
		"mode":       r.Mode,
		"expires_at": r.ExpiresAt.UTC().Format(time.RFC3339),
	}
	if link := g.inboxLink(r.ID); link != "" {
		m["url"] = link
	}
	return map[string]any{"toolgate/approval": m}
}
