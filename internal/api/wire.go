package api

import (
	"encoding/json"
	"time"

	"toolgate/internal/approval"
)

// Approval is the JSON form of one approval request (DESIGN "Approval
// JSON"), as GET /v1/approvals/{id} and the review routes return it. Times
// are RFC 3339 in UTC. Fields marked "omitted when empty" are absent until
// they apply; the others are always present (lists as [] when empty).
type Approval struct {
	ID    string `json:"id"`    // UUIDv7, canonical lower-case text
	State string `json:"state"` // pending, approved, denied, expired, cancelled, consumed, invalidated
	// Server and Tool name the real upstream and tool (not the exposed
	// "<server>__<tool>" name).
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Arguments is the redacted display copy of the arguments, never the raw
	// ones: secrets are replaced by markers and hidden characters escaped.
	Arguments json.RawMessage `json:"arguments"`
	// ArgumentsHash is "sha256:" + hex of the canonical raw arguments; pin it
	// on approve to make sure you approve what you saw.
	ArgumentsHash string `json:"arguments_hash"`
	// DisplayWarnings says why the display copy differs from the raw
	// arguments (hidden characters, redacted values). Show it prominently.
	DisplayWarnings   []string  `json:"display_warnings"`
	Rule              string    `json:"rule"`
	Mode              string    `json:"mode"` // hold | retry
	RequestedBy       string    `json:"requested_by"`
	OnBehalfOf        string    `json:"on_behalf_of,omitempty"` // omitted when empty
	Tenant            string    `json:"tenant"`
	CreatedAt         time.Time `json:"created_at"`
	ExpiresAt         time.Time `json:"expires_at"`
	RequiredApprovals int       `json:"required_approvals"`
	// Approvers lists who may review: principal ids and "group:<name>"
	// entries; empty means anyone with the approver role.
	Approvers       []string  `json:"approvers"`
	Reviews         []Review  `json:"reviews"`
	DecidedBy       string    `json:"decided_by,omitempty"`       // omitted when empty
	DecidedAt       time.Time `json:"decided_at,omitzero"`        // omitted when empty
	Reason          string    `json:"reason,omitempty"`           // omitted when empty
	ConsumedAt      time.Time `json:"consumed_at,omitzero"`       // omitted when empty
	DispatchOutcome string    `json:"dispatch_outcome,omitempty"` // ok, tool_error, transport_error, cancelled_after_dispatch, unknown; omitted when empty
	// Kind is what is to be approved: omitted for a tool call,
	// "session_policy" for a session's request to change its own policy
	// (Target is the session id, Arguments the proposed change, BaseRevision
	// the session revision it was made against), "policy_change" for a
	// deployment policy proposal.
	Kind         string `json:"kind,omitempty"`
	Target       string `json:"target,omitempty"`
	BaseRevision int64  `json:"base_revision,omitempty"`
	// PolicyRevision is the revision of the deployment policy that asked
	// for the approval (sha256:…); omitted when unknown.
	PolicyRevision string `json:"policy_revision,omitempty"`
	// TimeoutRule names the rule whose timeout the request took, when it
	// is known and differs from Rule (several approve rules matched).
	TimeoutRule string `json:"timeout_rule,omitempty"`
	// GrantsForbidden is set when the decision that held the call forbids
	// grants (approval.grants: false), or the config of the instance that
	// held it does (grants.enabled: false): an approve with grant terms is
	// refused (409 grants_forbidden).
	GrantsForbidden bool `json:"grants_forbidden,omitempty"`
	// HeldBy names the gateway instance whose caller waits on the call
	// (or that last held it: the one that ran it), HeldUntil when that
	// instance's claim lapses unless renewed (a past time: it let go, or
	// it died). Both omitted when no instance held the call (retry mode,
	// a policy request). An optional field added by polish16: with two
	// instances on one store an operator can tell which one holds it (each
	// logs its id at start, "gateway instance").
	HeldBy    string    `json:"held_by,omitempty"`
	HeldUntil time.Time `json:"held_until,omitzero"`
	// HeldAs is "task" when the call was made as an MCP task (the Tasks
	// extension): once approved it runs whether or not the agent is still
	// connected, and the agent reads the result with tasks/get. Omitted
	// otherwise (a 2025 hold runs only if its caller still waits; a
	// retry-mode call when its caller re-sends it). Set on GET
	// /v1/approvals/{id} and the review answers, not on list pages.
	// Added by polish18.
	HeldAs string `json:"held_as,omitempty"`
	// Grant is the grant an approve with a grant attached made (only on
	// the answer of that approve; see ApproveBody.Grant).
	Grant *Grant `json:"grant,omitempty"`
	// Duplicate is true only on the answer of an approve or deny by a
	// reviewer who had already given the same verdict: nothing was
	// recorded (a new reason or grant terms were not kept); Reviews holds
	// the verdict and reason that stand. Omitted otherwise.
	Duplicate bool `json:"duplicate,omitempty"`
}

