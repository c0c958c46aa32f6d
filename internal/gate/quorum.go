package gate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
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

// quorumGap is what quorumOf found for one approval of one principal.
type quorumGap struct {
	need    int // the quorum, at least 1
	may     int // distinct reviewers who may review the principal's request
	members int // distinct reviewers the approvers list admits (may, plus the excluded)
}

// quorumOf counts, of Options.Reviewers, those who may review p's request
// for approval ap: in p's tenant (or of none), admitted by ap.Approvers
// (empty: anyone), and neither p nor the person it acts for (the checks of
// approval.Request.Eligible). known is false with no Options.Reviewers
// (nil: the reviewers are not known to this process).
func (g *Gate) quorumOf(p approval.Principal, ap policy.Approval) (q quorumGap, known bool) {
	roster := g.opts.Reviewers
	if roster == nil {
		return quorumGap{}, false
	}
	listed := approval.Request{Approvers: ap.Approvers} // who the rule admits, before self-review
	own := approval.Request{Approvers: ap.Approvers, RequestedBy: p.ID, OnBehalfOf: p.OnBehalfOf}
	members, may := map[string]bool{}, map[string]bool{}
	for _, r := range roster {
		if r.Tenant != "" && r.Tenant != p.Tenant {
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
	return quorumGap{need: max(ap.Approvals, 1), may: len(may), members: len(members)}, true
}

// unreachable says, for rule's approval ap, why p's requests cannot reach
// their quorum ("rule R needs 3 approvals from group:finance; only 2 of
// its 3 configured approver(s) may review a request by A acting for B
// (neither the caller nor …)"), with the cause in brackets (why).
func (q quorumGap) unreachable(rule string, ap policy.Approval, p approval.Principal) string {
	from := "any approver"
	if len(ap.Approvers) > 0 {
		from = strings.Join(ap.Approvers, ", ")
	}
	by := "by " + p.ID
	if p.OnBehalfOf != "" {
		by += " acting for " + p.OnBehalfOf
	}
	return fmt.Sprintf("rule %q needs %s from %s; only %d of its %d configured approver(s) may review a request %s (%s)",
		rule, plural(q.need, "approval"), from, q.may, q.members, by, q.why(p))
}

// why names the cause of a gap: fewer approvers configured (of p's
// tenant) than the quorum, which no caller reaches; else the caller and
// the person it acts for, who may not review their own request.
func (q quorumGap) why(p approval.Principal) string {
	switch {
	case q.members < q.need && p.Tenant != "":
		return fmt.Sprintf("fewer approvers who review tenant %q are configured for it than its quorum, whoever calls", p.Tenant)
	case q.members < q.need:
		return "fewer approvers are configured for it than its quorum, whoever calls"
	case p.OnBehalfOf == "":
		return "the caller may not review its own request"
	}
	return "neither the caller nor the person it acts for may review it"
}

// quorumRefusal returns the refusal of c, and true, when the approval ap
// that rule would hold c for can never reach its quorum (quorumOf: fewer
// of Options.Reviewers may review it than ap.Approvals). With no
// Options.Reviewers it returns false, and the call is held as before.
func (g *Gate) quorumRefusal(ctx context.Context, c Call, rule string, ap policy.Approval) (Admission, bool) {
	q, known := g.quorumOf(c.Principal, ap)
	if !known || q.may >= q.need {
		return Admission{}, false
	}
	g.log.WarnContext(ctx, "approval quorum unreachable; denying", "server", c.Server, "tool", c.Tool, "kind", c.Kind,
		"principal", c.Principal.ID, "on_behalf_of", c.Principal.OnBehalfOf, "rule", rule,
		"approvals", q.need, "eligible", q.may, "approvers", q.members)
	msg := "denied: " + q.unreachable(rule, ap, c.Principal) + ", so it could only expire; nothing was held or run"
	return Admission{Message: msg, Code: CodeQuorumUnreachable}, true
}

// loader is the optional part of an Evaluator that hands out the policy
// in force (policy.Holder has it).
type loader interface{ Load() *policy.Policy }

// SessionWarnings lists, for session s, each approval of the policy in
// force (the Evaluator's, when it is a *policy.Policy or has Load) that may hold its calls (the default when it approves, approve
// rules not in monitor mode whose principals admit s, and its own
// require_approval's) and whose quorum s's requests can never reach:
// the reviewers of Options.Reviewers, less s and the person it acts for
// (on_behalf_of), are too few. Such calls are refused when made
// (CodeQuorumUnreachable); the session itself is not: it may never make
// them, and the policy may change. nil when the reviewers or the policy
// are not known here, or every quorum is reachable. Rules are not
// narrowed by the session's tools: a warning may name a rule the
// session cannot call.
func (g *Gate) SessionWarnings(s session.Session) []string {
	var p *policy.Policy
	switch e := g.policy.(type) {
	case loader:
		p = e.Load()
	case *policy.Policy:
		p = e
	}
	if p == nil || g.opts.Reviewers == nil {
		return nil
	}
	who := approval.Principal{ID: s.Principal, OnBehalfOf: s.OnBehalfOf, Tenant: s.Tenant}
	var out []string
	check := func(rule string, ap policy.Approval) {
		if q, _ := g.quorumOf(who, ap); q.may < q.need {
			out = append(out, q.unreachable(rule, ap, who)+": such calls are refused")
		}
	}
	if p.Default == policy.Approve && p.Enforced() {
		check(policy.DefaultRule, p.Approval)
	}
	for i := range p.Rules {
		ap, holds := p.Holds(i)
		if pr := p.Rules[i].Principals; !holds || (len(pr) > 0 && !slices.Contains(pr, s.Principal)) {
			continue
		}
		check(p.RuleName(i), ap)
	}
	if len(s.RequireApproval) > 0 {
		check(SessionRule, g.sessionApproval().Approval)
	}
	return out
}

// plural is "1 approval" or "n approvals".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
