// Package grant is the domain of remembered grants (issue 12): an approver,
// when approving a tool call, may add "allow this principal to call this
// server's tool, for arguments matching a predicate, for D, at most N
// times". A [Grant] is the stored object; [FromApproval] makes one from the
// approval whose settling review attached the terms
// (approval.Request.ApproveWithGrant). Whether a grant allows a particular
// call is decided by the policy package (policy.Grant: the gate passes
// grants in as data), and each use is counted atomically by the store.
//
// Everything here is pure: no I/O and no clock (times are arguments).
package grant

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"toolgate/internal/approval"
)

// Sentinel errors. internal/api maps them to statuses.
var (
	// ErrInvalid wraps terms that cannot make a grant: a missing or
	// non-positive duration, one above grants.max_ttl (refused, never
	// shortened), a negative use cap, a predicate that does not compile.
	ErrInvalid = errors.New("grant: invalid terms")
	// ErrNotEndorsed means the review that settled an approval attached
	// terms that fewer approvers than the approval's quorum attached: a
	// grant on a rule needing N approvals must be approved by N.
	ErrNotEndorsed = errors.New("grant: not attached by enough approvers")
	// ErrForbidden means grants are turned off for the approval's call:
	// the deployment's grants.enabled is false, or the policy decision
	// that held it says grants: false (approval.Request.NoGrants). Nothing
	// is recorded.
	ErrForbidden = errors.New("grant: grants are forbidden for this call")
	// ErrSpent means a grant can no longer be used: revoked, expired or
	// used up (the store's conditional use lost).
	ErrSpent = errors.New("grant: no longer usable")
)

// Event types of the grant events in the event log (their subject is the
// grant: approval.Event.GrantID).
const (
	EventCreated approval.EventType = "grant_created" // actor: the approver whose review settled the approval
	EventUsed    approval.EventType = "grant_used"    // actor: the calling principal
	EventRevoked approval.EventType = "grant_revoked" // actor: who revoked it
)

// State is where a grant stands at a given time.
type State string

const (
	StateActive    State = "active"
	StateExpired   State = "expired"   // ExpiresAt has passed
	StateExhausted State = "exhausted" // MaxUses uses were made
	StateRevoked   State = "revoked"
)

// Approver is one approver who approved a grant: its id and its groups when
// it attached the terms.
type Approver struct {
	ID     string   `json:"id"`
	Groups []string `json:"groups,omitempty"`
}

// Grant is a remembered approval.
type Grant struct {
	// ID is a UUIDv7 (approval.NewID).
	ID string
	// Principal, OnBehalfOf and Tenant are the requesting principal of the
	// source approval; the grant allows only calls by Principal.
	Principal  string
	OnBehalfOf string
	Tenant     string
	// Server and Tool are the real names of the source approval's call.
	Server string
	Tool   string
	// When is the CEL predicate a call's arguments must satisfy; "" means
	// any arguments.
	When string
	// CreatedAt is the decision time of the source approval; ExpiresAt is
	// CreatedAt plus the terms' duration.
	CreatedAt time.Time
	ExpiresAt time.Time
	// MaxUses caps the uses (0: no cap); Uses counts them.
	MaxUses int64
	Uses    int64
	// CreatedBy is the approver whose review settled the source approval;
	// ApprovedBy lists every approver who attached these terms (CreatedBy
	// included), in review order.
	CreatedBy  string
	ApprovedBy []Approver
	// Approvals is the quorum of the source approval (its required
	// approvals) the grant was approved with.
	Approvals int
	// Reason is the settling review's reason.
	Reason string
	// SourceApproval is the approval the terms were attached to, and Rule
	// its rule.
	SourceApproval approval.ID
	Rule           string
	// RevokedAt, RevokedBy and RevokeReason are set once it is revoked.
	RevokedAt    time.Time
	RevokedBy    string
	RevokeReason string
}

// State returns g's state at now: revoked, else exhausted, else expired,
// else active.
func (g *Grant) State(now time.Time) State {
	switch {
	case !g.RevokedAt.IsZero():
		return StateRevoked
	case g.MaxUses > 0 && g.Uses >= g.MaxUses:
		return StateExhausted
	case !now.Before(g.ExpiresAt):
		return StateExpired
	}
	return StateActive
}