// HeldAsTask is the value of [Approval.HeldAs] for a call held as an MCP
// task.
const HeldAsTask = "task"

// Review is one reviewer's vote in [Approval.Reviews].
type Review struct {
	By      string    `json:"by"`
	Verdict string    `json:"verdict"` // approve | deny
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
	// Grant holds the grant terms the reviewer attached to an approve;
	// omitted when none. The grant is made when the approval is settled by
	// an approve with terms that enough approvers attached.
	Grant *GrantTerms `json:"grant,omitempty"`
}

// List is the body of GET /v1/approvals. NextCursor is "" on the last page;
// otherwise pass it as ?cursor= to get the next one.
type List struct {
	Approvals  []Approval `json:"approvals"`
	NextCursor string     `json:"next_cursor"`
}

// ApproveBody is the body of POST /v1/approvals/{id}/approve; every field
// is optional. ArgumentsHash, when set, must equal the request's hash or
// the review is refused with 409 hash_mismatch. Grant, when set, also
// remembers the approval as a grant (see [GrantBody]).
type ApproveBody struct {
	Reason        string     `json:"reason,omitempty"`
	ArgumentsHash string     `json:"arguments_hash,omitempty"`
	Grant         *GrantBody `json:"grant,omitempty"`
}

// DenyBody is the body of POST /v1/approvals/{id}/deny. Reason is optional
// but recommended: the agent gets it in its error result.
type DenyBody struct {
	Reason string `json:"reason,omitempty"`
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a machine-readable code (see the Code constants) and a
// message that is safe to show to the user.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes in [ErrorDetail.Code].
const (
	CodeUnauthorized = "unauthorized"          // 401
	CodeForbidden    = "forbidden"             // 403: the role does not allow it
	CodeSelfReview   = "self_review"           // 403: the requester (or whom it acts for) reviewing
	CodeNotEligible  = "not_eligible"          // 403: not among the rule's approvers
	CodeNotFound     = "not_found"             // 404
	CodeMethod       = "method_not_allowed"    // 405
	CodeWiden        = "widen"                 // 403: a child session asked for more than its parent has
	CodeResolved     = "resolved"              // 409: no longer pending
	CodeStale        = "stale_revision"        // 409: If-Match is not the session's revision
	CodePrecondition = "precondition_required" // 428: If-Match missing
	CodeExpired      = "expired"               // 409
	CodeConflict     = "conflict"              // 409: the reviewer already gave the other verdict
	CodeHashMismatch = "hash_mismatch"         // 409
	CodeTooLarge     = "too_large"             // 413
	CodeInvalid      = "invalid_request"       // 422 (400 for an unreadable body)
	CodeUnavailable  = "unavailable"           // 503
	CodeInternal     = "internal"              // 500
)

// FromRequest returns the wire form of r: the Approval JSON of the API,
// which webhook notifications carry too.
func FromRequest(r approval.Request) Approval { return fromRequest(r) }

// fromRequest builds the wire form of r.
func fromRequest(r approval.Request) Approval {
	a := Approval{
		ID:                string(r.ID),
		State:             string(r.State),
		Server:            r.Server,
		Tool:              r.Tool,
		Arguments:         r.Arguments,
		ArgumentsHash:     r.ArgumentsHash,
		DisplayWarnings:   nonNil(r.DisplayWarnings),
		Rule:              r.Rule,
		Mode:              r.Mode,
		RequestedBy:       r.RequestedBy,
		OnBehalfOf:        r.OnBehalfOf,
		Tenant:            r.Tenant,
		CreatedAt:         utc(r.CreatedAt),
		ExpiresAt:         utc(r.ExpiresAt),
		RequiredApprovals: r.RequiredApprovals,
		Approvers:         nonNil(r.Approvers),
		Reviews:           make([]Review, 0, len(r.Reviews)),
		DecidedBy:         r.DecidedBy,
		DecidedAt:         utc(r.DecidedAt),
		Reason:            r.Reason,
		ConsumedAt:        utc(r.ConsumedAt),
		DispatchOutcome:   string(r.DispatchOutcome),
		Kind:              r.Kind,
		Target:            r.Target,
		BaseRevision:      r.BaseRevision,
		PolicyRevision:    r.PolicyRevision,
		HeldBy:            r.HeldBy,
	}
	if r.TimeoutRule != r.Rule {
		a.TimeoutRule = r.TimeoutRule
	}
	a.GrantsForbidden = r.NoGrants
	if r.HeldBy != "" {
		a.HeldUntil = utc(r.LeaseUntil)
	}
	if len(a.Arguments) == 0 {
		a.Arguments = json.RawMessage("null")
	}
	for _, rv := range r.Reviews {
		a.Reviews = append(a.Reviews, Review{By: rv.By, Verdict: string(rv.Verdict), Reason: rv.Reason, At: utc(rv.At), Grant: wireTerms(rv.Grant)})
	}
	return a
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// utc returns t in UTC, keeping the zero time zero (so omitzero omits it).
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
