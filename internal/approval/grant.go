package approval

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrGrantKind means grant terms were attached to an approval that is not
// of a tool call: only a tool call can be remembered as a grant.
var ErrGrantKind = errors.New("approval: grants apply only to tool-call approvals")

// GrantTerms are what an approver attaches to an approve verdict to
// remember it (issue 12, "remembered grants"): allow the requesting
// principal to call the request's server and tool again, for arguments
// matching When, for TTL from the decision, at most MaxUses times. The terms
// are recorded on the review; the grant itself is made (package grant) by
// the review that settles the approval, and only when the approval's quorum
// of approvers attached the same terms.
type GrantTerms struct {
	// When is a CEL predicate over the call with the variables of a policy
	// rule's when (docs/policy.md); "" means any arguments.
	When string `json:"when,omitempty"`
	// TTL is how long the grant lasts, counted from the approval's
	// decision.
	TTL time.Duration `json:"ttl"`
	// MaxUses caps how many calls the grant allows; 0 means no cap (only
	// TTL ends it).
	MaxUses int64 `json:"max_uses,omitempty"`
	// ReviewerGroups are the reviewer's groups when it attached the terms.
	// At each use the grant counts only approvers that the current
	// decision's approvers list still names (by id or by one of these
	// groups).
	ReviewerGroups []string `json:"reviewer_groups,omitempty"`
}

// Same reports whether t and o say the same thing: the same predicate,
// duration and cap (ReviewerGroups are who said it, not what).
func (t GrantTerms) Same(o GrantTerms) bool {
	return t.When == o.When && t.TTL == o.TTL && t.MaxUses == o.MaxUses
}

// ApproveWithGrant is [Request.Review] with an approve verdict that also
// attaches terms to the review it records (with rv's groups as
// ReviewerGroups). It returns ErrGrantKind, changing nothing, for an
// approval that is not of a tool call, and otherwise every error of
// Review; on ErrDuplicate (rv already approved) nothing changes and the
// terms are not attached.
func (r *Request) ApproveWithGrant(rv Reviewer, reason, pinnedHash string, t GrantTerms, now time.Time) error {
	if r.Kind != "" && r.Kind != KindToolCall {
		return fmt.Errorf("%w (this one is a %s)", ErrGrantKind, r.Kind)
	}
	if err := r.Review(rv, VerdictApprove, reason, pinnedHash, now); err != nil {
		return err
	}
	t.ReviewerGroups = slices.Clone(rv.Groups)
	r.Reviews[len(r.Reviews)-1].Grant = &t
	return nil
}
