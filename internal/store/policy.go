package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"toolgate/internal/approval"
)

// ErrConflict is returned (wrapped) when a compare-and-set lost: the
// deployment policy's current revision is no longer the base the change
// was made against.
var ErrConflict = errors.New("store: conflict")

// EventPolicyChanged is the type of the event written with each new
// deployment policy revision (PolicyStore.AppendPolicy and
// ApplyPolicyApproval). It carries no request or session id; its actor is
// who made the change.
const EventPolicyChanged approval.EventType = "policy_changed"

// ReasonPolicyMoved is the Reason of a policy_change approval invalidated
// because the deployment policy moved past its base revision; the numbers
// are the base and the current revision.
const ReasonPolicyMoved = "invalidated: the deployment policy moved from revision %d to %d"

// PolicyRevision is one stored revision of the deployment policy
// (policy.source: store). Revisions are numbered 1, 2, … without gaps.
type PolicyRevision struct {
	// Revision is the revision number, 1 for the first.
	Revision int64 `json:"revision"`
	// Policy is the policy as canonical YAML text (see package policystore).
	Policy string `json:"policy"`
	// Digest is the policy's content digest, "sha256:" and 64 lowercase hex
	// digits (policy.Revision).
	Digest string `json:"digest"`
	// CreatedAt is when the revision was stored (UTC, milliseconds).
	CreatedAt time.Time `json:"created_at"`
	// CreatedBy is the principal id of who made the change (for an approved
	// change: the proposer).
	CreatedBy string `json:"created_by"`
	// ApprovalID is the policy_change approval the revision went through,
	// or "" when it applied at once (a narrowing change or the bootstrap).
	ApprovalID approval.ID `json:"approval_id,omitempty"`
	// Diff is a human summary of the change from the previous revision, one
	// line per change.
	Diff []string `json:"diff,omitempty"`
}

// NormalizePolicyRevision returns p with CreatedAt in UTC truncated to the
// millisecond and a nil Diff for an empty one: what backends return.
func NormalizePolicyRevision(p PolicyRevision) PolicyRevision {
	p.CreatedAt = Millis(p.CreatedAt)
	if len(p.Diff) == 0 {
		p.Diff = nil
	} else {
		p.Diff = slices.Clone(p.Diff)
	}
	return p
}

// PolicyStore persists the revisions of the deployment policy. Every
// backend implements it as part of Store. Methods are safe for concurrent
// use, also by several processes sharing one database.
type PolicyStore interface {
	// CurrentPolicy returns the newest revision, or ErrNotFound when there
	// is none yet.
	CurrentPolicy(ctx context.Context) (PolicyRevision, error)
	// GetPolicy returns revision n, or ErrNotFound.
	GetPolicy(ctx context.Context, n int64) (PolicyRevision, error)
	// AppendPolicy stores rev as revision base+1 if the current revision is
	// still base (0 when there is none): a compare-and-set. rev.Revision is
	// ignored; rev.Policy, rev.Digest and rev.CreatedAt are required. In the
	// same transaction it writes one EventPolicyChanged event (actor, at
	// rev.CreatedAt). When the current revision is not base it writes
	// nothing and returns an error wrapping ErrConflict. It returns what was
	// stored.
	AppendPolicy(ctx context.Context, base int64, rev PolicyRevision, actor string) (PolicyRevision, error)
	// ApplyPolicyApproval applies an approved policy_change approval id
	// exactly once, in one transaction that holds the approval's row: it
	// moves the approval on with [DecidePolicyApproval] (approved →
	// consumed, or → invalidated) and, when consumed, stores rev as
	// revision approval.BaseRevision+1 with ApprovalID id and writes its
	// EventPolicyChanged event (actor, at now), as AppendPolicy does.
	// rev.Digest must be the approval's ArgumentsHash (else the approval is
	// invalidated). Errors: ErrNotFound for an unknown id; an error
	// wrapping approval.ErrNotApproved when it is not an approved
	// policy_change approval (nothing is written); ErrConflict when the
	// policy moved past the approval's base (the invalidation is stored);
	// approval.ErrNotApproved also when it was invalidated for another
	// reason (stored, with the reason). The returned request is the
	// approval as stored (zero when nothing was read).
	ApplyPolicyApproval(ctx context.Context, id approval.ID, rev PolicyRevision, actor string, now time.Time) (PolicyRevision, approval.Request, error)
}

// DecidePolicyApproval is the transition ApplyPolicyApproval makes on r, an
// approval read under lock, given the current policy revision: it returns
// an error wrapping approval.ErrNotApproved, changing nothing, unless r is
// an approved policy_change; if current is not r.BaseRevision it moves r
// to invalidated (Reason [ReasonPolicyMoved]) and returns an error
// wrapping ErrConflict; otherwise it runs approval.Request.Consume with the
// binding of r's proposer and digest, which consumes r, or invalidates it
// when its validity has passed or digest is not r.ArgumentsHash, in which
// case the error wraps approval.ErrNotApproved. Every backend uses it.
func DecidePolicyApproval(r *approval.Request, current int64, digest string, now time.Time) error {
	if r.Kind != approval.KindPolicyChange {
		return fmt.Errorf("approval %s is of kind %q, not %s: %w", r.ID, r.Kind, approval.KindPolicyChange, approval.ErrNotApproved)
	}
	if r.State != approval.StateApproved {
		return fmt.Errorf("approval %s is %s: %w", r.ID, r.State, approval.ErrNotApproved)
	}
	if current != r.BaseRevision {
		r.State = approval.StateInvalidated
		r.Reason = fmt.Sprintf(ReasonPolicyMoved, r.BaseRevision, current)
		return fmt.Errorf("approval %s: %s: %w", r.ID, r.Reason, ErrConflict)
	}
	b := r.Binding()
	b.ArgumentsHash = digest
	if err := r.Consume(b, "", now); err != nil {
		return err
	}
	if r.State != approval.StateConsumed {
		return fmt.Errorf("approval %s: %s: %w", r.ID, r.Reason, approval.ErrNotApproved)
	}
	return nil
}
