package approval

import (
	"encoding/json"
	"time"
)

// ID identifies a Request. It is a UUIDv7 in its canonical text form
// (RFC 9562), so ids sort by creation time.
type ID string

// State is the lifecycle state of a Request. See DESIGN's state machine:
//
//	pending → approved | denied | expired | cancelled
//	approved → consumed | expired | invalidated
type State string

const (
	StatePending     State = "pending"
	StateApproved    State = "approved"
	StateDenied      State = "denied"
	StateExpired     State = "expired"
	StateCancelled   State = "cancelled"
	StateConsumed    State = "consumed"
	StateInvalidated State = "invalidated"
)

// Terminal reports whether s can never change again.
func (s State) Terminal() bool {
	return s != StatePending && s != StateApproved
}

// Verdict is one reviewer's vote.
type Verdict string

const (
	VerdictApprove Verdict = "approve"
	VerdictDeny    Verdict = "deny"
)

// Outcome records what happened when a consumed request was dispatched upstream.
type Outcome string

const (
	OutcomeNone Outcome = ""
	// OutcomeOK: the upstream's result was delivered.
	OutcomeOK Outcome = "ok"
	// OutcomeToolError: the upstream answered with an isError result or a
	// JSON-RPC error, or its answer was refused (larger than
	// limits.max_result_bytes): the upstream processed the call.
	OutcomeToolError Outcome = "tool_error"
	// OutcomeTransportError: the call did not reach the upstream, or the
	// connection to it broke during the call.
	OutcomeTransportError Outcome = "transport_error"
	// OutcomeCancelledAfterDispatch: the call was sent upstream and then
	// cancelled before an answer (the caller cancelled or went away, its
	// call_timeout fired, or the gateway shut down): it may have run.
	OutcomeCancelledAfterDispatch Outcome = "cancelled_after_dispatch"
	// OutcomeUnknown marks a request consumed by a process that died before
	// the upstream answered: the call may or may not have run.
	OutcomeUnknown Outcome = "unknown"
)

// Principal is an authenticated identity: an agent calling tools or a human
// reviewing approvals.
type Principal struct {
	ID         string   `json:"id"`
	Kind       string   `json:"kind"` // "agent" | "human"
	Tenant     string   `json:"tenant,omitempty"`
	Groups     []string `json:"groups,omitempty"`
	OnBehalfOf string   `json:"on_behalf_of,omitempty"`
	// SessionID is set when the principal is an agent session (see package
	// session): its calls are evaluated under the session's tool policy.
	SessionID string `json:"session_id,omitempty"`
}

