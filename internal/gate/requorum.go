package gate

import (
	"fmt"
	"slices"
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// A consumeQuorum is the approval the policy in force requires of a call
// when it is consumed (consumeCheck.decide): the decision's when the
// policy holds the call for approval. none is the decision's
// NoEligibleApprovers: the matching rules' approvers lists have no one in
// common (ap.Approvers is then nil, which is not "anyone").
type consumeQuorum struct {
	set  bool
	none bool
	rule string
	ap   policy.Approval
}

// quorumShort says why r, approved and about to be consumed by the call
// k checks, may not be: the approvals stored on r that still qualify for
// that call (qualifyingApprovals) are fewer than the quorum the policy in
// force requires of it (k.need; for a call the policy allows but its
// session's require_approval holds, read in the transaction, the session
// approval's, whatever rule r was made under), or that policy leaves no
// approver eligible (k.need.none, which a new call is refused for). ""
// when they meet it, or when the policy in force allows the call outright.
// It reads nothing from the store: r's reviews are in the row the
// consume's transaction holds.
func (k *consumeCheck) quorumShort(r *approval.Request, read store.TxRead) string {
	need := k.need
	if !need.set && read.Chain != nil && read.Chain.RequiresApprovalItem(k.c.item()) {
		sd := k.g.sessionApproval()
		need = consumeQuorum{set: true, rule: sd.Rule, ap: sd.Approval}
	}
	switch {
	case !need.set:
		return ""
	case need.none:
		return fmt.Sprintf("policy now leaves no approver eligible to review the call (rule %q: its approvers lists have no one in common)", need.rule)
	}
	want := max(need.ap.Approvals, 1)
	got := qualifyingApprovals(k.g.opts.Reviewers, r, k.c.Principal, read.Chain, need.ap.Approvers)
	if got >= want {
		return ""
	}
	return quorumReason(need.rule, need.ap, want, got)
}

// qualifyingApprovals counts the distinct people whose approving reviews
// of r still qualify, for the call of p about to run on it, under
// approvers (the approvers list the policy in force names for the call;
// empty: anyone): never r's requester or the person it acts for, nor p
// or the person p acts for now (its config may have changed since r was
// made: a review by whom the caller now acts for is self-review), nor
// whoever created a session of chain (p's session chain, read by the
// consume's transaction; nil for no session: createdIn); with a
// roster (Options.Reviewers), only people it lists now (an approver or
// admin), of r's tenant and p's or of none, named in approvers by id or
// by one of the groups the roster gives them now. Without a roster (nil:
// not known here) a reviewer's groups are not known: an approval
// qualifies when approvers has every entry of the list r was reviewed
// under (r.Approvers, which the review checked: the same list in any
// order, or a wider one), or names the reviewer by id.
func qualifyingApprovals(roster []Reviewer, r *approval.Request, p approval.Principal, chain session.Chain, approvers []string) int {
	under := approval.Request{Approvers: approvers, RequestedBy: r.RequestedBy, OnBehalfOf: r.OnBehalfOf}
	kept := listsAll(approvers, r.Approvers)
	var room [4]string // most quorums are small: no allocation
	counted := room[:0]
	for _, rv := range r.Reviews {
		if rv.Verdict != approval.VerdictApprove || slices.Contains(counted, rv.By) || approval.IsRequester(rv.By, p.ID, p.OnBehalfOf) || createdIn(chain, rv.By) {
			continue
		}
		who := approval.Reviewer{ID: rv.By}
		if roster != nil {
			groups, ok := rosterGroups(roster, rv.By, r.Tenant, p.Tenant)
			if !ok {
				continue // no longer a reviewer, or not of r's tenant or p's
			}
			who.Groups = groups
		} else if kept && !approval.IsRequester(rv.By, r.RequestedBy, r.OnBehalfOf) {
			counted = append(counted, rv.By)
			continue
		}
		if under.Eligible(who) == nil {
			counted = append(counted, rv.By)
		}
	}
	return len(counted)
}

// rosterGroups returns the groups roster gives id now, and whether id is
// in roster for every one of tenants: a roster entry bound to a tenant
// (Reviewer.Tenant) counts only where each of tenants is that one; an
// entry of no tenant counts everywhere. Used alike for an approval's
// reviewers (qualifyingApprovals) and a grant's approvers (policyGrants).
func rosterGroups(roster []Reviewer, id string, tenants ...string) ([]string, bool) {
	i := slices.IndexFunc(roster, func(q Reviewer) bool { return q.ID == id })
	if i < 0 {
		return nil, false
	}
	if t := roster[i].Tenant; t != "" {
		for _, want := range tenants {
			if want != t {
				return nil, false
			}
		}
	}
	return roster[i].Groups, true
}

// listsAll reports whether approvers list now admits everyone list then
// did: now is empty (anyone), or then is not empty and each of its
// entries is in now (in any order).
func listsAll(now, then []string) bool {
	if len(now) == 0 {
		return true
	}
	if len(then) == 0 {
		return false
	}
	for _, a := range then {
		if !slices.Contains(now, a) {
			return false
		}
	}
	return true
}

// quorumReason is the reason an approval is invalidated with when got of
// its approvals qualify under the approval ap that rule of the policy in
// force requires (want, at least 1): `policy now requires 2 approvals from
// group:finance (rule "refunds"); 1 of its approvals qualifies`.
func quorumReason(rule string, ap policy.Approval, want, got int) string {
	name := fmt.Sprintf("rule %q", rule)
	if rule == policy.DefaultRule {
		name = "the policy's default"
	}
	from := "any approver"
	if len(ap.Approvers) > 0 {
		from = strings.Join(ap.Approvers, ", ")
	}
	verb := "qualify"
	if got == 1 {
		verb = "qualifies"
	}
	return fmt.Sprintf("policy now requires %s from %s (%s); %d of its approvals %s", plural(want, "approval"), from, name, got, verb)
}
