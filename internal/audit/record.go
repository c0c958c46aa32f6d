package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"
)

// Types of audit events that are not event log types. Events of the store's
// event log keep their own type (requested, reviewed, approved, denied,
// expired, consumed, invalidated, cancelled, dispatched, session_created,
// child_created, session_policy_changed, session_revoked, policy_changed,
// the grant events) and carry an approval_id, session_id, grant_id or
// policy_revision.
const (
	// TypeAllowed is a call the policy allowed without an approval.
	TypeAllowed = "allowed"
	// TypeRefused is a call refused without an approval request (a deny
	// rule, a session's exclusion, an evaluation error, a cap).
	TypeRefused = "refused"
	// TypeMonitored is a monitor-mode verdict on a call that went through
	// an approval request (approval_id names it).
	TypeMonitored = "monitored"
)

// Record is one audit event as it is chained and exported: its canonical
// JSON (RFC 8785 key order, package approval) is what the chain hashes.
// Never raw arguments: ArgumentsHash and the redacted display copy only.
type Record struct {
	Seq  int64  `json:"seq"`
	At   string `json:"at"` // RFC 3339, UTC, milliseconds
	Type string `json:"type"`
	// EventSeq is the event log's seq of an event-log record.
	EventSeq   int64  `json:"event_seq,omitempty"`
	ApprovalID string `json:"approval_id,omitempty"`
	SessionID  string `json:"session_id,omitempty"`
	// GrantID names the remembered grant of a grant event, or the grant
	// that allowed an allowed call in place of an approval.
	GrantID        string `json:"grant_id,omitempty"`
	PolicyRevision int64  `json:"policy_revision,omitempty"`
	// Actor is who made an event-log change (a reviewer, the sweeper, a
	// gateway instance).
	Actor string `json:"actor,omitempty"`
	// State is the request's state as the event committed it.
	State      string `json:"state,omitempty"`
	Principal  string `json:"principal,omitempty"`
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
	Tenant     string `json:"tenant,omitempty"`
	// Kind is tool_call, resource_read, prompt_get, session_policy or
	// policy_change.
	Kind            string          `json:"kind,omitempty"`
	Server          string          `json:"server,omitempty"`
	Tool            string          `json:"tool,omitempty"`
	Rule            string          `json:"rule,omitempty"`
	Policy          string          `json:"policy,omitempty"` // revision digest of the policy that decided
	ArgumentsHash   string          `json:"arguments_hash,omitempty"`
	Arguments       json.RawMessage `json:"arguments,omitempty"` // redacted display copy
	DisplayWarnings []string        `json:"display_warnings,omitempty"`
	Monitor         *policy.Monitor `json:"monitor,omitempty"`
	// Verdict is a reviewed event's vote (approve or deny).
	Verdict string `json:"verdict,omitempty"`
	// Reason: why a call was refused, a request denied, invalidated or
	// cancelled.
	Reason string `json:"reason,omitempty"`
	// Code is a refused call's reason code where its refusal has one
	// (quorum_unreachable: gate.CodeQuorumUnreachable); "" otherwise.
	Code string `json:"code,omitempty"`
	// Outcome is a dispatched event's dispatch outcome.
	Outcome string `json:"outcome,omitempty"`

	// argumentsCanonical, when set, is Arguments' canonical form, as
	// the parse that made Arguments wrote it (callRecord): canonicalPlain
	// need not parse them again.
	argumentsCanonical []byte
}

// Time formats t as a Record's At.
func Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// Canonical returns the canonical JSON of r: what the chain hashes and
// stores.
func (r Record) Canonical() ([]byte, error) {
	if b, ok := r.canonicalPlain(); ok {
		return b, nil
	}
	return r.canonicalDecoded()
}

// canonicalDecoded is Canonical by encoding r and canonicalizing the
// encoding (approval.Canonicalize): the answer for any record.
func (r Record) canonicalDecoded() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("audit record %d: %w", r.Seq, err)
	}
	c, err := approval.Canonicalize(b)
	if err != nil {
		return nil, fmt.Errorf("audit record %d: %w", r.Seq, err)
	}
	return c, nil
}

// LinkHash is the hash of a link: "sha256:" + lowercase hex SHA-256 of
// prev (the previous link's hash, "" for the first) followed by record
// (canonical JSON).
func LinkHash(prev string, record []byte) string {
	var l linkHasher
	return l.hash(prev, record)
}

// A linkHasher computes LinkHash for the links of one batch with one
// string per link (issue 13: a hash state, a sum, its hex and the joined
// string per link before): what it hashes is copied into one buffer that
// the batch reuses.
type linkHasher struct {
	in  []byte
	out [len("sha256:") + 2*sha256.Size]byte
}

func (l *linkHasher) hash(prev string, record []byte) string {
	l.in = append(append(l.in[:0], prev...), record...)
	sum := sha256.Sum256(l.in)
	copy(l.out[:], "sha256:")
	hex.Encode(l.out[len("sha256:"):], sum[:])
	return string(l.out[:])
}

// fromEvent describes an event of the event log.
func fromEvent(s store.AuditSource) Record {
	ev := s.Event
	r := Record{At: Time(ev.At), Type: string(ev.Type), EventSeq: ev.Seq, ApprovalID: string(ev.RequestID),
		SessionID: ev.SessionID, GrantID: ev.GrantID, PolicyRevision: s.PolicyRevision, Actor: ev.Actor, State: string(ev.State)}
	if ev.SessionID != "" || ev.GrantID != "" {
		r.Tenant = s.Tenant
	}
	req := s.Request
	if req == nil {
		return r
	}
	r.State = string(ev.State)
	r.Principal, r.OnBehalfOf, r.Tenant = req.RequestedBy, req.OnBehalfOf, req.Tenant
	r.Kind, r.Server, r.Tool, r.Rule = req.Kind, req.Server, req.Tool, req.Rule
	if r.Kind == "" {
		r.Kind = approval.KindToolCall
	}
	r.ArgumentsHash = req.ArgumentsHash
	switch ev.Type {
	case approval.EventRequested:
		r.Arguments, r.DisplayWarnings = req.Arguments, req.DisplayWarnings
	case approval.EventReviewed:
		for _, rv := range req.Reviews {
			if rv.By == ev.Actor && store.Millis(rv.At).Equal(ev.At) {
				r.Verdict, r.Reason = string(rv.Verdict), rv.Reason
			}
		}
	case approval.EventType(approval.StateDenied), approval.EventType(approval.StateInvalidated),
		approval.EventType(approval.StateCancelled), approval.EventType(approval.StateExpired):
		r.Reason = req.Reason
	case approval.EventDispatched:
		r.Outcome = string(req.DispatchOutcome)
	}
	return r
}