// Review is one reviewer's vote on a Request.
type Review struct {
	By      string    `json:"by"`
	Verdict Verdict   `json:"verdict"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
	// Grant holds the terms of a remembered grant the reviewer attached to
	// an approve verdict (see [Request.ApproveWithGrant]); nil for none.
	Grant *GrantTerms `json:"grant,omitempty"`
}

// Kinds of approval requests.
const (
	// KindToolCall is a gated tools/call. The empty kind means the same.
	KindToolCall = "tool_call"
	// KindSessionPolicy is a session's request to change its own policy.
	KindSessionPolicy = "session_policy"
	// KindPolicyChange is a proposed change of the deployment policy.
	KindPolicyChange = "policy_change"
	// KindResourceRead is a gated resources/read or resources/subscribe
	// (issue 10): Tool holds the real resource URI and Arguments the display
	// copy of {"uri": …}.
	KindResourceRead = "resource_read"
	// KindPromptGet is a gated prompts/get: Tool holds the real prompt name
	// and Arguments the prompt's arguments.
	KindPromptGet = "prompt_get"
)

// Request is the durable record of one gated tool call. Arguments holds only
// the redacted display copy; the raw arguments are never stored, and
// ArgumentsHash binds the request to them (see Hash).
type Request struct {
	ID                ID              `json:"id"`
	State             State           `json:"state"`
	Server            string          `json:"server"`
	Tool              string          `json:"tool"`
	Arguments         json.RawMessage `json:"arguments"`
	ArgumentsHash     string          `json:"arguments_hash"`
	DisplayWarnings   []string        `json:"display_warnings"`
	ToolDigest        string          `json:"tool_digest"`
	Rule              string          `json:"rule"`
	Mode              string          `json:"mode"` // "hold" | "retry"
	RequestedBy       string          `json:"requested_by"`
	OnBehalfOf        string          `json:"on_behalf_of,omitempty"`
	Tenant            string          `json:"tenant"`
	CreatedAt         time.Time       `json:"created_at"`
	ExpiresAt         time.Time       `json:"expires_at"`
	RequiredApprovals int             `json:"required_approvals"`
	// Approvers lists who may review: principal ids and "group:<name>"
	// entries. Empty means any principal with the approver role.
	Approvers []string `json:"approvers,omitempty"`
	// ValidFor is how long an approved, not yet consumed request stays valid
	// after its decision.
	ValidFor        time.Duration `json:"-"`
	Reviews         []Review      `json:"reviews"`
	DecidedBy       string        `json:"decided_by,omitempty"`
	DecidedAt       time.Time     `json:"decided_at,omitzero"`
	Reason          string        `json:"reason,omitempty"`
	ConsumedAt      time.Time     `json:"consumed_at,omitzero"`
	DispatchOutcome Outcome       `json:"dispatch_outcome,omitempty"`
	// ConsumeToken is the token of the consume that moved r to consumed:
	// random, made by the holder of the call (one per holder, never
	// shared), so that a holder whose consume committed although it saw an
	// error (the COMMIT's reply lost) can tell its own consume from another
	// holder's when it reads r again (see [Request.ConsumedWith]). Stored,
	// never shown: not part of the request's JSON.
	ConsumeToken string `json:"-"`
	// HeldBy names the gateway instance whose caller waits on the request;
	// LeaseUntil is when that hold lapses unless renewed.
	HeldBy     string    `json:"held_by,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// AnsweredAt is when a denial was delivered to an identical re-send of
	// the call (see Answer); an unanswered denial is answered once, after
	// which an identical call starts a new request.
	AnsweredAt time.Time `json:"answered_at,omitzero"`
	// Kind is what is to be approved: KindToolCall (or ""),
	// KindResourceRead, KindPromptGet, KindSessionPolicy or
	// KindPolicyChange. For the policy kinds, Server and
	// Tool are empty, Arguments is the display copy of the proposed change
	// and ArgumentsHash its digest.
	Kind string `json:"kind,omitempty"`
	// Target names what a policy approval changes: the session id for
	// session_policy, "deployment" for policy_change.
	Target string `json:"target,omitempty"`
	// BaseRevision is the revision a proposed change was made against; the
	// approval is void once the revision moved.
	BaseRevision int64 `json:"base_revision,omitempty"`
	// PolicyRevision is the revision of the deployment policy whose
	// decision asked for this approval (policy.Decision.Revision), shown to
	// approvers; "" when unknown.
	PolicyRevision string `json:"policy_revision,omitempty"`
	// TimeoutRule names the rule whose timeout ExpiresAt came from
	// (policy.Decision.TimeoutRule): with several matching approve rules,
	// the strictest timeout may be another's than Rule's. Empty when
	// unknown (requests made before migration 17, policy requests).
	TimeoutRule string `json:"timeout_rule,omitempty"`
	// NoGrants is set when the policy decision that held the call forbids
	// grants (policy.Approval.GrantsAllowed false: a matching approve rule
	// or the policy's approval says grants: false) or the instance that
	// held it has grants turned off (config grants.enabled: false): an
	// approve with grant terms is refused. false for requests made before
	// migration 27.
	NoGrants bool `json:"no_grants,omitempty"`
}

// Binding is what an approval is bound to; consume compares it with the call
// about to be dispatched.
type Binding struct {
	Principal     string
	Server        string
	Tool          string
	ArgumentsHash string
	ToolDigest    string
}

// Binding returns the binding recorded on r.
func (r *Request) Binding() Binding {
	return Binding{Principal: r.RequestedBy, Server: r.Server, Tool: r.Tool, ArgumentsHash: r.ArgumentsHash, ToolDigest: r.ToolDigest}
}

// EventType names a transition recorded in the event log.
type EventType string

const (
	EventRequested   EventType = "requested"
	EventReviewed    EventType = "reviewed"
	EventApproved    EventType = "approved"
	EventDenied      EventType = "denied"
	EventExpired     EventType = "expired"
	EventCancelled   EventType = "cancelled"
	EventConsumed    EventType = "consumed"
	EventInvalidated EventType = "invalidated"
	EventDispatched  EventType = "dispatched" // dispatch outcome recorded

	// Session events carry SessionID and no RequestID (issue 5).
	EventSessionCreated       EventType = "session_created"        // a root session
	EventChildCreated         EventType = "child_created"          // a child session
	EventSessionPolicyChanged EventType = "session_policy_changed" // a session's policy was written
	EventSessionRevoked       EventType = "session_revoked"        // one event per revoked session
)

// Event is one row of the event log, written in the same transaction as the
// state change it records. Approval events have a RequestID; session events
// have a SessionID instead, and grant events a GrantID (both with an empty
// State).
type Event struct {
	Seq       int64     `json:"seq"`
	RequestID ID        `json:"request_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	GrantID   string    `json:"grant_id,omitempty"`
	Type      EventType `json:"type"`
	State     State     `json:"state"`
	Actor     string    `json:"actor,omitempty"`
	At        time.Time `json:"at"`
}
