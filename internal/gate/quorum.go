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

// quorumOf counts, of roster, those who may review p's request for
// approval ap: in p's tenant (or of none), admitted by ap.Approvers
// (empty: anyone), and neither p nor the person it acts for (the checks of
// approval.Request.Eligible). known is false with a nil roster (the
// reviewers are not known to this process).
func quorumOf(roster []Reviewer, p approval.Principal, ap policy.Approval) (q quorumGap, known bool) {
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

// QuorumRefusal is the gate's quorum check of one call that rule would
// hold for approval ap, made by p, against roster (Options.Reviewers; nil:
// not known). refused is true when fewer of roster may review p's request
// than ap.Approvals; message is then the words the gate refuses the call
// with (Admission.Message, code CodeQuorumUnreachable). known is false
// for a nil roster: nothing was checked, and the gate holds the call.
// `policy explain` tells with it what the gate does (ExplainQuorum).
func QuorumRefusal(roster []Reviewer, p approval.Principal, rule string, ap policy.Approval) (message string, refused, known bool) {
	q, known := quorumOf(roster, p, ap)
	if !known || q.may >= q.need {
		return "", false, known
	}
	return q.refusal(rule, ap, p), true, true
}

// ExplainQuorum sets x.Quorum, for an explanation whose effect is approve
// (and some approver eligible), to what the gate's quorum check
// (QuorumRefusal) says of the call by p against roster (nil: not known,
// Quorum.Known false). Other explanations are left as they are.
func ExplainQuorum(x *policy.Explanation, roster []Reviewer, p approval.Principal) {
	if x.Effect != policy.Approve || x.Approval == nil || x.NoEligibleApprovers {
		return
	}
	ap := policy.Approval{Approvals: x.Approval.Approvals, Approvers: x.Approval.Approvers}
	msg, refused, known := QuorumRefusal(roster, p, x.Rule, ap)
	x.Quorum = &policy.QuorumCheck{Known: known, Refused: refused}
	if refused {
		x.Quorum.Code, x.Quorum.Message = CodeQuorumUnreachable, msg
	}
}

// ExplainQuorum is the package's ExplainQuorum with this gate's roster
// (Options.Reviewers): the admin API's explain says what this gate does.
func (g *Gate) ExplainQuorum(x *policy.Explanation, p approval.Principal) {
	ExplainQuorum(x, g.opts.Reviewers, p)
	ExplainGrants(x, g.grantsDisabled())
}

// ExplainGrants marks the approval of explanation x (if any) as taking no
// grants when disabled (the deployment's grants.enabled: false).
func ExplainGrants(x *policy.Explanation, disabled bool) {
	if disabled && x.Approval != nil {
		x.Approval.Grants, x.Approval.GrantsDisabled = false, true
	}
}

// ReviewersOf turns the people who can review requests (config.Config's
// Reviewers: ids, groups, tenants) into a roster for Options.Reviewers,
// keeping nil (not known) nil.
func ReviewersOf(people []approval.Principal) []Reviewer {
	if people == nil {
		return nil
	}
	out := make([]Reviewer, 0, len(people))
	for _, p := range people {
		out = append(out, Reviewer{ID: p.ID, Groups: slices.Clone(p.Groups), Tenant: p.Tenant})
	}
	return out
}

// unreachable says, for rule's approval ap, why p's requests cannot reach
// their quorum (the default's is "the policy's default needs …"; "rule R needs 3 approvals from group:finance; only 2 of
// its 3 configured approver(s) may review a request by A acting for B
// (neither the caller nor …)"), with the cause in brackets (why).
func (q quorumGap) unreachable(rule string, ap policy.Approval, p approval.Principal) string {
	name := fmt.Sprintf("rule %q", rule)
	if rule == policy.DefaultRule {
		name = "the policy's default" // not a rule named "default" (docs/policy.md)
	}
	from := "any approver"
	if len(ap.Approvers) > 0 {
		from = strings.Join(ap.Approvers, ", ")
	}
	by := "by " + p.ID
	if p.OnBehalfOf != "" {
		by += " acting for " + p.OnBehalfOf
	}
	return fmt.Sprintf("%s needs %s from %s; only %d of its %d configured approver(s) may review a request %s (%s)",
		name, plural(q.need, "approval"), from, q.may, q.members, by, q.why(p))
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

// refusal is the message of the refusal of p's call that rule would hold
// for ap (the gap q): the agent's words, and `policy explain`'s.
func (q quorumGap) refusal(rule string, ap policy.Approval, p approval.Principal) string {
	return "denied: " + q.unreachable(rule, ap, p) + ", so it could only expire; nothing was held or run"
}

// quorumRefusal returns the refusal of c, and true, when the approval ap
// that rule would hold c for can never reach its quorum (quorumOf: fewer
// of Options.Reviewers may review it than ap.Approvals). With no
// Options.Reviewers it returns false, and the call is held as before.
// The refusal is logged at WARN the first time per (rule, principal),
// then at most once a minute with a count (refusalLog; past its bound,
// pooled=true: the count is of the pairs it had no room for).
func (g *Gate) quorumRefusal(ctx context.Context, c Call, rule string, ap policy.Approval) (Admission, bool) {
	q, known := quorumOf(g.opts.Reviewers, c.Principal, ap)
	if !known || q.may >= q.need {
		return Admission{}, false
	}
	if n, ok, pooled := g.quorumLog.due(rule, c.Principal.ID, g.now()); ok {
		attrs := []any{"server", c.Server, "tool", c.Tool, "kind", c.Kind,
			"principal", c.Principal.ID, "on_behalf_of", c.Principal.OnBehalfOf, "rule", rule,
			"approvals", q.need, "eligible", q.may, "approvers", q.members, "refused", n}
		if pooled {
			// n counts the refusals of every pair refusalLog had no room for.
			attrs = append(attrs, "pooled", true)
		}
		g.log.WarnContext(ctx, "approval quorum unreachable; denying", attrs...)
	}
	return Admission{Message: q.refusal(rule, ap, c.Principal), Code: CodeQuorumUnreachable}, true
}

// logUnloggedRefusals writes, when Run ends, one line for the quorum
// refusals counted since their pair's last line (refusalLog): without it
// a shutdown loses up to a minute's count of each pair.
func (g *Gate) logUnloggedRefusals(ctx context.Context) {
	if pairs, n := g.quorumLog.unlogged(); n > 0 {
		g.log.WarnContext(ctx, "approval quorum unreachable; refusals not logged before shutdown", "refused", n, "pairs", pairs)
	}
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
		if q, _ := quorumOf(g.opts.Reviewers, who, ap); q.may < q.need {
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
