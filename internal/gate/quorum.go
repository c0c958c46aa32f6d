package gate

import (
	"context"
	"fmt"
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// CodeQuorumUnreachable is the reason code (Admission.Code, the audit
// record's code) of a call refused because the approvers its rule names,
// less those who may not review it, are fewer than its quorum.
const CodeQuorumUnreachable = "quorum_unreachable"

// A Reviewer is one person who can review approval requests, as the
// deployment configures them (an approver with role approver or admin):
// Options.Reviewers lists them.
type Reviewer struct {
	ID     string
	Groups []string
	// Tenant is the reviewer's tenant; "" reviews requests of every tenant.
	Tenant string
}

// quorumRefusal returns the refusal of c, and true, when the approval ap
// that rule would hold c for can never reach its quorum: fewer of
// Options.Reviewers may review c's request (in c's tenant, admitted by
// ap.Approvers, and neither c's principal nor the person it acts for: the
// checks of approval.Request.Eligible) than ap.Approvals. With no
// Options.Reviewers (nil: the set of reviewers is not known to this
// process) it returns false, and the call is held as before.
func (g *Gate) quorumRefusal(ctx context.Context, c Call, rule string, ap policy.Approval) (Admission, bool) {
	roster := g.opts.Reviewers
	if roster == nil {
		return Admission{}, false
	}
	need := max(ap.Approvals, 1)
	listed := approval.Request{Approvers: ap.Approvers} // who the rule admits, before self-review
	own := approval.Request{Approvers: ap.Approvers, RequestedBy: c.Principal.ID, OnBehalfOf: c.Principal.OnBehalfOf}
	members, may := map[string]bool{}, map[string]bool{}
	for _, r := range roster {
		if r.Tenant != "" && r.Tenant != c.Principal.Tenant {
			continue // the admin API does not show them this tenant's requests
		}
		rv := approval.Reviewer{ID: r.ID, Groups: r.Groups}
		if listed.Eligible(rv) != nil {
			continue
		}
		members[r.ID] = true
		if own.Eligible(rv) == nil { // else approval.ErrSelfReview
			may[r.ID] = true
		}
	}
	if len(may) >= need {
		return Admission{}, false
	}
	from := "any approver"
	if len(ap.Approvers) > 0 {
		from = strings.Join(ap.Approvers, ", ")
	}
	by := "by " + c.Principal.ID
	if c.Principal.OnBehalfOf != "" {
		by += " acting for " + c.Principal.OnBehalfOf
	}
	msg := fmt.Sprintf("denied: rule %q needs %s from %s; only %d of its %d configured approver(s) may review a request %s (neither the caller nor the person it acts for may review it), so it could only expire; nothing was held or run",
		rule, plural(need, "approval"), from, len(may), len(members), by)
	g.log.WarnContext(ctx, "approval quorum unreachable; denying", "server", c.Server, "tool", c.Tool, "kind", c.Kind,
		"principal", c.Principal.ID, "on_behalf_of", c.Principal.OnBehalfOf, "rule", rule,
		"approvals", need, "eligible", len(may), "approvers", len(members))
	return Admission{Message: msg, Code: CodeQuorumUnreachable}, true
}

// plural is "1 approval" or "n approvals".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