// Usable reports whether g may allow a call at now.
func (g *Grant) Usable(now time.Time) bool { return g.State(now) == StateActive }

// Use is one call a grant allowed.
type Use struct {
	// GrantID is the grant used; N numbers its uses from 1.
	GrantID string
	N       int64
	// At is when the call was admitted.
	At time.Time
	// Principal and Session are the caller (Session "" for none).
	Principal string
	Session   string
	// ArgumentsHash is approval.Hash of the arguments the call sent.
	ArgumentsHash string
}

// CheckTerms returns an error wrapping ErrInvalid when t cannot make a
// grant under maxTTL (grants.max_ttl): a duration that is not positive or
// is above maxTTL (refused, never shortened), or a negative use cap. The
// predicate is checked by the policy package, which compiles it.
func CheckTerms(t approval.GrantTerms, maxTTL time.Duration) error {
	switch {
	case t.TTL <= 0:
		return fmt.Errorf("%w: the duration must be positive, got %s", ErrInvalid, t.TTL)
	case t.TTL > maxTTL:
		return fmt.Errorf("%w: the duration %s is above grants.max_ttl %s; it is refused, not shortened", ErrInvalid, t.TTL, maxTTL)
	case t.MaxUses < 0:
		return fmt.Errorf("%w: max_uses %d must not be negative (0 means no cap)", ErrInvalid, t.MaxUses)
	}
	return nil
}

// FromApproval makes the grant with id that r's settling review asks for.
// ok is false, with no error, when r is not approved or its settling
// review (the approve review by DecidedBy) attached no terms. When it did,
// every approving review that attached the same terms ([approval.GrantTerms.Same])
// approves the grant; if they are fewer than r's quorum
// (RequiredApprovals, at least 1) the result is an error wrapping
// ErrNotEndorsed that names who approved without terms and who attached
// other terms. The grant
// starts at r.DecidedAt and lasts the terms' TTL.
func FromApproval(id string, r approval.Request) (g Grant, ok bool, err error) {
	if r.State != approval.StateApproved || r.DecidedBy == "" {
		return Grant{}, false, nil
	}
	var terms *approval.GrantTerms
	for i := len(r.Reviews) - 1; i >= 0; i-- {
		if rv := r.Reviews[i]; rv.By == r.DecidedBy && rv.Verdict == approval.VerdictApprove {
			terms = rv.Grant
			break
		}
	}
	if terms == nil {
		return Grant{}, false, nil
	}
	var (
		by             []Approver
		without, other []string
	)
	for _, rv := range r.Reviews {
		switch {
		case rv.Verdict != approval.VerdictApprove || slices.ContainsFunc(by, func(a Approver) bool { return a.ID == rv.By }):
		case rv.Grant != nil && rv.Grant.Same(*terms):
			by = append(by, Approver{ID: rv.By, Groups: slices.Clone(rv.Grant.ReviewerGroups)})
		case rv.Grant != nil:
			other = append(other, rv.By)
		default:
			without = append(without, rv.By)
		}
	}
	if need := max(r.RequiredApprovals, 1); len(by) < need {
		var who []string
		if len(without) > 0 {
			who = append(who, strings.Join(without, ", ")+" approved without them")
		}
		if len(other) > 0 {
			who = append(who, strings.Join(other, ", ")+" attached other terms (duration, uses or condition)")
		}
		return Grant{}, false, fmt.Errorf("%w: approval %s needs %d approvals, and a grant on it must be attached with the same terms by as many; %s",
			ErrNotEndorsed, r.ID, need, strings.Join(who, "; "))
	}
	return Grant{
		ID:             id,
		Principal:      r.RequestedBy,
		OnBehalfOf:     r.OnBehalfOf,
		Tenant:         r.Tenant,
		Server:         r.Server,
		Tool:           r.Tool,
		When:           terms.When,
		CreatedAt:      r.DecidedAt,
		ExpiresAt:      r.DecidedAt.Add(terms.TTL),
		MaxUses:        terms.MaxUses,
		CreatedBy:      r.DecidedBy,
		ApprovedBy:     by,
		Approvals:      max(r.RequiredApprovals, 1),
		Reason:         r.Reason,
		SourceApproval: r.ID,
		Rule:           r.Rule,
	}, true, nil
}
